import type { CompiledTenant } from "../config/compiled.js";
import type { Clock } from "../clock.js";
import { metricSeries, pointsSeries, type DayBucket } from "../domain/buckets.js";
import { fromMicro } from "../domain/decimal.js";
import { fail } from "../domain/errors.js";
import { dayToDate, formatDay, localDayIndex, periodEndDay, periodStartDay } from "../domain/periods.js";
import { streakFirstDay } from "../domain/streak.js";
import { longestStreakIn, periodsOf, seriesInPeriod, wrappedPeriods, yearSpan, type DaySpan } from "../domain/wrapped.js";
import type { ApiReply, ApiRequest } from "../http/router.js";
import { PROFILE_FIELDS, userAttributeField } from "../store/fields.js";
import { planBuckets } from "../store/bucket-reads.js";
import { ReadPlan } from "../store/read-plan.js";
import { readStoreOf, type ReadStore } from "../store/read-store.js";
import { STREAK_START_DAY } from "../store/state-slots.js";
import type { Tenants } from "../tenants.js";
import { intParam } from "./query.js";
import { checkUserId } from "./user-input.js";
import { userJson } from "./users.js";
import { achievementJson } from "./wire.js";
import { failUserNotFound } from "./lookup.js";

/**
 * GET /v1/users/{id}/wrapped?year= (trophy-compat §2.2 #18, §3.8): the user's year in review
 * on the user's calendar, from the stream worker's daily buckets (domain/wrapped.ts has the
 * rules). `year` is 1 to the current year in the user's zone, default the current one.
 * Optional fields are left out: percentiles (they need every user's change) and byAttribute
 * values (`{}`); `leaderboards` is `{}` until leaderboards exist.
 * Cost: one script on the user's shard (two when `year` is omitted from 14 hours before a new
 * year in UTC until 12 hours after it, where the user's zone decides which year is current).
 */
const HOUR_MS = 3_600_000;

const localYear = (now: number, tz: string): number => dayToDate(localDayIndex(now, tz)).y;

async function userZone(read: ReadStore, userId: string): Promise<string> {
  const plan = new ReadPlan(read.slots);
  const zone = plan.fields(["tz"]);
  const result = await read.runPlan(userId, plan);
  if (result === null) failUserNotFound(userId);
  return (result[zone]![0] as string | null) ?? "UTC";
}

interface Series {
  before: number;
  buckets: DayBucket[];
}

function periodJson(tenant: CompiledTenant, span: DaySpan, metrics: Series[], points: Series[], completed: { key: string; ms: number; day: number }[]) {
  const metricsJson: Record<string, unknown> = {};
  tenant.metrics.forEach((m, i) => {
    const s = seriesInPeriod(metrics[i]!.before, metrics[i]!.buckets, span);
    metricsJson[m.key] = {
      name: m.name,
      units: m.units,
      currentTotal: fromMicro(s.currentTotal),
      changeThisPeriod: fromMicro(s.changeThisPeriod),
      percentChange: s.percentChange,
      byAttribute: {},
    };
  });
  const pointsJson: Record<string, unknown> = {};
  tenant.systems.forEach((sys, i) => {
    const s = seriesInPeriod(points[i]!.before, points[i]!.buckets, span);
    pointsJson[sys.key] = { name: sys.name, description: sys.description, ...s };
  });
  return {
    metrics: metricsJson,
    points: pointsJson,
    achievements: completed
      .filter((c) => c.day >= span.from && c.day <= span.to)
      .map((c) => achievementJson(tenant, tenant.achievementByKey.get(c.key)!, c.ms)),
    leaderboards: {},
  };
}

const YEAR_RANGE = "1 and the current year";

