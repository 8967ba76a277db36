import { Queue } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { timeTriggerZset, userBoostField } from "../../src/store/rules.js";
import { TIME_QUEUE } from "../../src/jobs/time-triggers.js";
import { scheduleExistingUsers } from "../../src/jobs/time-trigger-backfill.js";
import { demoConfig, startTestApp, uniqueTenantId, withTestApp, type TestApp } from "../helpers/app.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";

/**
 * Time triggers (trophy-compat §5.5 "every N hours/days"; README: Time triggers) with the real
 * BullMQ queue and worker of the app and the manual clock: t.setClock answers only after the
 * ticks that became due went through the queue and the worker, so nothing here waits on wall time.
 *
 * The demo's `coins` system has `daily-allowance`: 5 points every day from first identification,
 * and the `weekend` boost ×1.5 rounding up from 2026-11-28T00:00Z to 2026-11-30T00:00Z.
 */

const DAY = 86_400_000;
const T0 = Date.parse("2026-03-02T12:00:00Z");
const at = (ms: number) => new Date(ms).toISOString();

let t: TestApp;
let tenantId: string;
let yaml: string;

beforeAll(async () => {
  const config = demoConfig();
  tenantId = config.tenantId;
  yaml = config.yaml;
  t = await startTestApp({ yaml: config.yaml, manualClock: at(T0) });
});
afterAll(async () => t.close());

interface Coins {
  total: number;
  awards: { awarded: number; total: number; date: string; trigger: Record<string, unknown> }[];
}

async function coins(userId: string): Promise<Coins> {
  const res = await t.call("GET", `/v1/users/${userId}/points/coins?awards=100`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

async function identify(userId: string) {
  const res = await t.call("PUT", `/v1/users/${userId}`, { tz: "UTC" });
  expect(res.status).toBe(200);
}

/** The instant the user is next due for the daily allowance (the per-shard sorted set's score). */
async function nextDue(userId: string): Promise<number | null> {
  const { store, tenant } = t.app.tenants.all[0]!;
  const trigger = tenant.systemByKey.get("coins")!.triggers.find((x) => x.key === "daily-allowance")!;
  const score = await t.redis.zscore(store.keys.prefix(store.shard(userId)) + timeTriggerZset(trigger), userId);
  return score === null ? null : Number(score);
}

/** The ids of the boosts the user's state holds for coins (the state field bo:coins, lua/userBoost-3.lua). */
async function ownBoostIds(userId: string): Promise<string[]> {
  const { store } = t.app.tenants.all[0]!;
  const json = (await t.redis.eval("return cjson.encode(cmsgpack.unpack(redis.call('HGET', KEYS[1], 's')))", 1, store.keys.user(store.shard(userId), userId))) as string;
  const entries = JSON.parse(json)[store.slots.index(userBoostField("coins")) - 1] as string;
  return entries.split(";").map((e) => e.split(",")[0]!);
}

describe("the daily allowance by the manual clock", () => {
  it("pays nothing before a full day has passed since first identification", async () => {
    await identify("daily");
    // First identification by an event schedules the user just the same.
    expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "by-event" }, value: 1 })).status).toBe(201);
    expect(await nextDue("daily")).toBe(T0 + DAY);
    expect(await nextDue("by-event")).toBe(T0 + DAY);

    await t.setClock(at(T0 + DAY - 1));
    expect(await coins("daily")).toMatchObject({ total: 0, awards: [] });
    expect(await coins("by-event")).toMatchObject({ total: 0, awards: [] });
  });

  it("pays 5 when exactly one day has passed, as a time award", async () => {
    await t.setClock(at(T0 + DAY));
    const c = await coins("daily");
    expect(c.total).toBe(5);
    expect(c.awards).toEqual([
      {
        id: expect.any(String),
        awarded: 5,
        total: 5,
        date: at(T0 + DAY),
        trigger: expect.objectContaining({ key: "daily-allowance", type: "time", points: 5, timeUnit: "day", timeInterval: 1 }),
      },
    ]);
    expect((await coins("by-event")).total).toBe(5);
    expect(await nextDue("daily")).toBe(T0 + 2 * DAY);
  });

  it("catches up after a jump of 3.5 days: every fully elapsed interval once, in one award", async () => {
    await t.setClock(at(T0 + 4.5 * DAY));
    const c = await coins("daily");
    // Due at T0+2d, +3d and +4d: three intervals, 15 points, one award at the tick.
    expect(c.total).toBe(20);
    expect(c.awards.map((a) => [a.awarded, a.total, a.date])).toEqual([
      [15, 20, at(T0 + 4.5 * DAY)],
      [5, 5, at(T0 + DAY)],
    ]);
    // The schedule stays on the first identification's grid: next due at T0+5d, not T0+5.5d.
    expect(await nextDue("daily")).toBe(T0 + 5 * DAY);
  });

  it("never pays an interval twice: moves within the interval pay nothing", async () => {
    await t.setClock(at(T0 + 4.75 * DAY));
    await t.setClock(at(T0 + 5 * DAY - 1));
    expect((await coins("daily")).total).toBe(20);
    expect(await nextDue("daily")).toBe(T0 + 5 * DAY);

    await t.setClock(at(T0 + 5 * DAY));
    expect((await coins("daily")).total).toBe(25);
    // The same instant again (another tick of the same interval) pays nothing more.
    await t.setClock(at(T0 + 5 * DAY));
    await t.setClock(at(T0 + 5.5 * DAY));
    const c = await coins("daily");
    expect(c.total).toBe(25);
    expect(c.awards.map((a) => a.awarded)).toEqual([5, 15, 5]);
    expect(await nextDue("daily")).toBe(T0 + 6 * DAY);
  });

  it("schedules each user from their own first identification", async () => {
    await identify("late"); // at T0+5.5d
    expect(await nextDue("late")).toBe(T0 + 6.5 * DAY);
    await t.setClock(at(T0 + 6 * DAY));
    expect((await coins("late")).total).toBe(0);
    expect((await coins("daily")).total).toBe(30);
    await t.setClock(at(T0 + 6.5 * DAY));
    expect((await coins("late")).total).toBe(5);
    expect((await coins("daily")).total).toBe(30);
  });
});

