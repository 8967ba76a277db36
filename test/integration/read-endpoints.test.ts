import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { userProfileFields, type UserInput } from "../../src/api/user-input.js";
import { toMicro } from "../../src/domain/decimal.js";
import { applyEvent, emptyState, streakState, usersAtLevels, type ModelState } from "../../src/domain/model.js";
import { localDayIndex, periodOfDay } from "../../src/domain/periods.js";
import { settledStreak, viewStreak } from "../../src/domain/streak.js";
import { startTestApp, uniqueTenantId, withTestApp, type TestApp } from "../helpers/app.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";
import { bucketWorker } from "../helpers/worker.js";

/**
 * Every read endpoint of issue 4 but the event summaries (event-summary.test.ts), after the
 * same events went through HTTP and through the reference model (src/domain/model.ts): the
 * model is the oracle for totals, achievements, streaks and the per-shard counters.
 */
const tenantId = uniqueTenantId("rd");
const YAML = tenantYaml(
  tenantId,
  `
    shards: 4
    attributes: { user: [plan] }
    metrics:
      - { key: lessons, name: Lessons, units: lessons }
      - { key: api-calls, name: API calls }
    points:
      - key: xp
        name: XP
        triggers: [{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 10 }]
        levels:
          - { key: bronze, name: Bronze, points: 50 }
          - { key: silver, name: Silver, points: 200 }
      - key: energy
        name: Energy
        maxPoints: 100
        triggers:
          - { key: welcome, type: user_creation, points: 100 }
          - { key: per-call, type: metric, metric: api-calls, threshold: 1, points: -1 }
    achievements:
      - { key: first-lesson, name: First lesson, type: metric, metric: lessons, value: 1 }
      - { key: ten-lessons, name: Ten lessons, type: metric, metric: lessons, value: 10 }
      - { key: pro-lesson, name: Pro lesson, type: metric, metric: lessons, value: 2, userAttributes: { plan: pro } }
      - { key: three-days, name: Three days, type: streak, length: 3 }
    streak:
      frequency: daily
      metrics: [{ metric: lessons, threshold: 1 }]
      freezes: { initial: 1, max: 2 }
`,
);

let t: TestApp;
let model: ModelState;
const zones = new Map<string, string>();
const NOW = "2026-03-06T10:00:00Z";

async function event(at: string, metric: string, user: UserInput, value: number): Promise<void> {
  await t.setClock(at);
  const res = await t.call("POST", `/v1/metrics/${metric}/event`, { user, value });
  expect(res.status).toBe(201);
  const tenant = t.tenants[0]!;
  applyEvent(tenant, model, {
    metricKey: metric,
    userId: user.id,
    now: Date.parse(at),
    eventId: randomUUID(),
    idempotencyKey: null,
    valueMicro: toMicro(value),
    tz: user.tz ?? null,
    profile: userProfileFields(user, tenant.userAttributes),
    eventAttributes: null,
  });
  if (user.tz) zones.set(user.id, user.tz);
}

/** The model's streak length as a reader sees it now. */
function modelStreakLength(userId: string): number {
  const tenant = t.tenants[0]!;
  const user = model.users.get(userId)!;
  const now = Date.parse(NOW);
  const nowDay = localDayIndex(now, zones.get(userId) ?? "UTC");
  const nowPeriod = periodOfDay(nowDay, "daily");
  const state = { ...streakState(user), grants: user.streak.grants, createdDay: user.createdDay, metPeriod: user.streak.metPeriod };
  return viewStreak(tenant.streak, settledStreak(tenant, state, nowDay, nowPeriod), nowDay, nowPeriod).length;
}

