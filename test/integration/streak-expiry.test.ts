import { Queue } from "bullmq";
import { Command, Redis } from "ioredis";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inject } from "vitest";
import { startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { lessonsTenantYaml, streakTenantYaml, tenantYaml } from "../helpers/tenant-yaml.js";
import { StreakExpiry, sweepExpiredStreaks } from "../../src/jobs/streak-expiry.js";
import { queueConnection } from "../../src/store/redis-client.js";
import { shardOf } from "../../src/domain/shards.js";

/**
 * Streak expiry (src/jobs/streak-expiry.ts): a streak is settled when its deadline passes, not
 * only at the user's next event, so users who stopped coming leave the active set, the rank, the
 * active rankings and the streak board. The webhook events it yields (streak.lost,
 * streak.freeze_consumed at the deadline): test/integration/webhooks.test.ts.
 */
let redis: Redis;
beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
});
afterAll(() => redis.disconnect());

async function lesson(t: TestApp, user: string): Promise<void> {
  const res = await t.call("POST", "/v1/metrics/lessons/event", { user: { id: user, tz: "UTC" }, value: 1 });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
}

describe("streak expiry", () => {
  it("settles a lost streak at its deadline: it leaves the active set, the rankings and the streak board, and the stream records the loss", async () => {
    const tenantId = uniqueTenantId("expiry");
    const t = await startTestApp({ yaml: streakTenantYaml(tenantId), manualClock: "2026-06-01T12:00:00Z" });
    try {
      expect(t.tenants[0]!.webhooks).toEqual([]);
      for (const user of ["ada", "bob", "cy"]) await lesson(t, user);
      await t.setClock("2026-06-02T12:00:00Z");
      await lesson(t, "cy");
      // ada and bob last extended on June 1: their streaks are lost at the end of June 2 (UTC).
      await t.setClock("2026-06-03T00:30:00Z");

      expect(await redis.zrange(`{${tenantId}:0}:sa`, 0, -1, "WITHSCORES")).toEqual(["cy", "2"]);
      expect(await redis.zrange(`{${tenantId}:0}:sd`, 0, -1)).toEqual(["cy"]);
      const records = await redis.xrange(`{${tenantId}:0}:x`, "-", "+");
      const losses = records.map(([, fields]) => fields.join(" ")).filter((text) => /(^|[ ;])sl:1([ ;]|$)/.test(text));
      expect(losses).toHaveLength(2);

      const rankings = await t.call("GET", "/v1/streaks/rankings?type=active");
      expect(rankings.body.map((r: { userId: string }) => r.userId)).toEqual(["cy"]);
      const board = await t.call("GET", "/v1/leaderboards/streaks");
      expect(board.status).toBe(200);
      expect(board.body.rankings.map((r: { userId: string; value: number }) => [r.userId, r.value])).toEqual([["cy", 2]]);
      const ada = await t.call("GET", "/v1/users/ada/streak");
      expect([ada.body.length, ada.body.rank]).toEqual([0, null]);
      const cy = await t.call("GET", "/v1/users/cy/streak");
      expect([cy.body.length, cy.body.rank]).toEqual([2, 1]);

      // The next event finds the streak already settled: it starts again at 1.
      await lesson(t, "ada");
      expect((await t.call("GET", "/v1/users/ada/streak")).body.length).toBe(1);
    } finally {
      await t.close();
    }
  });

  it("keeps the rank known with more than 1 000 lost streaks in a shard (the rank read's cap)", async () => {
    const tenantId = uniqueTenantId("expiry");
    const t = await startTestApp({ yaml: streakTenantYaml(tenantId), manualClock: "2026-06-01T12:00:00Z" });
    try {
      const users = Array.from({ length: 1005 }, (_, i) => `gone-${i}`);
      for (let i = 0; i < users.length; i += 50) await Promise.all(users.slice(i, i + 50).map((u) => lesson(t, u)));
      await lesson(t, "stays");
      await t.setClock("2026-06-02T12:00:00Z");
      await lesson(t, "stays");
      await t.setClock("2026-06-03T12:00:00Z");
      await lesson(t, "stays");

      expect(await redis.zcard(`{${tenantId}:0}:sa`)).toBe(1);
      const stays = await t.call("GET", "/v1/users/stays/streak");
      expect([stays.body.length, stays.body.rank]).toEqual([3, 1]);
    } finally {
      await t.close();
    }
  });

  it("settles the lost streaks of every shard, at the deadline itself (sd <= now is lost, as the rankings read it)", async () => {
    const tenantId = uniqueTenantId("expiry");
    const shards = 4;
    const t = await startTestApp({ yaml: streakTenantYaml(tenantId).replace("shards: 1", `shards: ${shards}`), manualClock: "2026-06-01T12:00:00Z" });
    try {
      const users = Array.from({ length: 12 }, (_, i) => `u${i}`);
      // The sweep must visit each shard: the users here live on all of them.
      expect(new Set(users.map((u) => shardOf(u, shards))).size).toBe(shards);
      for (const user of users) await lesson(t, user);
      // Extended on June 1 only: each streak is lost at the very start of June 3 (UTC).
      await t.setClock("2026-06-03T00:00:00Z");
      for (let shard = 0; shard < shards; shard++) {
        expect(await redis.zcard(`{${tenantId}:${shard}}:sa`), `shard ${shard}`).toBe(0);
        expect(await redis.zcard(`{${tenantId}:${shard}}:sd`), `shard ${shard}`).toBe(0);
      }
    } finally {
      await t.close();
    }
  });

  it("places the deadline at a day's first midnight where the clock goes back across it (Havana, Azores: 01:00 to 00:00)", async () => {
    const tenantId = uniqueTenantId("expiry");
    const t = await startTestApp({ yaml: streakTenantYaml(tenantId), manualClock: "2026-10-30T16:00:00Z" });
    try {
      const cases: [string, string, string][] = [
        // Havana leaves DST at 01:00 CDT on 1 November 2026: 00:00 comes at 04:00Z (-04) and again at 05:00Z (-05).
        ["havana", "America/Havana", "2026-11-01T04:00:00Z"],
        // The Azores at 01:00 (+00) on 25 October 2026: 00:00 at 00:00Z and again at 01:00Z (-01).
        ["azores", "Atlantic/Azores", "2026-10-25T00:00:00Z"],
      ];
      for (const [user, tz, deadline] of cases) {
        // One lesson on the day before the day before the deadline (local): the streak is lost when the deadline's day begins.
        const day = new Date(Date.parse(deadline) - 2 * 86_400_000 + 12 * 3_600_000).toISOString();
        await t.setClock(day);
        const res = await t.call("POST", "/v1/metrics/lessons/event", { user: { id: user, tz }, value: 1 });
        expect(res.status, JSON.stringify(res.body)).toBe(201);
        expect(Number(await redis.zscore(`{${tenantId}:0}:sd`, user)), user).toBe(Date.parse(deadline));
      }
      // The Azores' deadline: at 00:30Z it is 00:30 on 25 October there, the streak's day after its last one.
      await t.setClock("2026-10-25T00:30:00Z");
      expect(await redis.zscore(`{${tenantId}:0}:sa`, "azores")).toBeNull();
      // Havana's: at 04:30Z it is 00:30 on 1 November (-04). Lost in the index, the rankings and the user's read alike.
      await t.setClock("2026-11-01T04:30:00Z");
      expect(await redis.zrange(`{${tenantId}:0}:sa`, 0, -1)).toEqual([]);
      expect((await t.call("GET", "/v1/streaks/rankings?type=active")).body).toEqual([]);
      const havana = await t.call("GET", "/v1/users/havana/streak");
      expect([havana.body.length, havana.body.periodStart]).toEqual([0, "2026-11-01"]);
    } finally {
      await t.close();
    }
  });

  it("consumes a freeze at the deadline instead of losing the streak", async () => {
    const tenantId = uniqueTenantId("expiry");
    const yaml = streakTenantYaml(tenantId).replace("      metrics: [{ metric: lessons, threshold: 1 }]\n", "      metrics: [{ metric: lessons, threshold: 1 }]\n      freezes: { initial: 1, max: 2 }\n");
    const t = await startTestApp({ yaml, manualClock: "2026-06-01T12:00:00Z" });
    try {
      await lesson(t, "ada");
      await t.setClock("2026-06-03T00:30:00Z");
      // June 2 was missed: the freeze covered it, so the streak lives until the end of June 3.
      expect(await redis.zscore(`{${tenantId}:0}:sa`, "ada")).toBe("1");
      expect(Number(await redis.zscore(`{${tenantId}:0}:sd`, "ada"))).toBe(Date.parse("2026-06-04T00:00:00Z"));
      const streak = await t.call("GET", "/v1/users/ada/streak");
      expect([streak.body.length, streak.body.freezes]).toEqual([1, 0]);
    } finally {
      await t.close();
    }
  });

  it("runs one scheduler per tenant with a streak rule, endpoints or not, and removes it when the rule goes", async () => {
    const tenantId = uniqueTenantId("expiry");
    const scheduler = `{laurel-jobs}:laurel-streaks-${tenantId}:repeat`;
    const first = await startTestApp({ yaml: lessonsTenantYaml(tenantId, { url: "http://127.0.0.1:9/hooks", events: ["streak.lost"] }) });
    await first.close();
    expect(await redis.exists(scheduler)).toBe(1);
    const second = await startTestApp({ yaml: tenantYaml(tenantId, "    metrics: [{ key: lessons, name: Lessons }]\n") });
    await second.close();
    expect(await redis.exists(scheduler)).toBe(0);
  });
});