describe("the coins weekend boost on time awards", () => {
  it("boosts each interval of a catch-up by the boosts active at its due instant, not at the tick", async () => {
    await t.setClock("2026-11-26T06:00:00Z");
    await identify("wk-catchup"); // due 27 Nov 06:00
    await t.setClock("2026-11-27T05:00:00Z");
    await identify("wk-single"); // due 28 Nov 05:00
    expect((await coins("wk-catchup")).total).toBe(0);

    await t.setClock("2026-11-28T06:00:00Z");
    // Two intervals in one award: 27 Nov 06:00, before the window (5), and 28 Nov 06:00, inside
    // it (5 × 1.5 = 7.5, rounded up: 8). Boosting the whole catch-up by the tick's boost would pay 15.
    const catchup = await coins("wk-catchup");
    expect(catchup.awards.map((a) => a.awarded)).toEqual([13]);
    // One interval: 5 × 1.5 = 7.5, rounded up to 8.
    const single = await coins("wk-single");
    expect(single.awards.map((a) => a.awarded)).toEqual([8]);

    // A tick after the window, for intervals earned inside it (29 Nov 05:00) and after it
    // (30 Nov 05:00): 8 + 5, though the tick itself is unboosted.
    await t.setClock("2026-11-30T06:00:00Z");
    expect((await coins("wk-single")).awards.map((a) => a.awarded)).toEqual([13, 8]);
  });

  it("boosts a run of intervals inside the window together: one rounding per run", async () => {
    // A user boost of ×1.5 rounding down from 2026-12-10 to 12-13: the intervals due 10, 11 and
    // 12 Dec are inside it, and are boosted as one run (15 × 1.5 = 22.5 → 22; one by one, 7 × 3 = 21).
    await t.setClock("2026-12-08T12:00:00Z");
    await identify("run"); // due 9 Dec 12:00
    const boost = await t.call("POST", "/admin/v1/points/coins/boosts", { userId: "run", name: "Comeback", multiplier: 1.5, rounding: "down", start: "2026-12-10T00:00:00Z", end: "2026-12-13T00:00:00Z" }, { "x-api-key": "demo-admin-key" });
    expect(boost.status, JSON.stringify(boost.body)).toBe(201);
    // Down for a week: 9 Dec (5), 10-12 Dec (22), 13-15 Dec (15): one award of 42.
    await t.setClock("2026-12-15T12:00:00Z");
    expect((await coins("run")).awards.map((a) => a.awarded)).toEqual([42]);
    expect(await nextDue("run")).toBe(Date.parse("2026-12-16T12:00:00Z"));
  });
});