beforeAll(async () => {
  t = await startTestApp({ yaml: YAML, manualClock: "2026-03-02T12:00:00Z" });
  model = emptyState();
  const ada = { id: "ada", name: "Ada", tz: "Europe/London", attributes: { plan: "pro" } };
  const bob = { id: "bob", name: "Bob", tz: "America/New_York" };
  const eve = { id: "eve", name: "Eve", tz: "UTC" };
  for (const day of ["02", "03", "04", "05"]) await event(`2026-03-${day}T12:00:00Z`, "lessons", day === "02" ? ada : { id: "ada" }, 1);
  await event("2026-03-02T13:00:00Z", "lessons", bob, 1);
  await event("2026-03-03T13:00:00Z", "lessons", { id: "bob" }, 1);
  await event("2026-03-02T14:00:00Z", "lessons", { id: "cy", tz: "Asia/Tokyo" }, 12);
  await event("2026-03-02T15:00:00Z", "api-calls", { id: "dee", tz: "UTC" }, 3);
  // Eve misses 4 March: her freeze covers it and the streak goes on.
  await event("2026-03-02T16:00:00Z", "lessons", eve, 1);
  await event("2026-03-03T16:00:00Z", "lessons", { id: "eve" }, 1);
  await event("2026-03-05T16:00:00Z", "lessons", { id: "eve" }, 1);
  await t.setClock(NOW);
  await bucketWorker(t).drain();
});
afterAll(async () => t.close());

describe("GET /v1/users/{id}/metrics and /metrics/{key}", () => {
  it("MetricResponse per metric: the model's total, the metric's achievements open to the user", async () => {
    const res = await t.call("GET", "/v1/users/ada/metrics");
    expect(res.status).toBe(200);
    expect(res.body.map((m: { key: string; current: number; status: string }) => [m.key, m.current, m.status])).toEqual([
      ["lessons", model.users.get("ada")!.metrics.get("lessons")! / 1e6, "active"],
      ["api-calls", 0, "active"],
    ]);
    const lessons = res.body[0];
    expect(lessons).toMatchObject({ id: expect.stringMatching(/^[0-9a-f-]{36}$/), name: "Lessons" });
    expect(lessons.achievements.map((a: { key: string; achievedAt: string | null }) => [a.key, a.achievedAt])).toEqual([
      ["first-lesson", "2026-03-02T12:00:00.000Z"],
      ["ten-lessons", null],
      ["pro-lesson", "2026-03-03T12:00:00.000Z"],
    ]);
    expect(res.body[1].achievements).toEqual([]);
  });

  it("an achievement filtered to other users is not shown as open", async () => {
    const res = await t.call("GET", "/v1/users/bob/metrics/lessons");
    expect(res.status).toBe(200);
    expect(res.body.current).toBe(2);
    expect(res.body.achievements.map((a: { key: string }) => a.key)).toEqual(["first-lesson", "ten-lessons"]);
  });

  it("unknown user or metric → 404", async () => {
    expect((await t.call("GET", "/v1/users/ghost/metrics")).status).toBe(404);
    expect((await t.call("GET", "/v1/users/ada/metrics/nope")).status).toBe(404);
  });
});

