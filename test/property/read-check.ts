import { expect } from "vitest";
import type { CompiledTenant } from "../../src/config/compiled.js";
import { fromMicro } from "../../src/domain/decimal.js";
import { modelEventSummary, modelPointsSummary, modelStreakRankings, modelUserAchievements, modelUserMetrics, modelWrapped, streakState, type ModelState, type ModelUser, type ModelWrappedSpan } from "../../src/domain/model.js";
import { formatDay, localDayIndex, periodOfDay, type Frequency } from "../../src/domain/periods.js";
import { userJson } from "../../src/api/users.js";
import { bucketWorker } from "../helpers/worker.js";
import { onTheWire } from "../helpers/wire.js";
import { settleCopy, viewStreak } from "../../src/domain/streak.js";
import { achievementJson } from "../../src/api/wire.js";
import type { TestApp } from "../helpers/app.js";

/**
 * The cross-user and user-scoped reads the property tests compare with the model's twins
 * (src/domain/model.ts): the points summary, the streak rankings and the bulk streak read, the
 * user's achievements and metrics. Each read changes nothing: callers may have several in flight.
 */

/** A streak read's `extended`: the last extension (or bringing restore) of a live streak. */
export function extendedJson(user: ModelUser, length: number): string | null {
  return length > 0 && user.streak.extendedAt !== null ? new Date(user.streak.extendedAt).toISOString() : null;
}

/** The length a streak read shows now: the model's streak settled as a reader settles it (settleCopy, without writing). */
function streakLengthNow(tenant: CompiledTenant, user: ModelUser, now: number): number {
  const rule = tenant.streak!;
  const nowDay = localDayIndex(now, user.profile.get("tz") ?? "UTC");
  const nowPeriod = periodOfDay(nowDay, rule.frequency);
  const { streak } = settleCopy(tenant, { ...streakState(user), metPeriod: user.streak.metPeriod }, nowDay, nowPeriod);
  return viewStreak(rule, streak, nowDay, nowPeriod).length;
}

/**
 * The user's achievements and metrics reads (lua/readPlan-1.lua: state fields and attributes in
 * one call) against modelUserAchievements and modelUserMetrics, and the profile read against the
 * model user's fields; 404 for an unknown user.
 */
export async function expectUserReadsEqual(t: TestApp, tenant: CompiledTenant, model: ModelState, user: string, includeIncomplete: boolean, api: Record<string, string>): Promise<void> {
  const achievements = await t.call("GET", `/v1/users/${encodeURIComponent(user)}/achievements${includeIncomplete ? "?includeIncomplete=true" : ""}`, undefined, api);
  const expectedAchievements = modelUserAchievements(tenant, model, user, includeIncomplete);
  const metrics = await t.call("GET", `/v1/users/${encodeURIComponent(user)}/metrics`, undefined, api);
  const expectedMetrics = modelUserMetrics(tenant, model, user);
  if (expectedAchievements === null || expectedMetrics === null) {
    expect([achievements.status, metrics.status], `reads of unknown ${user}`).toEqual([404, 404]);
    return;
  }
  // GET /v1/users/{id} (lua/readUser-1.lua): the stored profile, attributes and instants.
  const profile = await t.call("GET", `/v1/users/${encodeURIComponent(user)}`, undefined, api);
  const u = model.users.get(user)!;
  const { deviceTokens: _tokens, subscribeToEmails: _subscribed, control: _control, ...shown } = profile.body;
  expect(shown, `profile of ${user}`).toEqual({
    id: user,
    email: u.profile.get("se") === "0" ? null : u.profile.get("em") || null,
    name: u.profile.get("nm") ?? null,
    tz: u.profile.get("tz") ?? null,
    attributes: Object.fromEntries([...u.attributes].filter(([k]) => tenant.userAttributes.has(k))),
    created: new Date(u.created).toISOString(),
    updated: new Date(u.updated).toISOString(),
  });
  const json = (a: { key: string; achievedAt: number | null }) => achievementJson(tenant, tenant.achievementByKey.get(a.key)!, a.achievedAt);
  expect(achievements.body, `achievements of ${user}`).toEqual(expectedAchievements.map((a) => ({ ...json(a), completions: a.completions, rarity: a.rarity })));
  expect(metrics.body.map((m: { key: string; current: number; achievements: unknown[] }) => ({ key: m.key, current: m.current, achievements: m.achievements })), `metrics of ${user}`).toEqual(
    expectedMetrics.map((m) => ({ key: m.key, current: fromMicro(m.totalMicro), achievements: m.achievements.map(json) })),
  );
}

/** GET /v1/points/{key}/summary (with `filter` as userAttributes) against modelPointsSummary. */
export async function expectSummaryEqual(t: TestApp, tenant: CompiledTenant, model: ModelState, system: string, filter: string | null, api: Record<string, string>): Promise<void> {
  const res = await t.call("GET", `/v1/points/${system}/summary${filter === null ? "" : `?userAttributes=${filter}`}`, undefined, api);
  expect(res.status).toBe(200);
  const pairs = filter === null ? null : new Map(filter.split(",").map((p) => p.split(":") as [string, string]));
  expect(res.body, `${system} summary of ${filter ?? "all"}`).toEqual(modelPointsSummary(model, system, pairs));
}

/** GET /v1/streaks/rankings against modelStreakRankings. */
export async function expectRankingsEqual(t: TestApp, model: ModelState, type: "active" | "longest", limit: number, now: number, api: Record<string, string>): Promise<void> {
  const res = await t.call("GET", `/v1/streaks/rankings?type=${type}&limit=${limit}`, undefined, api);
  expect(res.status).toBe(200);
  expect(res.body, `${type} streak rankings`).toEqual(modelStreakRankings(model, type, limit, now));
}