describe("a user boost that finished while ticks did not run", () => {
  it("still boosts the unpaid intervals due inside it after another boost operation on the user", async () => {
    // A second service on the same tenant without background jobs: its clock moves while no tick
    // runs, as a deployment's does while its time-trigger workers are down.
    const downtime = await startTestApp({ yaml, manualClock: "2026-12-20T12:00:00Z", jobs: false });
    try {
      await t.setClock("2026-12-20T12:00:00Z");
      await identify("owed"); // due 21 Dec 12:00
      const admin = { "x-api-key": "demo-admin-key" };
      const first = { userId: "owed", name: "Double", multiplier: 2, start: "2026-12-21T00:00:00Z", end: "2026-12-22T00:00:00Z" };
      expect((await downtime.call("POST", "/admin/v1/points/coins/boosts", first, admin)).status).toBe(201);
      // 23 Dec: the boost finished a day ago; the intervals of 21, 22 and 23 Dec are unpaid. A new
      // boost on the user must not drop the finished one that the 21 Dec interval still needs.
      await downtime.setClock("2026-12-23T13:00:00Z");
      const second = { userId: "owed", name: "Later", multiplier: 3, start: "2027-01-10T00:00:00Z", end: "2027-01-11T00:00:00Z" };
      expect((await downtime.call("POST", "/admin/v1/points/coins/boosts", second, admin)).status).toBe(201);
      expect(await nextDue("owed")).toBe(Date.parse("2026-12-21T12:00:00Z"));
      // The ticks come back: 21 Dec (5 × 2), 22 and 23 Dec (5 each), one award of 20.
      await t.setClock("2026-12-23T13:00:00Z");
      expect((await coins("owed")).awards.map((a) => a.awarded)).toEqual([20]);
      // Paid now: the next boost operation drops the finished one from the state (the index keeps it).
      expect(await ownBoostIds("owed")).toHaveLength(2);
      expect((await t.call("POST", "/admin/v1/points/coins/boosts", { ...second, name: "Third" }, admin)).status).toBe(201);
      expect(await ownBoostIds("owed")).toHaveLength(2);
      expect((await t.call("GET", "/v1/users/owed/points/coins/boosts?includeFinished=true")).body.filter((b: { userId: string | null }) => b.userId === "owed")).toHaveLength(3);
    } finally {
      await downtime.close();
    }
  });
});

describe("a user boost ended by DELETE while ticks did not run", () => {
  it("still boosts the unpaid intervals due before it ended", async () => {
    const downtime = await startTestApp({ yaml, manualClock: "2027-01-20T12:00:00Z", jobs: false });
    try {
      await t.setClock("2027-01-20T12:00:00Z");
      await identify("cut"); // due 21 Jan 12:00
      const admin = { "x-api-key": "demo-admin-key" };
      const boost = await downtime.call("POST", "/admin/v1/points/coins/boosts", { userId: "cut", name: "Double", multiplier: 2, start: "2027-01-21T00:00:00Z" }, admin);
      expect(boost.status).toBe(201);
      // 22 Jan 13:00: the intervals of 21 and 22 Jan 12:00 are unpaid, both inside the boost,
      // which the admin ends now.
      await downtime.setClock("2027-01-22T13:00:00Z");
      expect((await downtime.call("DELETE", `/admin/v1/points/coins/boosts/${boost.body.id}`, undefined, admin)).body).toMatchObject({ status: "finished", end: "2027-01-22T13:00:00.000Z" });
      // The ticks come back: 5 × 2 for each of the two intervals, one award of 20.
      await t.setClock("2027-01-22T13:00:00Z");
      expect((await coins("cut")).awards.map((a) => a.awarded)).toEqual([20]);
    } finally {
      await downtime.close();
    }
  });
});