describe("achievements with completions and rarity", () => {
  const stats = () => {
    const users = model.userCount;
    return (key: string) => {
      const completions = model.completions.get(key) ?? 0;
      return { completions, rarity: Math.round((completions / users) * 10_000) / 100 };
    };
  };

  it("GET /v1/achievements: every achievement, counts summed over the shards", async () => {
    const res = await t.call("GET", "/v1/achievements");
    expect(res.status).toBe(200);
    const of = stats();
    expect(res.body.map((a: { key: string; completions: number; rarity: number }) => [a.key, a.completions, a.rarity])).toEqual(
      ["first-lesson", "ten-lessons", "pro-lesson", "three-days"].map((k) => [k, of(k).completions, of(k).rarity]),
    );
    expect(res.body.map((a: { rarity: number }) => a.rarity)).toEqual([80, 20, 20, 40]);
    expect(res.body[0]).not.toHaveProperty("achievedAt");
    expect(res.body[2].userAttributes).toEqual([{ key: "plan", value: "pro" }]);
  });

  it("?userAttributes keeps the achievements available to such a user", async () => {
    const free = await t.call("GET", "/v1/achievements?userAttributes=plan:free");
    expect(free.body.map((a: { key: string }) => a.key)).toEqual(["first-lesson", "ten-lessons", "three-days"]);
    const pro = await t.call("GET", "/v1/achievements?userAttributes=plan:pro");
    expect(pro.body).toHaveLength(4);
    expect((await t.call("GET", "/v1/achievements?userAttributes=plan")).status).toBe(400);
    // An empty value is the empty string (a user saved with plan: ""): the pro-only one is not theirs.
    const empty = await t.call("GET", "/v1/achievements?userAttributes=plan:");
    expect(empty.status).toBe(200);
    expect(empty.body.map((a: { key: string }) => a.key)).toEqual(["first-lesson", "ten-lessons", "three-days"]);
    expect((await t.call("GET", "/v1/achievements?userAttributes=plan:pro,plan:pro")).status).toBe(400);
    expect(await t.call("GET", "/v1/achievements?userAttributes=tier:gold")).toEqual({ status: 422, body: { error: "Invalid attribute keys: tier" } });
  });

  it("GET /v1/users/{id}/achievements: completed only, or with includeIncomplete=true the open ones too", async () => {
    const done = await t.call("GET", "/v1/users/ada/achievements");
    expect(done.body.map((a: { key: string }) => a.key)).toEqual(["first-lesson", "pro-lesson", "three-days"]);
    expect(done.body[2]).toMatchObject({ achievedAt: "2026-03-04T12:00:00.000Z", completions: 2, rarity: 40 });
    const all = await t.call("GET", "/v1/users/bob/achievements?includeIncomplete=true");
    expect(all.body.map((a: { key: string; achievedAt: string | null }) => [a.key, a.achievedAt])).toEqual([
      ["first-lesson", "2026-03-02T13:00:00.000Z"],
      ["ten-lessons", null],
      ["three-days", null],
    ]);
    // Only the literal "true" (trophy-compat §2.2 #13).
    expect((await t.call("GET", "/v1/users/bob/achievements?includeIncomplete=1")).body).toHaveLength(1);
    expect((await t.call("GET", "/v1/users/ghost/achievements")).status).toBe(404);
  });
});