/** GET /v1/streaks?userIds=...: each user's length as their streak read shows it, longest first (ties in the asked order), an unknown user at 0. */
export async function expectStreakListEqual(t: TestApp, tenant: CompiledTenant, model: ModelState, users: readonly string[], now: number, api: Record<string, string>): Promise<void> {
  const res = await t.call("GET", `/v1/streaks?${users.map((u) => `userIds=${encodeURIComponent(u)}`).join("&")}`, undefined, api);
  expect(res.status).toBe(200);
  const items = users.map((userId) => {
    const user = model.users.get(userId);
    const length = user ? streakLengthNow(tenant, user, now) : 0;
    return { userId, streakLength: length, extended: user ? extendedJson(user, length) : null };
  });
  expect(res.body, `streaks of ${users.join(",")}`).toEqual(items.sort((a, b) => b.streakLength - a.streakLength));
}

/** The stream worker applies what the streams hold (the event summaries and wrapped read its buckets; `drain` false: the caller did). */
export async function drainBuckets(t: TestApp): Promise<void> {
  // Small batches: records whose day Node computes (points of identifies, completions, ticks)
  // among events' fall on batch edges (lua/applyStream-2.lua stops at the first without its day).
  await bucketWorker(t, { batchSize: 3 }).drain();
}

/**
 * GET /v1/users/{id}/metrics|points/{key}/event-summary over the local days [from, to] against
 * modelEventSummary, once the stream worker has applied the streams; 404 for an unknown user,
 * 422 for a range backwards or longer than 400 days.
 */
export async function expectEventSummaryEqual(t: TestApp, tenant: CompiledTenant, model: ModelState, user: string, series: string, aggregation: Frequency, from: number, to: number, api: Record<string, string>, drain = true): Promise<void> {
  if (drain) await drainBuckets(t);
  const [kind, key] = series.split(":") as ["m" | "p", string];
  const path = `/v1/users/${encodeURIComponent(user)}/${kind === "m" ? "metrics" : "points"}/${key}/event-summary?aggregation=${aggregation}&startDate=${formatDay(from)}&endDate=${formatDay(to)}`;
  const res = await t.call("GET", path, undefined, api);
  if (from > to || to - from > 400) {
    expect(res.status, path).toBe(422);
    return;
  }
  const expected = modelEventSummary(model, user, series, from, to, aggregation);
  if (expected === null) {
    expect(res.status, path).toBe(404);
    return;
  }
  const wire = kind === "m" ? fromMicro : (n: number) => n;
  expect({ status: res.status, body: res.body }, path).toEqual({ status: 200, body: expected.map((i) => ({ ...i, total: wire(i.total), change: wire(i.change) })) });
}

/** GET /v1/users/{id}/wrapped[?year=] against modelWrapped, once the stream worker has applied the streams. */
export async function expectWrappedEqual(t: TestApp, tenant: CompiledTenant, model: ModelState, user: string, year: number | null, now: number, api: Record<string, string>, drain = true): Promise<void> {
  if (drain) await drainBuckets(t);
  const path = `/v1/users/${encodeURIComponent(user)}/wrapped${year === null ? "" : `?year=${year}`}`;
  const res = await t.call("GET", path, undefined, api);
  const expected = modelWrapped(tenant, model, user, year, now);
  if (expected.status !== 200) {
    expect(res.status, path).toBe(expected.status);
    return;
  }
  const u = model.users.get(user)!;
  const fields = new Map([...u.profile, ...[...u.attributes].map(([k, v]) => [`ua:${k}`, v] as [string, string])]);
  const period = (s: ModelWrappedSpan) => ({
    metrics: Object.fromEntries(
      s.metrics.map((m) => {
        const metric = tenant.metricByKey.get(m.key)!;
        return [m.key, { name: metric.name, units: metric.units, currentTotal: fromMicro(m.total), changeThisPeriod: fromMicro(m.change), percentChange: m.percentChange, byAttribute: {} }];
      }),
    ),
    points: Object.fromEntries(
      s.points.map((p) => {
        const system = tenant.systemByKey.get(p.key)!;
        return [p.key, { name: system.name, description: system.description, currentTotal: p.total, changeThisPeriod: p.change, percentChange: p.percentChange }];
      }),
    ),
    achievements: s.achievements.map((a) => achievementJson(tenant, tenant.achievementByKey.get(a.key)!, a.achievedAt)),
    leaderboards: {},
  });
  const day = (d: number | null) => (d === null ? null : formatDay(d));
  expect({ status: res.status, body: res.body }, path).toEqual(
    onTheWire({
      status: 200,
      body: {
        user: userJson(tenant, user, { created: u.created, updated: u.updated, fields }),
        activity: {
          daysActive: expected.daysActive,
          weeksActive: expected.weeksActive,
          monthsActive: expected.monthsActive,
          mostActiveDay: { date: formatDay(expected.mostActiveDay.from), ...period(expected.mostActiveDay) },
          mostActiveWeek: { start: formatDay(expected.mostActiveWeek.from), end: formatDay(expected.mostActiveWeek.to), ...period(expected.mostActiveWeek) },
          mostActiveMonth: { month: expected.mostActiveMonth.month, ...period(expected.mostActiveMonth) },
          entireYear: {
            ...period(expected.entireYear),
            longestStreak: {
              length: expected.longestStreak.length,
              frequency: tenant.streak?.frequency ?? "daily",
              periodStart: day(expected.longestStreak.periodStart),
              periodEnd: day(expected.longestStreak.periodEnd),
              started: day(expected.longestStreak.started),
            },
          },
        },
      },
    }),
  );
}
