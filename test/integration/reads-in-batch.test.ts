import { inject } from "vitest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRedisClient } from "../../src/store/redis-client.js";
import { readStoreOf, ReadStore } from "../../src/store/read-store.js";
import { boardKeys, rankOf, topEntries } from "../../src/store/leaderboard-store.js";
import { activeRun } from "../../src/domain/leaderboards.js";
import type { TenantStore } from "../../src/store/tenant-store.js";
import { demoConfig, startTestApp, type TestApp } from "../helpers/app.js";
import { wavesDuring } from "../helpers/waves.js";

/**
 * src/store/reads-in-batch.ts: a tenant-wide read asked for by several requests in
 * one turn of the event loop is sent once, in the batch the write coalescing sends at the turn's
 * end, and its reply goes to all of them (a read that differs by an item, once for all items);
 * a read asked for after that batch was written is sent again. On a real Redis, with the app's own client and stores; the turns are the test's own
 * (calls made in one synchronous block share a turn), so nothing depends on the box's speed.
 */

let t: TestApp;
let store: TenantStore;
const FIELDS = ["users", "ac:first-lesson", "ac:ten-lessons"];

beforeAll(async () => {
  t = await startTestApp({ yaml: demoConfig().yaml, jobs: false });
  store = t.app.tenants.all[0]!.store;
  expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "a" }, value: 1 })).status).toBe(201);
});
afterAll(async () => t.close());

describe("the achievements' counters (ReadStore.counters)", () => {
  it("are read once for every caller in one turn, for each set of fields, and each gets the sums", async () => {
    const read = readStoreOf(store);
    const { result, waves } = await wavesDuring(t.redis, async () => {
      return Promise.all([read.counters(FIELDS), read.counters(FIELDS), read.counters(["users"])]);
    });
    // The two callers of the same fields share one reply.
    expect(result[1]).toBe(result[0]);
    // One wave: 16 HMGETs for the three fields (shared by two callers), 16 for "users" alone.
    expect(waves).toHaveLength(1);
    expect(waves[0]!.length).toBe(2 * store.tenant.shards);
    expect(result).toEqual([[1, 1, 0], [1, 1, 0], [1]]);
  });

  it("are read again once the batch is written: a later caller sees what was written since", async () => {
    const read = readStoreOf(store);
    const before = read.counters(FIELDS);
    expect(await before).toEqual([1, 1, 0]);
    // A write acknowledged after that read: a new user completing its first lesson.
    expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "b" }, value: 1 })).status).toBe(201);
    const after = await read.counters(FIELDS);
    expect(after).not.toBe(await before);
    expect(after).toEqual([2, 2, 0]);
    // And through the route, which shares the same way.
    const listed = await t.call("GET", "/v1/achievements");
    const completions = Object.fromEntries(listed.body.map((a: { key: string; completions: number }) => [a.key, a.completions]));
    expect(completions).toMatchObject({ "first-lesson": 2, "ten-lessons": 0 });
  });

  it("are not shared on a client that writes each command at once (LAUREL_COALESCE=off): nothing is held unsent", async () => {
    const uncoalesced = createRedisClient(inject("redisUrl"), {}, { LAUREL_COALESCE: "off" });
    try {
      await uncoalesced.ping();
      const read = new ReadStore(uncoalesced, store.tenant, store.slots);
      const { result, waves } = await wavesDuring(uncoalesced, async () => {
        return Promise.all([read.counters(FIELDS), read.counters(FIELDS)]);
      });
      expect(result[1]).not.toBe(result[0]);
      expect(waves.flat()).toHaveLength(2 * store.tenant.shards);
      expect(result).toEqual([[2, 2, 0], [2, 2, 0]]);
    } finally {
      uncoalesced.disconnect();
    }
  });
});

describe("a board's page (GET /v1/leaderboards/{key})", () => {
  it("reads its entries, and its first entry's rank, once for every request for that page in one turn", async () => {
    const board = store.tenant.leaderboards.find((b) => b.key === "xp-all-time")!;
    const keys = boardKeys(store, board, activeRun(board, Date.now())!, "");
    const { result, waves } = await wavesDuring(t.redis, async () => {
      const [entries, again, five] = await Promise.all([topEntries(store, keys, 10), topEntries(store, keys, 10), topEntries(store, keys, 5)]);
      expect(again).toBe(entries);
      expect(five).not.toBe(entries);
      // The second entry has the first's value: on this competition board the same rank, the
      // same read (pages around two users that begin on one value).
      const ranks = await Promise.all([
        rankOf(store, board, keys, entries[0]!.value, entries[0]!.member),
        rankOf(store, board, keys, entries[0]!.value, entries[0]!.member),
        rankOf(store, board, keys, entries[1]!.value, entries[1]!.member),
      ]);
      return { entries, ranks };
    });
    // The pages of 10 and of 5 (a ZREVRANGE a shard each), then the one rank call.
    expect(waves.map((wave) => wave.length)).toEqual([2 * store.tenant.shards, 1]);
    expect(result.entries.map((e) => e.value)).toEqual([10, 10]);
    expect(result.ranks).toEqual([1, 1, 1]);
  });

  it("reads its users' names once for every request for that page in one turn (the webhook payload's top 10 too)", async () => {
    expect((await t.call("POST", "/v1/users", { id: "named", name: "Named One" })).status).toBe(201);
    const read = readStoreOf(store);
    const { result, waves } = await wavesDuring(t.redis, async () => {
      const first = read.names(["a", "named"]);
      const second = read.names(["a", "named"]);
      return Promise.all([first, second]);
    });
    // Two HGETs in all, not four: the second caller had the first's.
    expect(waves).toEqual([["hget", "hget"]]);
    for (const names of result) expect([...names]).toEqual([["a", null], ["named", "Named One"]]);
  });
});

