import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TrophyApi, TrophyApiClient, TrophyApiError } from "@trophyso/node";
import { startTestApp, type TestApp } from "../helpers/app.js";
import { bucketWorker } from "../helpers/worker.js";

/**
 * Every read endpoint of issue 4 that @trophyso/node 1.0.42 has, through the unmodified SDK:
 * its response schemas parse every body (a ParseError, or a TypeError on a null extended
 * object, fails the test; trophy-compat §4), and the values it hands back are the expected ones.
 */
let t: TrophyApiClient;
let app: TestApp;

beforeAll(async () => {
  app = await startTestApp({ manualClock: "2026-03-02T12:00:00Z" });
  t = new TrophyApiClient({ apiKey: app.apiKey, environment: { api: `${app.url}/v1`, admin: `${app.url}/admin/v1` } });
  await t.metrics.event("lessons", { user: { id: "sdk-r1", name: "Reader", tz: "Europe/Paris" }, value: 2 });
  await app.setClock("2026-03-03T12:00:00Z");
  await t.metrics.event("lessons", { user: { id: "sdk-r1" }, value: 1.5 });
  await t.metrics.event("api-calls", { user: { id: "sdk-r2", tz: "UTC" }, value: 3 });
  await bucketWorker(app).drain();
});
afterAll(async () => app.close());

