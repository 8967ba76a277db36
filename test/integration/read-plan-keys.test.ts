import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TenantKeys } from "../../src/store/keys.js";
import { ReadPlan } from "../../src/store/read-plan.js";
import { StateSlots } from "../../src/store/state-slots.js";
import { planBuckets } from "../../src/store/bucket-reads.js";
import { commandsDuring } from "../helpers/monitor.js";
import { startTestRedis } from "../helpers/redis-server.js";

/**
 * lua/readPlan-1.lua on Redis Cluster (DESIGN.md: every key a script touches is passed in KEYS,
 * all of one slot). A one-node Cluster lets a script touch an undeclared key of the declared
 * slot, so cluster-node.test.ts cannot see a key passed in ARGV: here MONITOR shows every key
 * the script read, and each must be among the call's declared keys, all under the user's hash tag.
 * Its own redis-server: MONITOR sees every client.
 */
const keys = new TenantKeys("rp");
const SHARD = 3;
const USER = "ada";
const userKey = keys.user(SHARD, USER);
const hashTag = (key: string): string => key.slice(0, key.indexOf("}") + 1);

let server: Awaited<ReturnType<typeof startTestRedis>>;
let redis: Redis;

beforeAll(async () => {
  server = await startTestRedis();
  redis = new Redis(server.url);
  // A known user (the plan reads nothing without the hot state `s`), a name, buckets of one
  // series (months 2026-10 and 2026-11: monthly periods as domain/periods.ts numbers them), and
  // a streak history.
  await redis.hset(userKey, "s", "x", "nm", "Ada");
  await redis.zadd(keys.streakHistory(SHARD, USER), 5, "5:1", 6, "6:2");
});

afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
});

describe("lua/readPlan-1.lua's keys", () => {
  it("every key a plan reads is declared in KEYS, all in the user's slot, and the results are those of its steps", async () => {
    const plan = new ReadPlan(StateSlots.of([]));
    const name = plan.fields(["nm"]);
    const history = plan.revRange(keys.streakHistory(SHARD, USER), "+inf", "-inf", 5);
    const ascending = plan.range(keys.streakHistory(SHARD, USER), "-inf", 5);
    const boosts = plan.hash(keys.userBoosts(SHARD), ["none"]);
    const buckets = planBuckets(plan, keys, SHARD, "m:lessons", USER, 20_000, 20_030);
    let result: unknown[][] | null = null;
    const seen = await commandsDuring(server.url, async () => {
      result = await plan.run(redis, userKey);
    });

    const call = seen.commands.find((args) => args[0]!.toLowerCase() === "fcall")!;
    const declared = call.slice(3, 3 + Number(call[2]));
    const touched = seen.luaCommands.map((args) => args[1]!);
    expect(touched).toEqual(expect.arrayContaining([userKey, keys.streakHistory(SHARD, USER), keys.userBoosts(SHARD), keys.buckets(SHARD, "m:lessons", USER), keys.openMonths(SHARD)]));
    for (const key of touched) expect(declared).toContain(key);
    expect(new Set(declared.map(hashTag))).toEqual(new Set([`{rp:${SHARD}}`]));
    // No key among the arguments: every argument after the keys is a step's op code, bound or field.
    expect(call.slice(3 + declared.length).filter((arg) => arg.startsWith("{"))).toEqual([]);

    expect(result![name]).toEqual(["Ada"]);
    expect(result![history]).toEqual(["6:2", "5:1"]);
    expect(result![ascending]).toEqual(["5:1"]);
    expect(result![boosts]).toEqual([null]);
    expect(buckets(result!)).toEqual({ before: null, inRange: [] });
  });

  it("an unknown user reads as null, whatever keys its steps name", async () => {
    const plan = new ReadPlan(StateSlots.of([]));
    plan.range(keys.streakHistory(SHARD, "nobody"), "-inf", "+inf");
    expect(await plan.run(redis, keys.user(SHARD, "nobody"))).toBeNull();
  });
});