describe("a user whose zone keeps changing during the sweep", () => {
  it("is left due and settled by the next sweep; the sweep goes on and settles the others (README: errors, 503)", async () => {
    const tenantId = uniqueTenantId("expiry");
    const t = await startTestApp({ yaml: streakTenantYaml(tenantId), manualClock: "2026-06-01T12:00:00Z", jobs: false });
    // A connection of the sweep's own, as StreakExpiry gives it: before each settlement of
    // "mover" it sets another stored zone, as identifies moving the user between each of the
    // calls would, so that every attempt finds the zone changed (ZONE_CHANGING).
    const sweepRedis = new Redis(inject("redisUrl"));
    const send = sweepRedis.sendCommand.bind(sweepRedis);
    let moving = true;
    let flips = 0;
    try {
      const users = ["mover", ...Array.from({ length: 40 }, (_, i) => `still-${i}`)];
      for (const user of users) await lesson(t, user);
      const { store } = t.app.tenants.all[0]!;
      const moverKey = store.keys.user(store.shard("mover"), "mover");
      sweepRedis.sendCommand = ((command: Command, stream?: unknown) => {
        if (moving && ["fcall", "evalsha"].includes(command.name.toLowerCase()) && command.args.some((a) => String(a) === "mover")) {
          void send(new Command("hset", [moverKey, "tz", ++flips % 2 === 0 ? "Asia/Tokyo" : "America/New_York"]));
        }
        return send(command, stream as never);
      }) as Redis["sendCommand"];
      const sweeping = store.onConnection(sweepRedis);
      // Lost at the end of June 2 in any of these zones.
      const now = Date.parse("2026-06-04T12:00:00Z");
      expect(await sweepExpiredStreaks(sweeping, now)).toBe(users.length - 1);
      expect(flips).toBeGreaterThan(1);
      expect(await redis.zrange(`{${tenantId}:0}:sd`, 0, -1)).toEqual(["mover"]);
      expect(await redis.zrange(`{${tenantId}:0}:sa`, 0, -1)).toEqual(["mover"]);
      // Once the zone stays put, the next sweep settles it.
      moving = false;
      expect(await sweepExpiredStreaks(sweeping, now)).toBe(1);
      expect(await redis.zcard(`{${tenantId}:0}:sd`)).toBe(0);
    } finally {
      sweepRedis.disconnect();
      await t.close();
    }
  });
});

