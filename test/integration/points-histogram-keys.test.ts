import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CompiledTenant } from "../../src/config/compiled.js";
import { READ_SCRIPTS } from "../../src/store/lua-loader.js";
import { ReadStore } from "../../src/store/read-store.js";
import { preloadScripts } from "../../src/store/redis-script.js";
import { StateSlots } from "../../src/store/state-slots.js";
import { commandsDuring, hashTagOf, keysOfCall } from "../helpers/monitor.js";
import { startTestRedis } from "../helpers/redis-server.js";

/**
 * lua/pointsHistogram-2.lua on Redis Cluster (DESIGN.md: every key a script touches is passed in
 * KEYS, all of one slot), as read-plan-keys.test.ts checks the read plan: with no filter, one
 * attribute pair and two, MONITOR shows every key each shard's call read, and each must be among
 * that call's declared keys, all under the shard's hash tag. A filter's groups ({t:s}:uv, {t:s}:pa)
 * were built inside the script from the hash tag. The reads go one call a shard, as on a Cluster
 * node (this client never learned it talks to a standalone Redis: src/store/cross-shard.ts).
 * Its own redis-server: MONITOR sees every client.
 */
const SHARDS = 2;
const tenant = { id: "ph", shards: SHARDS } as unknown as CompiledTenant;
const RANGES: [number, number][] = [
  [0, 9],
  [10, 99],
];

let server: Awaited<ReturnType<typeof startTestRedis>>;
let redis: Redis;
let store: ReadStore;

beforeAll(async () => {
  server = await startTestRedis();
  redis = new Redis(server.url);
  store = new ReadStore(redis, tenant, StateSlots.of([]));
  await preloadScripts(redis, READ_SCRIPTS);
  // On each shard: three users with 5, 20 and 0 coins; the first two on the pro plan, the first
  // alone on mobile too.
  const k = store.keys;
  for (let s = 0; s < SHARDS; s++) {
    const [a, b, c] = [`a${s}`, `b${s}`, `c${s}`];
    await redis.hset(k.agg(s), "users", 3);
    await redis.zadd(k.pointsZset(s, "coins"), 5, a, 20, b, 0, c);
    await redis.sadd(k.attributeUsers(s, "plan", "pro"), a, b);
    await redis.zadd(k.attributePoints(s, "coins", "plan", "pro"), 5, a, 20, b);
    await redis.sadd(k.attributeUsers(s, "device", "mobile"), a);
    await redis.zadd(k.attributePoints(s, "coins", "device", "mobile"), 5, a);
  }
});

afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
});

describe("lua/pointsHistogram-2.lua's keys", () => {
  it.each([
    ["no filter", null, { users: 6, withPoints: 4, max: 20, counts: [4, 2] }],
    ["one pair", new Map([["plan", "pro"]]), { users: 4, withPoints: 4, max: 20, counts: [2, 2] }],
    [
      "two pairs",
      new Map([
        ["plan", "pro"],
        ["device", "mobile"],
      ]),
      { users: 2, withPoints: 2, max: 5, counts: [2, 0] },
    ],
  ])("%s: every key a shard's call reads is declared, all of the shard's slot", async (_name, filter, expected) => {
    let histogram: unknown = null;
    const seen = await commandsDuring(server.url, async () => {
      histogram = await store.pointsHistogram("coins", RANGES, filter);
    });

    expect(seen.scriptCalls).toHaveLength(SHARDS);
    for (const { call, touched } of seen.scriptCalls) {
      const { declared, args } = keysOfCall(call);
      expect(touched.length).toBeGreaterThan(0);
      for (const command of touched) {
        // ZINTER and SINTERCARD name their keys after a count; every other command, its key first.
        const counted = ["zinter", "sintercard"].includes(command[0]!.toLowerCase());
        const keys = counted ? command.slice(2, 2 + Number(command[1])) : [command[1]!];
        for (const key of keys) expect(declared).toContain(key);
      }
      expect(new Set(declared.map(hashTagOf)).size).toBe(1);
      expect(args.filter((arg) => arg.startsWith("{"))).toEqual([]);
    }
    expect(histogram).toEqual(expected);
  });
});