describe("streaks", () => {
  it("GET /v1/users/{id}/streak: the settled streak, 7 periods of history oldest first, rank, extension time", async () => {
    const res = await t.call("GET", "/v1/users/ada/streak");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ length: 4, frequency: "daily", started: "2026-03-02", periodStart: "2026-03-06", expires: "2026-03-06", freezes: 1, maxFreezes: 2 });
    // Freezes without autoEarn: no auto-earn fields (README, "Streak freezes and restore").
    expect(Object.keys(res.body).filter((k) => k.startsWith("freezeAutoEarn"))).toEqual([]);
    expect(res.body.length).toBe(modelStreakLength("ada"));
    expect(res.body.streakHistory).toEqual(
      [
        ["2026-02-28", 0],
        ["2026-03-01", 0],
        ["2026-03-02", 1],
        ["2026-03-03", 2],
        ["2026-03-04", 3],
        ["2026-03-05", 4],
        ["2026-03-06", 0],
      ].map(([day, length]) => ({ periodStart: day, periodEnd: day, length, usedFreeze: false })),
    );
    expect(res.body.rank).toBe(1);
    expect(res.body.extended).toBe("2026-03-05T12:00:00.000Z");
  });

  it("a freeze shows in the history; rank counts only longer active streaks", async () => {
    const res = await t.call("GET", "/v1/users/eve/streak?historyPeriods=4");
    expect(res.body).toMatchObject({ length: 3, rank: 2, freezes: 0 });
    expect(res.body.streakHistory.map((h: { length: number; usedFreeze: boolean }) => [h.length, h.usedFreeze])).toEqual([
      [2, false],
      [2, true],
      [3, false],
      [0, false],
    ]);
  });

  it("a lost streak reads as length 0 with rank and extended null; the freeze it spent is shown", async () => {
    const res = await t.call("GET", "/v1/users/bob/streak?historyPeriods=5");
    expect(res.body).toMatchObject({ length: 0, started: null, expires: null, rank: null, extended: null });
    expect(modelStreakLength("bob")).toBe(0);
    // New York, 6 March 05:00: 2 and 3 March extended, 4 March covered by the initial freeze, then lost.
    expect(res.body.streakHistory.map((h: { length: number; usedFreeze: boolean }) => [h.length, h.usedFreeze])).toEqual([
      [1, false],
      [2, false],
      [2, true],
      [0, false],
      [0, false],
    ]);
  });

  it("historyPeriods is bounded 1-100", async () => {
    expect((await t.call("GET", "/v1/users/ada/streak?historyPeriods=100")).body.streakHistory).toHaveLength(100);
    expect((await t.call("GET", "/v1/users/ada/streak?historyPeriods=0")).status).toBe(422);
    expect((await t.call("GET", "/v1/users/ada/streak?historyPeriods=101")).status).toBe(422);
    expect((await t.call("GET", "/v1/users/ada/streak?historyPeriods=x")).status).toBe(400);
    expect((await t.call("GET", "/v1/users/ghost/streak")).status).toBe(404);
  });

  it("GET /v1/streaks: requested users, longest first, unknown users at 0, both query forms", async () => {
    const expected = [
      { userId: "ada", streakLength: 4, extended: "2026-03-05T12:00:00.000Z" },
      { userId: "eve", streakLength: 3, extended: "2026-03-05T16:00:00.000Z" },
      { userId: "bob", streakLength: 0, extended: null },
      { userId: "cy", streakLength: 0, extended: null },
      { userId: "ghost", streakLength: 0, extended: null },
    ];
    expect((await t.call("GET", "/v1/streaks?userIds=bob&userIds=ada&userIds=cy&userIds=eve&userIds=ghost&userIds=ada")).body).toEqual(expected);
    expect((await t.call("GET", "/v1/streaks?userIds=bob,ada,cy,eve,ghost,ada")).body).toEqual(expected);
    // Repeated values are ids whole: one holding a comma (the SDK encodes it) is not split.
    expect((await t.call("GET", "/v1/streaks?userIds=ada&userIds=bob%2Ccy")).body).toEqual([expected[0], { userId: "bob,cy", streakLength: 0, extended: null }]);
    for (const e of expected) expect(e.streakLength).toBe(model.users.has(e.userId) ? modelStreakLength(e.userId) : 0);
    expect((await t.call("GET", "/v1/streaks")).body).toEqual([]);
    // Empty items are skipped: `userIds=` is as if not sent, and `ada,,eve` asks for two users.
    expect(await t.call("GET", "/v1/streaks?userIds=")).toEqual({ status: 200, body: [] });
    expect((await t.call("GET", "/v1/streaks?userIds=ada,,eve")).body).toEqual(expected.slice(0, 2));
    // Ties stay in request order, not id order (bob, cy, ghost above happened to be both).
    expect((await t.call("GET", "/v1/streaks?userIds=ghost,cy,bob")).body.map((s: { userId: string }) => s.userId)).toEqual(["ghost", "cy", "bob"]);
    const tooMany = Array.from({ length: 101 }, (_, i) => `u${i}`).join(",");
    expect((await t.call("GET", `/v1/streaks?userIds=${tooMany}`)).status).toBe(422);
    expect((await t.call("GET", `/v1/streaks?userIds=${tooMany.replaceAll(",", "&userIds=")}`)).status).toBe(422);
  });

  it("GET /v1/streaks/rankings: active excludes lost streaks by the service clock; longest keeps them", async () => {
    const active = await t.call("GET", "/v1/streaks/rankings");
    expect(active.body).toEqual([
      { userId: "ada", name: "Ada", streakLength: 4 },
      { userId: "eve", name: "Eve", streakLength: 3 },
    ]);
    // bob and cy are still in {t:s}:sa (nobody settled them): only the deadline tells they are lost.
    expect(Object.keys(Object.fromEntries(model.streakActive)).sort()).toEqual(["ada", "bob", "cy", "eve"]);
    const longest = await t.call("GET", "/v1/streaks/rankings?type=longest&limit=3");
    expect(longest.body).toEqual([
      { userId: "ada", name: "Ada", streakLength: 4 },
      { userId: "eve", name: "Eve", streakLength: 3 },
      { userId: "bob", name: "Bob", streakLength: 2 },
    ]);
    expect((await t.call("GET", "/v1/streaks/rankings?type=longest")).body.at(-1)).toEqual({ userId: "cy", name: null, streakLength: 1 });
    expect((await t.call("GET", "/v1/streaks/rankings?limit=0")).status).toBe(422);
    expect((await t.call("GET", "/v1/streaks/rankings?limit=101")).status).toBe(422);
    expect((await t.call("GET", "/v1/streaks/rankings?type=best")).status).toBe(422);
    // An empty type is as if not sent: active.
    expect(await t.call("GET", "/v1/streaks/rankings?type=")).toEqual(active);
  });
});