describe("a due user whose deadline moves during the sweep but stays past", () => {
  it("skips no other due user: each page is read past the users left, wherever they moved", async () => {
    const tenantId = uniqueTenantId("expiry");
    const t = await startTestApp({ yaml: streakTenantYaml(tenantId), manualClock: "2026-06-01T12:00:00Z", jobs: false });
    // As in the test above, "a-mover" finds its zone changed at every attempt (left due); and its
    // deadline is re-placed an hour later each time, still before now, as a zone change places it.
    // Every deadline is the end of June 2: the range is in name order, a-mover first.
    const sweepRedis = new Redis(inject("redisUrl"));
    const send = sweepRedis.sendCommand.bind(sweepRedis);
    let flips = 0;
    try {
      const users = ["a-mover", "b", "c", "d", "e"];
      for (const user of users) await lesson(t, user);
      const { store } = t.app.tenants.all[0]!;
      const moverKey = store.keys.user(store.shard("a-mover"), "a-mover");
      const sd = `{${tenantId}:0}:sd`;
      const moved = Date.parse("2026-06-03T01:00:00Z");
      sweepRedis.sendCommand = ((command: Command, stream?: unknown) => {
        if (["fcall", "evalsha"].includes(command.name.toLowerCase()) && command.args.some((a) => String(a) === "a-mover")) {
          void send(new Command("hset", [moverKey, "tz", ++flips % 2 === 0 ? "Asia/Tokyo" : "America/New_York"]));
          void send(new Command("zadd", [sd, moved, "a-mover"]));
        }
        return send(command, stream as never);
      }) as Redis["sendCommand"];
      const sweeping = store.onConnection(sweepRedis);
      // Pages of two: [a-mover, b], then a-mover sits behind c, d and e. An offset of one (the
      // user left) read [d, e] next and skipped c until the next sweep.
      const now = Date.parse("2026-06-04T12:00:00Z");
      expect(await sweepExpiredStreaks(sweeping, now, 2)).toBe(users.length - 1);
      expect(await redis.zrange(sd, 0, -1, "WITHSCORES")).toEqual(["a-mover", String(moved)]);
    } finally {
      sweepRedis.disconnect();
      await t.close();
    }
  });
});