export function wrappedHandler(tenants: Tenants, clock: Clock) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant, store } = tenants.authenticate(req.apiKey);
    const userId = req.params[0]!;
    checkUserId(userId, "user id");
    const now = clock.now();
    const read = readStoreOf(store);
    const utcYear = localYear(now, "UTC");
    // UTC year + 1 is only a first bound (the user's zone, read below, decides the current year),
    // so the message names the real bound: "between 1 and 2027" on 27 November 2026 was false.
    let year = intParam(req.query, "year", 0, 1, utcYear + 1, YEAR_RANGE);
    let tz: string | null = null;
    if (year === 0) {
      const earliest = localYear(now - 12 * HOUR_MS, "UTC");
      year = earliest === localYear(now + 14 * HOUR_MS, "UTC") ? earliest : localYear(now, (tz = await userZone(read, userId)));
    }

    const span = yearSpan(year);
    const frequency = tenant.streak?.frequency ?? "daily";
    const streakPeriods = periodsOf(span, frequency);
    const shard = read.shard(userId);
    const attributeFields = [...tenant.userAttributes].map(userAttributeField);
    const profileFields = [...PROFILE_FIELDS, ...attributeFields];
    const plan = new ReadPlan(read.slots);
    const fields = plan.fields(profileFields);
    const state = plan.state(["ct", "up", "ss", STREAK_START_DAY, ...tenant.achievements.map((a) => `a:${a.key}`)]);
    const seriesReads = [...tenant.metrics.map((m) => metricSeries(m.key)), ...tenant.systems.map((s) => pointsSeries(s.key))].map((series) =>
      planBuckets(plan, read.keys, shard, series, userId, span.from, span.to),
    );
    // The history before the year too: the longest streak of the year may have begun earlier.
    // All of it: it is trimmed to the last STREAK_HISTORY_KEPT periods, the live streak kept whole.
    const history = plan.range(read.keys.streakHistory(shard, userId), "-inf", streakPeriods.to);
    const result = await read.runPlan(userId, plan);
    if (result === null) failUserNotFound(userId);

    const profile = new Map<string, string>();
    (result[fields] as (string | null)[]).forEach((v, i) => {
      if (v !== null) profile.set(profileFields[i]!, v);
    });
    tz ??= profile.get("tz") ?? "UTC";
    if (year > localYear(now, tz)) fail("OUT_OF_RANGE", `year must be between ${YEAR_RANGE}`);
    const [created, updated, storedStart, storedStartDay, ...achievedAt] = result[state] as (number | null)[];
    const completed = tenant.achievements
      .map((a, i) => ({ key: a.key, ms: achievedAt[i] ?? null }))
      .filter((c): c is { key: string; ms: number } => c.ms !== null)
      .map((c) => ({ ...c, day: localDayIndex(c.ms, tz!) }));
    const series: Series[] = seriesReads.map((decode) => {
      const { before, inRange } = decode(result);
      return { before: before?.total ?? 0, buckets: inRange };
    });
    const metrics = series.slice(0, tenant.metrics.length);
    const points = series.slice(tenant.metrics.length);

    const periods = wrappedPeriods(year, metrics.map((m) => m.buckets));
    const period = (s: DaySpan) => periodJson(tenant, s, metrics, points, completed);
    const longest = longestStreakIn(result[history] as string[], streakPeriods.from, streakPeriods.to);
    // The day it began is stored for the user's last streak only (ssd); an earlier one shows its first period's first day.
    const longestStarted = longest.startPeriod === null ? null : streakFirstDay(longest.startPeriod, longest.startPeriod === storedStart ? (storedStartDay ?? null) : null, frequency);
    return {
      status: 200,
      body: {
        user: userJson(tenant, userId, { created: created ?? 0, updated: updated ?? 0, fields: profile }),
        activity: {
          daysActive: periods.daysActive,
          weeksActive: periods.weeksActive,
          monthsActive: periods.monthsActive,
          mostActiveDay: { date: formatDay(periods.mostActiveDay.from), ...period(periods.mostActiveDay) },
          mostActiveWeek: { start: formatDay(periods.mostActiveWeek.from), end: formatDay(periods.mostActiveWeek.to), ...period(periods.mostActiveWeek) },
          mostActiveMonth: { month: periods.mostActiveMonth.month, ...period(periods.mostActiveMonth.span) },
          entireYear: {
            ...period(periods.entireYear),
            longestStreak: {
              length: longest.length,
              frequency,
              periodStart: longest.startPeriod === null ? null : formatDay(periodStartDay(longest.startPeriod, frequency)),
              periodEnd: longest.endPeriod === null ? null : formatDay(periodEndDay(longest.endPeriod, frequency)),
              started: longestStarted === null ? null : formatDay(longestStarted),
            },
          },
        },
      },
    };
  };
}