describe("points summaries", () => {
  it("GET /v1/points/{key}/summary: 0..0 then ten ranges up to the highest total's power of ten", async () => {
    const totals = [...model.users.values()].map((u) => u.points.get("xp")?.total ?? 0);
    expect(totals.sort((a, b) => a - b)).toEqual([0, 20, 30, 40, 120]);
    const res = await t.call("GET", "/v1/points/xp/summary");
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      { from: 0, to: 0, users: 1 },
      { from: 1, to: 100, users: 3 },
      { from: 101, to: 200, users: 1 },
      ...Array.from({ length: 8 }, (_, i) => ({ from: 201 + i * 100, to: 300 + i * 100, users: 0 })),
    ]);
    // Only users with plan=pro count (test/integration/points-summary-filter.test.ts covers the filter).
    const energy = await t.call("GET", "/v1/points/energy/summary?userAttributes=plan:pro");
    const pro = [...model.users.values()].filter((u) => u.attributes.get("plan") === "pro").length;
    expect(energy.body.reduce((n: number, r: { users: number }) => n + r.users, 0)).toBe(pro);
    expect((await t.call("GET", "/v1/points/nope/summary")).status).toBe(404);
    expect((await t.call("GET", "/v1/points/xp/summary?userAttributes=:x")).status).toBe(400);
    // One attribute twice: no user matches both, and the last pair was counted alone.
    expect(await t.call("GET", "/v1/points/energy/summary?userAttributes=plan:pro,plan:free")).toEqual({ status: 400, body: { error: "userAttributes names the attribute plan more than once" } });
  });

  it("GET /v1/points/{key}/level-summary: users per level, counted from the points totals", async () => {
    const res = await t.call("GET", "/v1/points/xp/level-summary");
    expect(res.status).toBe(200);
    const [bronze, silver] = usersAtLevels(t.tenants[0]!, model, "xp");
    expect(res.body.map((l: { level: { key: string }; users: number }) => [l.level.key, l.users])).toEqual([
      ["bronze", bronze],
      ["silver", silver],
    ]);
    expect(res.body[0]).toEqual({ level: { id: expect.any(String), key: "bronze", name: "Bronze", description: null, badgeUrl: null, points: 50 }, users: 1 });
    expect(await t.call("GET", "/v1/points/energy/level-summary")).toEqual({ status: 422, body: { error: "No levels configured on the points system: energy" } });
  });
});