describe("a due user whose state is missing (lost data, or deleted by hand)", () => {
  it("leaves the active set and the deadline index at the sweep that finds it, and the others are settled", async () => {
    const tenantId = uniqueTenantId("expiry");
    const t = await startTestApp({ yaml: streakTenantYaml(tenantId), manualClock: "2026-06-01T12:00:00Z", jobs: false });
    // The settlements the sweep asks of Redis, by user.
    const sweepRedis = new Redis(inject("redisUrl"));
    const send = sweepRedis.sendCommand.bind(sweepRedis);
    const settled: string[] = [];
    try {
      const orphans = ["a-orphan", "b-orphan"];
      const users = [...orphans, "c", "d", "e"];
      for (const user of users) await lesson(t, user);
      const { store } = t.app.tenants.all[0]!;
      for (const orphan of orphans) await redis.del(store.keys.user(store.shard(orphan), orphan));
      const [sa, sd] = [`{${tenantId}:0}:sa`, `{${tenantId}:0}:sd`];
      expect(await redis.zcard(sd)).toBe(users.length);
      sweepRedis.sendCommand = ((command: Command, stream?: unknown) => {
        if (["fcall", "evalsha"].includes(command.name.toLowerCase())) settled.push(...users.filter((u) => command.args.some((a) => String(a) === u)));
        return send(command, stream as never);
      }) as Redis["sendCommand"];
      const sweeping = store.onConnection(sweepRedis);
      // Pages of two: the orphans are the first page (the range is in name order, every deadline
      // the end of June 2); left in the index, they were read again at the head of every page.
      const now = Date.parse("2026-06-04T12:00:00Z");
      expect(await sweepExpiredStreaks(sweeping, now, 2)).toBe(3);
      expect(await redis.zcard(sd)).toBe(0);
      expect(await redis.zcard(sa)).toBe(0);
      expect(settled.sort()).toEqual([...users].sort());
      // Nothing is left for the next sweep to read.
      settled.length = 0;
      expect(await sweepExpiredStreaks(sweeping, now, 2)).toBe(0);
      expect(settled).toEqual([]);
    } finally {
      sweepRedis.disconnect();
      await t.close();
    }
  });
});