describe("names of different lists (ReadStore.names)", () => {
  it("read once for every caller in one turn, each user once, each caller only its own, in its order", async () => {
    const read = readStoreOf(store);
    const { result, waves } = await wavesDuring(t.redis, () => Promise.all([read.names(["named", "a"]), read.names(["nobody", "named"])]));
    // a, named and nobody: three HGETs for two lists of two.
    expect(waves).toEqual([["hget", "hget", "hget"]]);
    expect(result.map((names) => [...names])).toEqual([
      [["named", "Named One"], ["a", null]],
      [["nobody", null], ["named", "Named One"]],
    ]);
  });

  it("are not shared with a list asked for after the turn's batch was written (the name changed since)", async () => {
    const read = readStoreOf(store);
    const before = await read.names(["named"]);
    expect((await t.call("POST", "/v1/users", { id: "named", name: "Renamed" })).status).toBe(200);
    const after = await read.names(["named"]);
    expect([before.get("named"), after.get("named")]).toEqual(["Named One", "Renamed"]);
    expect((await t.call("POST", "/v1/users", { id: "named", name: "Named One" })).status).toBe(200);
  });
});

describe("the points and level summaries", () => {
  it("read once for every caller in one turn with the same system, filter and ranges", async () => {
    const read = readStoreOf(store);
    const { result, waves } = await wavesDuring(t.redis, async () => {
      const [levels, levelsAgain, histogram, histogramAgain, other] = await Promise.all([
        read.usersAtLevels("xp", [50, 200, 1000]),
        read.usersAtLevels("xp", [50, 200, 1000]),
        read.pointsHistogram("xp", [[1, 10]]),
        read.pointsHistogram("xp", [[1, 10]]),
        read.pointsHistogram("xp", [[1, 20]]),
      ]);
      expect(levelsAgain).toBe(levels);
      expect(histogramAgain).toBe(histogram);
      expect(other).not.toBe(histogram);
      return { levels, histogram };
    });
    // One call over every shard each: the levels, and the two histograms.
    expect(waves.map((wave) => wave.length)).toEqual([3]);
    // Users a and b, 10 points each: none above bronze (50).
    expect(result.levels).toEqual([0, 0, 0]);
    expect(result.histogram).toMatchObject({ withPoints: 2, max: 10, counts: [2] });
  });
});

describe("a streak's rank (ReadStore.streakRank: ReadsInBatch.gather)", () => {
  // Users a and b hold a streak of 1 (their lesson of today, above); "named" holds none.
  const DAY = 86_400_000;

  it("is read in one call for every caller in one turn, each distinct length counted once", async () => {
    const read = readStoreOf(store);
    const now = Date.now();
    // Each alone: its own batch, its own call.
    expect([await read.streakRank(0, now), await read.streakRank(1, now)]).toEqual([3, 1]);
    const { result, waves } = await wavesDuring(t.redis, () => Promise.all([read.streakRank(0, now), read.streakRank(1, now), read.streakRank(0, now)]));
    expect(waves.map((wave) => wave.length)).toEqual([1]);
    expect(result).toEqual([3, 1, 3]);
  });

  it("is read at the latest of its callers' instants", async () => {
    const read = readStoreOf(store);
    const now = Date.now();
    // Three days on, every streak of today is lost: at that instant nobody is ahead.
    const [early, late] = await Promise.all([read.streakRank(0, now), read.streakRank(0, now + 3 * DAY)]);
    expect([early, late]).toEqual([1, 1]);
    expect(await read.streakRank(0, now)).toBe(3);
  });

  it("is read again once the batch is written: a later caller sees a streak begun since", async () => {
    const read = readStoreOf(store);
    const now = Date.now();
    expect(await read.streakRank(0, now)).toBe(3);
    expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "c" }, value: 1 })).status).toBe(201);
    expect(await read.streakRank(0, Date.now())).toBe(4);
    // And through the route: c's rank among the four streaks of 1 (competition: all first).
    const streak = await t.call("GET", "/v1/users/c/streak");
    expect(streak.body).toMatchObject({ length: 1, rank: 1 });
  });

  it("is not gathered on a client that writes each command at once (LAUREL_COALESCE=off)", async () => {
    const uncoalesced = createRedisClient(inject("redisUrl"), {}, { LAUREL_COALESCE: "off" });
    try {
      await uncoalesced.ping();
      const read = new ReadStore(uncoalesced, store.tenant, store.slots);
      const now = Date.now();
      const { result, waves } = await wavesDuring(uncoalesced, () => Promise.all([read.streakRank(0, now), read.streakRank(1, now)]));
      // This client has not asked whether Redis is standalone (learnShardsPerCall), so it calls
      // as on a Cluster node: one call a shard, whose counts are added up here. Each caller its own.
      expect(waves.flat()).toHaveLength(2 * store.tenant.shards);
      expect(result).toEqual([4, 1]);
    } finally {
      uncoalesced.disconnect();
    }
  });
});