describe("the level summary after the levels change in the config", () => {
  it("counts users at the new thresholds at once, before any of them earns again", async () => {
    const id = uniqueTenantId("lv");
    const config = (levels: string) =>
      tenantYaml(id, `    metrics: [{ key: lessons, name: Lessons }]\n    points:\n      - key: xp\n        name: XP\n        triggers: [{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 10 }]\n        levels:\n${levels}`);
    const users = async (app: TestApp) => (await app.call("GET", "/v1/points/xp/level-summary")).body.map((l: { level: { key: string }; users: number }) => [l.level.key, l.users]);
    await withTestApp({ yaml: config("          - { key: bronze, name: Bronze, points: 50 }\n          - { key: silver, name: Silver, points: 200 }\n") }, async (first) => {
      // 20, 30, 60, 100 and 250 XP.
      for (const [user, lessons] of [["d", 2], ["a", 3], ["b", 6], ["e", 10], ["c", 25]] as const) {
        expect((await first.call("POST", "/v1/metrics/lessons/event", { user: { id: user }, value: lessons })).status).toBe(201);
      }
      expect(await users(first)).toEqual([["bronze", 2], ["silver", 1]]);
    });
    // A level is reached by exceeding its threshold: bronze now holds 30, 60 and 100 (not 20),
    // silver nobody (100 is not above it), gold 250.
    await withTestApp({ yaml: config("          - { key: bronze, name: Bronze, points: 20 }\n          - { key: silver, name: Silver, points: 100 }\n          - { key: gold, name: Gold, points: 240 }\n") }, async (second) => {
      expect(await users(second)).toEqual([["bronze", 3], ["silver", 0], ["gold", 1]]);
    });
  });
});

describe("trigger times across restarts", () => {
  it("a restart with the same file keeps created and updated; an edited trigger moves updated only", async () => {
    const id = uniqueTenantId("ot");
    const config = (points: number) =>
      tenantYaml(id, `    metrics: [{ key: lessons, name: Lessons }]\n    points:\n      - key: xp\n        name: XP\n        triggers: [{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: ${points} }]\n`);
    const times = async (manualClock: string, points: number) =>
      withTestApp({ yaml: config(points), manualClock }, async (app) => {
        const [trigger] = (await app.call("GET", "/v1/points/xp")).body.triggers;
        return [trigger.created, trigger.updated];
      });
    expect(await times("2026-03-01T00:00:00Z", 10)).toEqual(["2026-03-01T00:00:00.000Z", "2026-03-01T00:00:00.000Z"]);
    expect(await times("2026-03-02T00:00:00Z", 10)).toEqual(["2026-03-01T00:00:00.000Z", "2026-03-01T00:00:00.000Z"]);
    expect(await times("2026-03-03T00:00:00Z", 20)).toEqual(["2026-03-01T00:00:00.000Z", "2026-03-03T00:00:00.000Z"]);
    expect(await times("2026-03-04T00:00:00Z", 20)).toEqual(["2026-03-01T00:00:00.000Z", "2026-03-03T00:00:00.000Z"]);
  });
});

