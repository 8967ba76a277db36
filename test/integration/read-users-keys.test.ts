import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CompiledTenant } from "../../src/config/compiled.js";
import { shardOf } from "../../src/store/keys.js";
import { READ_SCRIPTS } from "../../src/store/lua-loader.js";
import { ReadStore } from "../../src/store/read-store.js";
import { preloadScripts } from "../../src/store/redis-script.js";
import { StateSlots } from "../../src/store/state-slots.js";
import { commandsDuring, hashTagOf, keysOfCall } from "../helpers/monitor.js";
import { startTestRedis } from "../helpers/redis-server.js";

/**
 * lua/readUsers-1.lua on Redis Cluster (DESIGN.md: every key a script touches is passed in KEYS,
 * all of one slot), as read-plan-keys.test.ts checks the read plan: MONITOR shows every key the
 * script read, and each must be among its call's declared keys, all under one shard's hash tag.
 * The reads go one call a shard, as on a Cluster node (this client never learned it talks to a
 * standalone Redis: src/store/cross-shard.ts). Its own redis-server: MONITOR sees every client.
 */
const SHARDS = 4;
const tenant = { id: "ru", shards: SHARDS } as unknown as CompiledTenant;

let server: Awaited<ReturnType<typeof startTestRedis>>;
let redis: Redis;
let store: ReadStore;
/** Users on two shards: two known on the first, one known and one unknown on the second. */
let users: string[];

beforeAll(async () => {
  server = await startTestRedis();
  redis = new Redis(server.url);
  store = new ReadStore(redis, tenant, StateSlots.of([]));
  // Loaded before: a first call's "Function not found" and its retry would be two calls more.
  await preloadScripts(redis, READ_SCRIPTS);
  const byShard = new Map<number, string[]>();
  for (let i = 0; [...byShard.values()].filter((ids) => ids.length >= 2).length < 2; i++) {
    const id = `u${i}`;
    const shard = shardOf(id, SHARDS);
    byShard.set(shard, [...(byShard.get(shard) ?? []), id]);
  }
  const [first, second] = [...byShard.values()].filter((ids) => ids.length >= 2);
  users = [first![0]!, first![1]!, second![0]!, second![1]!];
  // The hot state `s` (an empty msgpack array) and a name; users[3] has none: unknown.
  for (const id of users.slice(0, 3)) await redis.hset(store.keys.user(store.shard(id), id), "s", Buffer.from([0x90]), "nm", `name of ${id}`);
});

afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
});

describe("lua/readUsers-1.lua's keys", () => {
  it("every user hash the script reads is declared in KEYS, one shard's a call, and the answers are the users'", async () => {
    let read: Awaited<ReturnType<ReadStore["users"]>> | null = null;
    const seen = await commandsDuring(server.url, async () => {
      read = await store.users(users, [], ["nm"]);
    });

    expect(seen.scriptCalls).toHaveLength(2);
    const touchedAll: string[] = [];
    for (const { call, touched } of seen.scriptCalls) {
      const { declared, args } = keysOfCall(call);
      for (const command of touched) {
        expect(declared).toContain(command[1]);
        touchedAll.push(command[1]!);
      }
      expect(new Set(declared.map(hashTagOf)).size).toBe(1);
      // No key among the arguments: they are the state keys' count and the fields.
      expect(args.filter((arg) => arg.startsWith("{"))).toEqual([]);
    }
    expect(touchedAll.sort()).toEqual(users.map((id) => store.keys.user(store.shard(id), id)).sort());

    expect(read!.get(users[0]!)).toEqual({ state: [], fields: [`name of ${users[0]}`] });
    expect(read!.get(users[2]!)).toEqual({ state: [], fields: [`name of ${users[2]}`] });
    expect(read!.get(users[3]!)).toBeNull();
  });
});