describe("users.* reads through the SDK", () => {
  it("users.allMetrics and users.singleMetric: MetricResponse with status and Date achievedAt", async () => {
    const all = await t.users.allMetrics("sdk-r1");
    expect(all.map((m) => [m.key, m.current, m.status])).toEqual([
      ["lessons", 3.5, "active"],
      ["api-calls", 0, "active"],
    ]);
    const lessons = await t.users.singleMetric("sdk-r1", "lessons");
    expect(lessons.achievements[0]).toMatchObject({ name: "First lesson", trigger: "metric", metricValue: 1 });
    expect(lessons.achievements[0]!.achievedAt).toBeInstanceOf(Date);
    expect(lessons.achievements[1]!.achievedAt).toBeUndefined(); // null on the wire
  });

  it("users.metricEventSummary and users.pointsEventSummary", async () => {
    const metric = await t.users.metricEventSummary("sdk-r1", "lessons", { aggregation: "daily", startDate: "2026-03-01", endDate: "2026-03-04" });
    expect(metric).toEqual([
      { date: "2026-03-01", total: 0, change: 0 },
      { date: "2026-03-02", total: 2, change: 2 },
      { date: "2026-03-03", total: 3.5, change: 1.5 },
      { date: "2026-03-04", total: 3.5, change: 0 },
    ]);
    const points = await t.users.pointsEventSummary("sdk-r1", "xp", { aggregation: "weekly", startDate: "2026-03-01", endDate: "2026-03-08" });
    expect(points).toEqual([
      { date: "2026-02-23", total: 0, change: 0 },
      { date: "2026-03-02", total: 30, change: 30 },
    ]);
  });

  it("every aggregation on both summaries: weekly and monthly metric periods, daily points", async () => {
    // The same events by ISO week (the week of 1 March began on 23 February) and by month.
    expect(await t.users.metricEventSummary("sdk-r1", "lessons", { aggregation: "weekly", startDate: "2026-03-01", endDate: "2026-03-08" })).toEqual([
      { date: "2026-02-23", total: 0, change: 0 },
      { date: "2026-03-02", total: 3.5, change: 3.5 },
    ]);
    expect(await t.users.metricEventSummary("sdk-r1", "lessons", { aggregation: "monthly", startDate: "2026-02-15", endDate: "2026-03-31" })).toEqual([
      { date: "2026-02-01", total: 0, change: 0 },
      { date: "2026-03-01", total: 3.5, change: 3.5 },
    ]);
    // 2 lessons paid 20 XP on the 2nd; 1.5 more crossed the third lesson on the 3rd: 10.
    expect(await t.users.pointsEventSummary("sdk-r1", "xp", { aggregation: "daily", startDate: "2026-03-02", endDate: "2026-03-03" })).toEqual([
      { date: "2026-03-02", total: 20, change: 20 },
      { date: "2026-03-03", total: 30, change: 10 },
    ]);
  });

  it("points changed by a time trigger (a stream record of its own) are in the summary too", async () => {
    const coins = await t.users.points("sdk-r1", "coins");
    expect(coins.total).toBeGreaterThan(0);
    const summary = await t.users.pointsEventSummary("sdk-r1", "coins", { aggregation: "monthly", startDate: "2026-03-01", endDate: "2026-03-31" });
    expect(summary).toEqual([{ date: "2026-03-01", total: coins.total, change: coins.total }]);
  });

  it("users.achievements with includeIncomplete: completions and rarity", async () => {
    const done = await t.users.achievements("sdk-r1");
    expect(done.map((a) => a.name)).toEqual(["First lesson"]);
    expect(done[0]).toMatchObject({ completions: 1, rarity: 50 });
    expect(done[0]!.achievedAt).toBeInstanceOf(Date);
    const all = await t.users.achievements("sdk-r1", { includeIncomplete: "true" });
    expect(all.length).toBeGreaterThan(1);
    expect(all.filter((a) => a.achievedAt === undefined).length).toBe(all.length - 1);
  });

  it("users.streak with historyPeriods", async () => {
    const streak = await t.users.streak("sdk-r1", { historyPeriods: 3 });
    expect(streak).toMatchObject({ length: 2, frequency: "daily", started: "2026-03-02", periodStart: "2026-03-03", rank: 1 });
    expect(streak.streakHistory!.map((h) => h.length)).toEqual([0, 1, 2]);
  });

  it("users.wrapped: every required field of WrappedResponse", async () => {
    const wrapped = await t.users.wrapped("sdk-r1", { year: 2026 });
    expect(wrapped.user).toMatchObject({ id: "sdk-r1", name: "Reader", control: false });
    expect(wrapped.user.created).toBeInstanceOf(Date);
    expect(wrapped.activity).toMatchObject({ daysActive: 2, weeksActive: 1, monthsActive: 1 });
    expect(wrapped.activity.mostActiveDay.date).toBe("2026-03-02");
    expect(wrapped.activity.entireYear.metrics.lessons).toMatchObject({ currentTotal: 3.5, changeThisPeriod: 3.5 });
    expect(wrapped.activity.entireYear.longestStreak).toMatchObject({ length: 2, frequency: "daily" });
    expect(wrapped.activity.entireYear.achievements[0]!.achievedAt).toBeInstanceOf(Date);
    // The default year is the current one (2026 by the manual clock).
    expect(await t.users.wrapped("sdk-r1")).toEqual(wrapped);
  });

  it("users.wrapped of another year: that year's calendar, without this year's activity", async () => {
    const before = await t.users.wrapped("sdk-r1", { year: 2025 });
    expect(before.activity).toMatchObject({ daysActive: 0, weeksActive: 0, monthsActive: 0 });
    // A year without events names its first day.
    expect(before.activity.mostActiveDay.date).toBe("2025-01-01");
    expect(before.activity.entireYear.metrics.lessons).toMatchObject({ currentTotal: 0, changeThisPeriod: 0 });
    expect(before.activity.entireYear.achievements).toEqual([]);
    expect(before.activity.entireYear.longestStreak.length).toBe(0);
  });

  it("unknown users give NotFoundError; out-of-range queries UnprocessableEntityError", async () => {
    const missing = await t.users.streak("sdk-nobody").then(
      () => null,
      (e: unknown) => e,
    );
    expect(missing).toBeInstanceOf(TrophyApi.NotFoundError);
    const range = await t.users.metricEventSummary("sdk-r1", "lessons", { aggregation: "daily", startDate: "2026-03-05", endDate: "2026-03-01" }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(range).toBeInstanceOf(TrophyApi.UnprocessableEntityError);
    expect((range as TrophyApiError).body).toEqual({ error: expect.any(String) });
  });
});

describe("achievements, streaks and points reads through the SDK", () => {
  it("achievements.all with and without userAttributes", async () => {
    const all = await t.achievements.all();
    expect(all[0]).toMatchObject({ name: "First lesson", completions: 1, rarity: 50 });
    expect(await t.achievements.all({ userAttributes: "plan:pro" })).toHaveLength(all.length);
  });

  it("streaks.list (array and comma forms) and streaks.rankings", async () => {
    const list = await t.streaks.list({ userIds: ["sdk-r2", "sdk-r1"] });
    expect(list.map((s) => [s.userId, s.streakLength])).toEqual([
      ["sdk-r1", 2],
      ["sdk-r2", 0],
    ]);
    expect(list[0]!.extended).toBe("2026-03-03T12:00:00.000Z");
    expect(await t.streaks.list({ userIds: "sdk-r1,sdk-r2" })).toEqual(list);
    // The array form's ids are taken whole: a comma in one does not split it.
    expect((await t.streaks.list({ userIds: ["sdk-r1", "no,body"] })).map((s) => [s.userId, s.streakLength])).toEqual([
      ["sdk-r1", 2],
      ["no,body", 0],
    ]);
    // ...but a list of one id goes on the wire as the comma form does (`userIds=no%2Cbody`, the
    // SDK's qs sends both alike): it is split, and such a user is asked for alone by users.streak.
    expect((await t.streaks.list({ userIds: ["no,body"] })).map((s) => s.userId)).toEqual(["no", "body"]);
    expect(await t.streaks.list()).toEqual([]);
    // At most 100 ids: 100 is within the bound (101 is 422, test/integration/read-endpoints.test.ts).
    const hundred = Array.from({ length: 100 }, (_, i) => `sdk-many-${i}`);
    expect((await t.streaks.list({ userIds: hundred })).map((s) => s.userId)).toEqual(hundred);
    expect(await t.streaks.rankings({ limit: 5, type: "active" })).toEqual([{ userId: "sdk-r1", name: "Reader", streakLength: 2 }]);
    expect(await t.streaks.rankings({ type: "longest" })).toEqual([{ userId: "sdk-r1", name: "Reader", streakLength: 2 }]);
  });

  it("points.summary: PointsRange[]", async () => {
    const summary = await t.points.summary("xp");
    expect(summary).toHaveLength(11);
    expect(summary[0]).toEqual({ from: 0, to: 0, users: 1 });
    expect(summary.slice(1).reduce((n, r) => n + r.users, 0)).toBe(1);
    expect(await t.points.summary("energy", { userAttributes: "plan:pro" })).toHaveLength(11);
  });
});