describe("a boost the user is not eligible for, during a catch-up", () => {
  it("does not split the run: one rounding for the intervals between the user's own boost changes", async () => {
    // A (×1.4, rounding down) for everyone; B (×3) only for plan ent, starting at 02:30. For a
    // user without the plan, 01:00-03:00 is one run under A: 3 × 1.4 = 4.2 → 4. B's start split
    // it into 2.8 → 2 and 1.4 → 1 (3), a boost the user never had changing their points.
    const yaml = tenantYaml(
      uniqueTenantId("tt-boost-elig"),
      `    attributes: { user: [plan] }
    metrics: [{ key: m, name: M }]
    points:
      - key: p
        name: P
        triggers: [{ key: hourly, type: time, unit: hour, interval: 1, points: 1 }]
        boosts:
          - { key: a, name: A, multiplier: 1.4, start: "2026-12-10T00:00:00Z", end: "2026-12-20T00:00:00Z" }
          - { key: b, name: B, multiplier: 3, start: "2026-12-10T02:30:00Z", end: "2026-12-20T00:00:00Z", userAttributes: { plan: ent } }
`,
    );
    const app = await startTestApp({ yaml, manualClock: "2026-12-10T00:00:00Z" });
    try {
      expect((await app.call("PUT", "/v1/users/free", {})).status).toBe(200);
      expect((await app.call("PUT", "/v1/users/ent", { attributes: { plan: "ent" } })).status).toBe(200);
      await app.setClock("2026-12-10T03:00:00Z");
      const awards = async (id: string) => (await app.call("GET", `/v1/users/${id}/points/p?awards=5`)).body.awards.map((a: { awarded: number }) => a.awarded);
      expect(await awards("free")).toEqual([4]);
      // The eligible user's run does split at B's start: 01:00 and 02:00 under A (2.8 → 2), 03:00
      // under A and B (4.2 → 4); B left out, 4.
      expect(await awards("ent")).toEqual([6]);
    } finally {
      await app.close();
    }
  });
});

describe("a time trigger added to a tenant that already has users", () => {
  const DAY = 86_400_000;
  const T0 = Date.parse("2026-04-01T12:00:00Z");
  const T1 = T0 + 10 * DAY; // the trigger is first seen here
  const tenantYamlWith = (id: string, trigger: string) =>
    tenantYaml(id, `    metrics: [{ key: lessons, name: Lessons }]\n    points:\n      - key: coins\n        name: Coins\n        triggers:\n${trigger}`);
  const BEFORE = "          - { key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 1 }\n";
  const AFTER = BEFORE + "          - { key: daily, type: time, unit: day, interval: 1, points: 5 }\n";

  it("pays the users who existed before it from one interval after it was first seen, once", async () => {
    const id = uniqueTenantId("tt-added");
    const dueSets = (app: TestApp) => {
      const { store } = app.app.tenants.all[0]!;
      return (userId: string) => app.redis.zscore(store.keys.prefix(store.shard(userId)) + "tt:coins.daily", userId);
    };
    const before = await startTestApp({ yaml: tenantYamlWith(id, BEFORE), manualClock: at(T0) });
    for (const user of ["old-a", "old-b"]) expect((await before.call("PUT", `/v1/users/${user}`, { tz: "UTC" })).status).toBe(200);
    await before.close();

    const after = await startTestApp({ yaml: tenantYamlWith(id, AFTER), manualClock: at(T1) });
    try {
      // Moving the clock waits for the pass, then ticks: one interval after T1 pays both.
      await after.setClock(at(T1 + DAY + 3_600_000));
      for (const user of ["old-a", "old-b"]) {
        const coins = await after.call("GET", `/v1/users/${user}/points/coins`);
        expect(coins.body.awards.map((a: { awarded: number }) => a.awarded), user).toEqual([5]);
      }
      expect(await dueSets(after)("old-a")).toBe(String(T1 + 2 * DAY));
      expect(await after.redis.hexists(`{${id}}:time-scheduled`, "tt:coins.daily")).toBe(1);
      // A user created now is due one interval after their own first identification, as always.
      expect((await after.call("PUT", "/v1/users/new-c", { tz: "UTC" })).status).toBe(200);
      expect(await dueSets(after)("new-c")).toBe(String(T1 + 2 * DAY + 3_600_000));
    } finally {
      await after.close();
    }

    // A user the set lost (as on a tenant upgraded from a version without the pass) is put back by
    // the pass, which runs again only without its mark, due one interval after it.
    const { store } = after.app.tenants.all[0]!;
    await t.redis.zrem(store.keys.prefix(store.shard("old-b")) + "tt:coins.daily", "old-b");
    await t.redis.hdel(`{${id}}:time-scheduled`, "tt:coins.daily");
    const upgraded = await startTestApp({ yaml: tenantYamlWith(id, AFTER), manualClock: at(T1 + 4 * DAY) });
    try {
      await upgraded.setClock(at(T1 + 4 * DAY + 60_000));
      // Nothing for the days it was off the set: due one interval after the pass.
      expect((await upgraded.call("GET", "/v1/users/old-b/points/coins")).body.awards.map((a: { awarded: number }) => a.awarded)).toEqual([5]);
      expect(await dueSets(upgraded)("old-b")).toBe(String(T1 + 5 * DAY));
      // old-a, on the set all along, keeps its due instant and is paid as it was owed: days 2 to 4.
      expect((await upgraded.call("GET", "/v1/users/old-a/points/coins")).body.awards.map((a: { awarded: number }) => a.awarded)).toEqual([15, 5]);
    } finally {
      await upgraded.close();
    }

    // Removed from the config, the trigger loses its mark; a user created meanwhile is put on it
    // when it comes back, due one interval after that start.
    const removed = await startTestApp({ yaml: tenantYamlWith(id, BEFORE), manualClock: at(T1 + 5 * DAY) });
    expect((await removed.call("PUT", "/v1/users/mid-d", { tz: "UTC" })).status).toBe(200);
    expect(await t.redis.hexists(`{${id}}:time-scheduled`, "tt:coins.daily")).toBe(0);
    await removed.close();
    const back = await startTestApp({ yaml: tenantYamlWith(id, AFTER), manualClock: at(T1 + 5 * DAY) });
    try {
      await back.setClock(at(T1 + 5 * DAY + 60_000));
      expect(await dueSets(back)("mid-d")).toBe(String(T1 + 6 * DAY));
    } finally {
      await back.close();
    }
  });
  it("a pass cut short by a stopping process is not marked done: the next start runs it again", async () => {
    const id = uniqueTenantId("tt-cut");
    await withTestApp({ yaml: tenantYamlWith(id, AFTER), manualClock: at(T1), jobs: false }, async (app) => {
      const { store } = app.app.tenants.all[0]!;
      // More keys than one SCAN page (COUNT 1000) returns, so that the pass has a second page.
      const filler = `{${id}-filler}:`;
      const pipeline = app.redis.pipeline();
      for (let i = 0; i < 2500; i++) pipeline.set(`${filler}${i}`, "1");
      await pipeline.exec();
      try {
        await scheduleExistingUsers(store, T1, () => true);
        expect(await app.redis.hexists(`{${id}}:time-scheduled`, "tt:coins.daily")).toBe(0);
        await scheduleExistingUsers(store, T1);
        expect(await app.redis.hexists(`{${id}}:time-scheduled`, "tt:coins.daily")).toBe(1);
      } finally {
        const del = app.redis.pipeline();
        for (let i = 0; i < 2500; i++) del.del(`${filler}${i}`);
        await del.exec();
      }
    });
  });
});