describe("with the system clock", () => {
  it("queues a sweep at the next deadline when it comes before the next tick, and none when it does not", async () => {
    const tenantId = uniqueTenantId("expiry");
    const t = await startTestApp({ yaml: streakTenantYaml(tenantId), manualClock: "2026-06-02T12:00:00Z", jobs: false });
    // ada's streak is lost at the end of June 3 (UTC) unless extended then.
    let now = Date.parse("2026-06-02T12:00:00Z");
    const clock = { manual: false, now: () => now, highest: () => now };
    const prefix = `{laurel-jobs-${tenantId}}`;
    const connection = queueConnection(t.redis);
    const queue = new Queue(`laurel-streaks-${tenantId}`, { connection, prefix });
    // Waiting or running too: a wake is due 10 s of wall time after it is queued, and its sweep
    // queues the next (the clock here does not move) before it completes and is removed. Delayed
    // ones only, a slow run could look between the two.
    const wakes = async () => (await queue.getJobs(["delayed", "waiting", "active"])).filter((job) => job.name === "wake").map((job) => job.opts.delay);
    let expiry: StreakExpiry | null = null;
    try {
      await lesson(t, "ada");
      expiry = await StreakExpiry.start({ redis: t.redis, connection, tenants: t.app.tenants, clock, logger: pino({ level: "silent" }), prefix });
      await expiry.runAll();
      expect(await wakes()).toEqual([]);

      now = Date.parse("2026-06-03T23:59:50Z");
      await expiry.runAll();
      const delays = await wakes();
      expect(delays.length).toBeGreaterThan(0);
      for (const delay of delays) expect(delay).toBe(10_000);
    } finally {
      await expiry?.close();
      await queue.obliterate({ force: true });
      await queue.close();
      await t.close();
    }
  });
});

describe("without a streak rule", () => {
  it("starts no sweep", async () => {
    const tenantId = uniqueTenantId("expiry");
    const t = await startTestApp({ yaml: tenantYaml(tenantId, "    metrics: [{ key: lessons, name: Lessons }]\n") });
    await t.close();
    expect(await redis.exists(`{laurel-jobs}:laurel-streaks-${tenantId}:repeat`)).toBe(0);
  });
});