describe("the streak rankings and the users they name (ReadsInBatch.gather)", () => {
  // Users a, b and c hold a streak of 1 (their lessons of today, above).
  it("read the active streaks once for every caller in one turn: the most asked for, each caller its own top", async () => {
    const read = readStoreOf(store);
    const now = Date.now();
    const alone = [(await read.activeStreaks(1, now)).top, (await read.activeStreaks(3, now)).top];
    expect(alone[1]!.map((s) => s.userId)).toEqual(["c", "b", "a"]);
    const { result, waves } = await wavesDuring(t.redis, () => Promise.all([read.activeStreaks(1, now), read.activeStreaks(3, now)]));
    expect(waves.map((wave) => wave.length)).toEqual([1]);
    expect(result.map((r) => r.top)).toEqual(alone);
  });

  it("read the longest streaks once for every caller in one turn", async () => {
    const read = readStoreOf(store);
    const alone = [await read.longestStreaks(2), await read.longestStreaks(3)];
    const { result, waves } = await wavesDuring(t.redis, () => Promise.all([read.longestStreaks(2), read.longestStreaks(3)]));
    // A ZREVRANGE a shard, for both callers.
    expect(waves.map((wave) => wave.length)).toEqual([store.tenant.shards]);
    expect(result).toEqual(alone);
    expect(result[1]!.map((s) => s.userId)).toEqual(["c", "b", "a"]);
  });

  it("read the users asked for in one turn in one call, each once, and give each caller its own", async () => {
    const read = readStoreOf(store);
    const { result, waves } = await wavesDuring(t.redis, () => Promise.all([read.users(["a", "named"], [], ["nm"]), read.users(["named", "nobody"], [], ["nm"]), read.users(["a"], [], ["tz"])]));
    // One call for the names (a, named, nobody: named read once), one for the zones.
    expect(waves.map((wave) => wave.length)).toEqual([2]);
    expect(result.map((users) => [...users.entries()])).toEqual([
      [["a", { state: [], fields: [null] }], ["named", { state: [], fields: ["Named One"] }]],
      [["named", { state: [], fields: ["Named One"] }], ["nobody", null]],
      [["a", { state: [], fields: [null] }]],
    ]);
  });
});

describe("the points summary (GET /v1/points/{key}/summary)", () => {
  // The ranges the highest total sets are asked for in the call that finds it: those of the last
  // summary's highest total; only a total crossed into another power of ten takes a second call.
  const summary = async () => {
    const { result, waves } = await wavesDuring(t.redis, () => t.call("GET", "/v1/points/energy/summary"));
    expect(result.status).toBe(200);
    return { ranges: (result.body as { from: number; to: number; users: number }[]).map((r) => [r.from, r.to, r.users]), waves: waves.length };
  };

  it("is one round trip while the highest total stays under the same power of ten, two when it crosses, right either way", async () => {
    // Energy: 100 at a user's first event (maxPoints 100): the top is 100 for every user here.
    const first = await summary();
    expect(first.ranges.at(-1)!.slice(0, 2)).toEqual([91, 100]);
    const again = await summary();
    expect(again).toEqual({ ranges: first.ranges, waves: 1 });
    // Every user spends their energy down to 1..10: the top falls to 10, found by a second call.
    const read = readStoreOf(store);
    const before = await read.pointsHistogram("energy", [[1, 10]]);
    const holders: string[] = [];
    for (let s = 0; s < store.tenant.shards; s++) holders.push(...(await t.redis.zrangebyscore(store.keys.pointsZset(s, "energy"), "(10", "+inf")));
    expect(holders.length).toBeGreaterThan(0);
    for (const id of holders) {
      const res = await t.call("POST", "/v1/metrics/api-calls/event", { user: { id }, value: 95 });
      expect(res.status).toBe(201);
    }
    const after = await read.pointsHistogram("energy", [[1, 10]]);
    expect(after.max).toBeLessThanOrEqual(10);
    const crossed = await summary();
    expect(crossed.waves).toBe(2);
    expect(crossed.ranges.at(-1)!.slice(0, 2)).toEqual([10, 10]);
    expect(crossed.ranges.slice(1).reduce((n, r) => n + r[2]!, 0)).toBe(after.withPoints);
    expect(before.withPoints).toBe(after.withPoints);
    expect(await summary()).toEqual({ ranges: crossed.ranges, waves: 1 });
  });
});