describe("a tick with more users due on a shard than one script call takes (200)", () => {
  /**
   * A one-shard tenant paying 5 coins a day, 250 users due at T0 + DAY (one more call than the
   * script's 200), and `body` with them and the trigger's due set.
   */
  async function withManyDueUsers(prefix: string, body: (app: TestApp, users: string[], due: string) => Promise<void>): Promise<void> {
    const yaml = tenantYaml(
      uniqueTenantId(prefix),
      `
    shards: 1
    metrics: [{ key: lessons, name: Lessons }]
    points:
      - key: coins
        name: Coins
        triggers: [{ key: daily, type: time, unit: day, interval: 1, points: 5 }]
`,
    );
    await withTestApp({ yaml, manualClock: at(T0) }, async (app) => {
      const users = Array.from({ length: 250 }, (_, i) => `${prefix}-${i}`);
      for (let i = 0; i < users.length; i += 50) {
        const replies = await Promise.all(users.slice(i, i + 50).map((u) => app.call("PUT", `/v1/users/${u}`, { tz: "UTC" })));
        for (const reply of replies) expect(reply.status).toBe(200);
      }
      const due = app.app.tenants.all[0]!.store.keys.prefix(0) + "tt:coins.daily";
      expect(await app.redis.zcard(due)).toBe(users.length);
      await body(app, users, due);
    });
  }

  it("pays all of them before the clock's move answers", async () => {
    await withManyDueUsers("tt-many", async (app, users, due) => {
      await app.setClock(at(T0 + DAY + 3_600_000));
      // Every user paid once and due again a day later; none left behind for a later move.
      expect(await app.redis.zcount(due, "-inf", T0 + DAY + 3_600_000)).toBe(0);
      expect(await app.redis.zcount(due, T0 + 2 * DAY, T0 + 2 * DAY)).toBe(users.length);
      const unpaid: string[] = [];
      for (const u of users) if ((await app.call("GET", `/v1/users/${u}/points/coins`)).body.total !== 5) unpaid.push(u);
      expect(unpaid).toEqual([]);
    });
  });

  it("drops the due entries of users whose data was deleted outside Laurel, and the clock's move answers", async () => {
    // Without the tick's ZREM of such an entry, each call found the same 200 again and the tick
    // never ended: the clock's move below would not answer.
    await withManyDueUsers("tt-gone", async (app, users, due) => {
      const [deleted, kept] = [users.slice(0, 220), users.slice(220)];
      for (const u of deleted) await app.redis.del(app.app.tenants.all[0]!.store.keys.user(0, u));
      await app.setClock(at(T0 + DAY + 3_600_000));
      // The deleted users' entries are gone; the others were paid and are due a day later.
      expect(await app.redis.zcard(due)).toBe(kept.length);
      expect(await app.redis.zcount(due, T0 + 2 * DAY, T0 + 2 * DAY)).toBe(kept.length);
      expect((await app.call("GET", `/v1/users/${kept[0]}/points/coins`)).body.total).toBe(5);
    });
  });
});