describe("a zone change outside a streak event", () => {
  // The README: "A zone change takes effect at once: the streak continues on the new local
  // calendar", and so must its deadline in {t:s}:sd, which the rankings, the streak board and the
  // sweep read. Before, only an event that extended the streak moved it: a PATCH of tz left the
  // user lost at the old zone's midnight in the rankings (or kept past the new one).
  async function event(t: TestApp, user: string, tz: string): Promise<void> {
    const res = await t.call("POST", "/v1/metrics/lessons/event", { user: { id: user, tz }, value: 1 });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
  }
  const ranked = async (t: TestApp) => (await t.call("GET", "/v1/streaks/rankings?type=active")).body.map((r: { userId: string; streakLength: number }) => [r.userId, r.streakLength]);
  const board = async (t: TestApp) => (await t.call("GET", "/v1/leaderboards/streaks")).body.rankings.map((r: { userId: string; value: number }) => [r.userId, r.value]);

  it("moves the deadline earlier (New York to Tokyo): lost at Tokyo's midnight everywhere", async () => {
    const tenantId = uniqueTenantId("rezone");
    const t = await startTestApp({ yaml: streakTenantYaml(tenantId), manualClock: "2026-06-09T16:00:00Z" });
    try {
      await event(t, "u1", "America/New_York");
      await t.setClock("2026-06-10T14:00:00Z"); // 10:00 on June 10 in New York, 23:00 in Tokyo
      await event(t, "u1", "America/New_York");
      await event(t, "ctl", "America/New_York");
      await t.setClock("2026-06-10T17:00:00Z");
      expect((await t.call("PATCH", "/v1/users/u1", { tz: "Asia/Tokyo" })).status).toBe(200);
      // u1 last extended on June 10 (on Tokyo's calendar too), which Tokyo is past (02:00 on
      // June 11): lost at Tokyo's end of June 11.
      expect(Number(await redis.zscore(`{${tenantId}:0}:sd`, "u1"))).toBe(Date.parse("2026-06-11T15:00:00Z"));
      await t.setClock("2026-06-11T15:30:00Z");
      expect(await ranked(t)).toEqual([["ctl", 1]]);
      expect(await board(t)).toEqual([["ctl", 1]]);
      expect((await t.call("GET", "/v1/users/ctl/streak")).body.rank).toBe(1);
      expect((await t.call("GET", "/v1/users/u1/streak")).body.length).toBe(0);
    } finally {
      await t.close();
    }
  });

  it("moves the deadline later (Tokyo to New York), by an identify or an event on another metric", async () => {
    const tenantId = uniqueTenantId("rezone");
    const yaml = streakTenantYaml(tenantId).replace("metrics: [{ key: lessons, name: Lessons }]", "metrics: [{ key: lessons, name: Lessons }, { key: logins, name: Logins }]");
    const t = await startTestApp({ yaml, manualClock: "2026-06-09T01:00:00Z" });
    try {
      for (const user of ["u2", "u3"]) await event(t, user, "Asia/Tokyo");
      await t.setClock("2026-06-10T01:00:00Z");
      for (const user of ["u2", "u3"]) await event(t, user, "Asia/Tokyo");
      await t.setClock("2026-06-10T16:00:00Z");
      await event(t, "ctl", "America/New_York");
      await t.setClock("2026-06-10T17:00:00Z");
      expect((await t.call("PUT", "/v1/users/u2", { tz: "America/New_York" })).status).toBe(200);
      expect((await t.call("POST", "/v1/metrics/logins/event", { user: { id: "u3", tz: "America/New_York" }, value: 1 })).status).toBe(201);
      // Last extended June 10, which is New York's today: lost at New York's end of June 11.
      for (const user of ["u2", "u3"]) expect(Number(await redis.zscore(`{${tenantId}:0}:sd`, user)), user).toBe(Date.parse("2026-06-12T04:00:00Z"));
      await t.setClock("2026-06-11T15:30:00Z");
      expect(await ranked(t)).toEqual([["u3", 2], ["u2", 2], ["ctl", 1]]);
      expect((await t.call("GET", "/v1/users/ctl/streak")).body.rank).toBe(3);
      await t.setClock("2026-06-12T04:30:00Z");
      expect(await ranked(t)).toEqual([]);
      expect(await board(t)).toEqual([]);
    } finally {
      await t.close();
    }
  });

  it("a deadline the index still holds from before (an earlier version) is placed on the stored zone's calendar by the sweep", async () => {
    const tenantId = uniqueTenantId("rezone");
    const t = await startTestApp({ yaml: streakTenantYaml(tenantId), manualClock: "2026-06-10T01:00:00Z" });
    try {
      await event(t, "u4", "Asia/Tokyo");
      await t.setClock("2026-06-10T17:00:00Z");
      expect((await t.call("PATCH", "/v1/users/u4", { tz: "America/New_York" })).status).toBe(200);
      // As an earlier version left it: the Tokyo deadline (end of June 11 in Tokyo).
      await redis.zadd(`{${tenantId}:0}:sd`, Date.parse("2026-06-11T15:00:00Z"), "u4");
      await t.setClock("2026-06-11T15:30:00Z");
      expect(Number(await redis.zscore(`{${tenantId}:0}:sd`, "u4"))).toBe(Date.parse("2026-06-12T04:00:00Z"));
      expect(await ranked(t)).toEqual([["u4", 1]]);
    } finally {
      await t.close();
    }
  });
});