describe("GET /v1/users/{id}/wrapped", () => {
  it("the year in review from the daily buckets", async () => {
    const res = await t.call("GET", "/v1/users/ada/wrapped");
    expect(res.status).toBe(200);
    expect(res.body.user).toMatchObject({ id: "ada", name: "Ada", tz: "Europe/London", attributes: { plan: "pro" }, control: false, created: "2026-03-02T12:00:00.000Z" });
    const a = res.body.activity;
    expect(a).toMatchObject({ daysActive: 4, weeksActive: 1, monthsActive: 1 });
    expect(a.mostActiveDay.date).toBe("2026-03-02"); // one event a day: the earliest wins
    expect(a.mostActiveDay.metrics.lessons).toEqual({ name: "Lessons", units: "lessons", currentTotal: 1, changeThisPeriod: 1, percentChange: 100, byAttribute: {} });
    expect(a.mostActiveWeek).toMatchObject({ start: "2026-03-02", end: "2026-03-08" });
    expect(a.mostActiveMonth.month).toBe(2);
    expect(a.entireYear.points.xp).toEqual({ name: "XP", description: null, currentTotal: 40, changeThisPeriod: 40, percentChange: 100 });
    expect(a.entireYear.achievements.map((x: { key: string }) => x.key)).toEqual(["first-lesson", "pro-lesson", "three-days"]);
    expect(a.entireYear.longestStreak).toEqual({ length: 4, frequency: "daily", periodStart: "2026-03-02", periodEnd: "2026-03-05", started: "2026-03-02" });
    expect(a.mostActiveDay.leaderboards).toEqual({});
  });

  it("the longest streak of the year began where its length was 1, across a frozen period", async () => {
    const eve = await t.call("GET", "/v1/users/eve/wrapped");
    expect(eve.body.activity.entireYear.longestStreak).toEqual({ length: 3, frequency: "daily", periodStart: "2026-03-02", periodEnd: "2026-03-05", started: "2026-03-02" });
    expect(eve.body.activity).toMatchObject({ daysActive: 3, weeksActive: 1 });
  });

  it("a year without activity names its first day, week and month with zero changes", async () => {
    const res = await t.call("GET", "/v1/users/ada/wrapped?year=2025");
    const a = res.body.activity;
    expect(a).toMatchObject({ daysActive: 0, weeksActive: 0, monthsActive: 0 });
    expect(a.mostActiveDay.date).toBe("2025-01-01");
    expect(a.mostActiveWeek).toMatchObject({ start: "2025-01-01", end: "2025-01-05" });
    expect(a.mostActiveMonth.month).toBe(0);
    expect(a.entireYear.metrics.lessons).toMatchObject({ currentTotal: 0, changeThisPeriod: 0, percentChange: 0 });
    expect(a.entireYear.longestStreak).toEqual({ length: 0, frequency: "daily", periodStart: null, periodEnd: null, started: null });
  });

  it("each period's totals start from the total before it, earlier days of the year and earlier years included; weeks, months and the year's edges by the calendar", async () => {
    const id = uniqueTenantId("wy");
    const yaml = tenantYaml(
      id,
      `
    metrics: [{ key: lessons, name: Lessons }]
    points: [{ key: xp, name: XP, triggers: [{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 10 }] }]
    achievements:
      - { key: first-lesson, name: First lesson, type: metric, metric: lessons, value: 1 }
      - { key: five-lessons, name: Five lessons, type: metric, metric: lessons, value: 5 }
`,
    );
    await withTestApp({ yaml, manualClock: "2025-12-30T12:00:00Z" }, async (w) => {
      // 2 lessons in 2025 (Tuesday 30 December: ISO week 29 December - 4 January), then one event
      // on Monday 5 January, two on the 6th (the fifth lesson), one on the 20th and one on Sunday 1
      // February (ISO week of 26 January): four days, three weeks, two months of 2026.
      for (const [at, value] of [["2025-12-30T12:00:00Z", 2], ["2026-01-05T12:00:00Z", 1], ["2026-01-06T10:00:00Z", 1], ["2026-01-06T12:00:00Z", 1], ["2026-01-20T12:00:00Z", 1], ["2026-02-01T12:00:00Z", 1]] as const) {
        await w.setClock(at);
        expect((await w.call("POST", "/v1/metrics/lessons/event", { user: { id: "yr", tz: "UTC" }, value })).status).toBe(201);
      }
      await w.setClock("2026-03-01T12:00:00Z");
      await bucketWorker(w).drain();
      const a = (await w.call("GET", "/v1/users/yr/wrapped?year=2026")).body.activity;
      expect(a).toMatchObject({ daysActive: 4, weeksActive: 3, monthsActive: 2 });
      // The busiest day: the total before it is the 5th's (3), not the year's start (2).
      expect(a.mostActiveDay.date).toBe("2026-01-06");
      expect(a.mostActiveDay.metrics.lessons).toMatchObject({ currentTotal: 5, changeThisPeriod: 2, percentChange: 66.6 });
      expect(a.mostActiveDay.points.xp).toMatchObject({ currentTotal: 50, changeThisPeriod: 20, percentChange: 66.6 });
      expect(a.mostActiveDay.achievements.map((x: { key: string }) => x.key)).toEqual(["five-lessons"]);
      expect(a.mostActiveWeek).toMatchObject({ start: "2026-01-05", end: "2026-01-11" });
      // January ends on the 31st: 1 February's lesson is not January's.
      expect(a.mostActiveMonth.month).toBe(0);
      expect(a.mostActiveMonth.metrics.lessons).toMatchObject({ currentTotal: 6, changeThisPeriod: 4, percentChange: 200 });
      expect(a.entireYear.metrics.lessons).toMatchObject({ currentTotal: 7, changeThisPeriod: 5, percentChange: 250 });
      expect(a.entireYear.achievements.map((x: { key: string }) => x.key)).toEqual(["five-lessons"]);

      // 2025: its last week is clipped to 31 December.
      const y25 = (await w.call("GET", "/v1/users/yr/wrapped?year=2025")).body.activity;
      expect(y25.mostActiveWeek).toMatchObject({ start: "2025-12-29", end: "2025-12-31" });
      expect(y25.entireYear.metrics.lessons).toMatchObject({ currentTotal: 2, changeThisPeriod: 2, percentChange: 100 });
      expect(y25.entireYear.achievements.map((x: { key: string }) => x.key)).toEqual(["first-lesson"]);
    });
  });

  it("the current year is the user's: at 12:00 UTC on 31 December it is already next year in Kiritimati (UTC+14)", async () => {
    const id = uniqueTenantId("wk");
    await withTestApp({ yaml: tenantYaml(id, "    metrics: [{ key: lessons, name: Lessons }]\n"), manualClock: "2026-12-31T12:00:00Z" }, async (w) => {
      for (const [user, tz] of [["kiri", "Pacific/Kiritimati"], ["utc", "UTC"]]) expect((await w.call("PUT", `/v1/users/${user}`, { tz })).status).toBe(200);
      expect((await w.call("GET", "/v1/users/kiri/wrapped")).body.activity.mostActiveDay.date).toBe("2027-01-01");
      expect((await w.call("GET", "/v1/users/kiri/wrapped?year=2027")).status).toBe(200);
      expect((await w.call("GET", "/v1/users/utc/wrapped")).body.activity.mostActiveDay.date).toBe("2026-01-01");
      expect((await w.call("GET", "/v1/users/utc/wrapped?year=2027")).status).toBe(422);
    });
  });

  it("year is 1 to the current year", async () => {
    expect((await t.call("GET", "/v1/users/ada/wrapped?year=1")).status).toBe(200);
    // The message names the bound the request broke, whichever check found it: 2028 and 0 fail
    // the first, zone-free one (UTC year + 1), which used to say "between 1 and 2027".
    const outOfRange = { status: 422, body: { error: "year must be between 1 and the current year" } };
    expect(await t.call("GET", "/v1/users/ada/wrapped?year=2027")).toMatchObject(outOfRange);
    expect(await t.call("GET", "/v1/users/ada/wrapped?year=2028")).toMatchObject(outOfRange);
    expect(await t.call("GET", "/v1/users/ada/wrapped?year=0")).toMatchObject(outOfRange);
    expect((await t.call("GET", "/v1/users/ada/wrapped?year=twenty")).status).toBe(400);
    expect((await t.call("GET", "/v1/users/ghost/wrapped")).status).toBe(404);
  });
});