describe("the BullMQ job scheduler", () => {
  it("is one scheduler per time trigger, not one job per user", async () => {
    const queue = new Queue(`${TIME_QUEUE}-${tenantId}`, { connection: { host: t.redis.options.host, port: t.redis.options.port }, prefix: "{laurel-jobs}" });
    try {
      const expected = [{ key: "tt:coins.daily-allowance", every: 60_000 }];
      const schedulers = async () => (await queue.getJobSchedulers()).map((s) => ({ key: s.key, every: s.every }));
      expect(await schedulers()).toEqual(expected);
      // Jobs not yet done: only ticks of the one trigger (the scheduler's running tick and its
      // next one), whatever the number of users; never a job per user.
      const pending = async () =>
        (await queue.getJobs(["waiting", "delayed", "prioritized", "active"])).map((job) => ({ name: job.name, data: job.data }));
      const tick = { name: "tick", data: { tenant: tenantId, index: 1 } };

      for (let i = 0; i < 6; i++) await identify(`many-${i}`);
      expect(await schedulers()).toEqual(expected);
      const jobs = await pending();
      expect(jobs.length).toBeLessThanOrEqual(2);
      for (const job of jobs) expect(job).toEqual(tick);

      // The one scheduler pays all of them at their due instant.
      await t.setClock(at(t.clock.now() + DAY));
      for (let i = 0; i < 6; i++) expect((await coins(`many-${i}`)).total).toBe(5);
      expect(await schedulers()).toEqual(expected);
    } finally {
      await queue.close();
    }
  });

  it("follows the config at each start: a renamed trigger's scheduler is replaced, the others kept", async () => {
    const id = uniqueTenantId("tt-sched");
    const yamlWith = (key: string) =>
      tenantYaml(
        id,
        `    metrics: [{ key: lessons, name: Lessons }]\n    points:\n      - key: coins\n        name: Coins\n        triggers:\n          - { key: ${key}, type: time, unit: day, interval: 1, points: 5 }\n          - { key: keep, type: time, unit: day, interval: 2, points: 1 }\n`,
      );
    const queue = new Queue(`${TIME_QUEUE}-${id}`, { connection: { host: t.redis.options.host, port: t.redis.options.port }, prefix: "{laurel-jobs}" });
    const schedulers = async () => (await queue.getJobSchedulers()).map((s) => s.key).sort();
    try {
      await (await startTestApp({ yaml: yamlWith("daily"), manualClock: at(T0) })).close();
      expect(await schedulers()).toEqual(["tt:coins.daily", "tt:coins.keep"]);
      // The old scheduler left in place would go on ticking a trigger index the config has given to another.
      await (await startTestApp({ yaml: yamlWith("every-day"), manualClock: at(T0) })).close();
      expect(await schedulers()).toEqual(["tt:coins.every-day", "tt:coins.keep"]);
    } finally {
      await queue.close();
    }
  });
});
