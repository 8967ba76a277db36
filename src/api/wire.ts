import type { CompiledAchievement, CompiledLevel, CompiledSystem, CompiledTenant, CompiledTrigger } from "../config/compiled.js";
import { fromMicro } from "../domain/decimal.js";
import { awardId, stableId } from "../domain/ids.js";
import type { AwardRecord } from "../domain/outcome.js";
import type { StreakView } from "../domain/streak.js";
import type { ObjectTimes } from "../store/object-times.js";

/**
 * JSON shapes of the wire (service-spec "Resources", trophy-compat §3). Optional fields the
 * hosted API always emits are emitted here too, as null, so clients see one stable shape.
 */

// Instants as ISO 8601 text (Date#toISOString's format). A Date and its toISOString cost ~1 µs a
// time here, and a points read formats one date per award, each a different instant. The day's
// "YYYY-MM-DDT" comes from toISOString once per day (so every year it can print stays right); the
// time of day is arithmetic. An event's reply formats the same `now` several times: the last
// instant's text is kept as well.
const DAY_MS = 86_400_000;
const MAX_DATE_MS = 8.64e15;
let lastDay = NaN;
let lastDayText = "";
let lastIsoMs = NaN;
let lastIso = "";
const two = (n: number): string => (n < 10 ? `0${n}` : `${n}`);
const three = (n: number): string => (n < 10 ? `00${n}` : n < 100 ? `0${n}` : `${n}`);

export function iso(ms: number): string {
  if (ms === lastIsoMs) return lastIso;
  // A fraction, NaN or an instant past what a Date holds: Date's own answer (truncation, or RangeError).
  if (!Number.isInteger(ms) || Math.abs(ms) > MAX_DATE_MS) return new Date(ms).toISOString();
  const day = Math.floor(ms / DAY_MS);
  if (day !== lastDay) {
    lastDayText = new Date(day * DAY_MS).toISOString().slice(0, -13); // "YYYY-MM-DDT" (or "+YYYYYY-MM-DDT")
    lastDay = day;
  }
  let rest = ms - day * DAY_MS;
  const millis = rest % 1000;
  rest = (rest - millis) / 1000;
  const seconds = rest % 60;
  rest = (rest - seconds) / 60;
  lastIso = `${lastDayText}${two((rest - (rest % 60)) / 60)}:${two(rest % 60)}:${two(seconds)}.${three(millis)}Z`;
  lastIsoMs = ms;
  return lastIso;
}

export function levelJson(level: CompiledLevel) {
  return {
    id: level.id,
    key: level.key,
    name: level.name,
    description: level.description,
    badgeUrl: level.badgeUrl,
    points: level.points,
  };
}

/** The trigger as embedded in an award (spec: Trigger; trophy-compat §3.6 PointsTrigger). */
export function triggerJson(trigger: CompiledTrigger, tenant: CompiledTenant) {
  const out: Record<string, unknown> = { id: trigger.id, key: trigger.key, type: trigger.type, points: trigger.points };
  switch (trigger.type) {
    case "metric": {
      const metric = tenant.metricByKey.get(trigger.metric)!;
      Object.assign(out, { metricId: metric.id, metricName: metric.name, metricThreshold: trigger.threshold });
      if (trigger.eventAttributes.length > 0) {
        out.eventAttributes = pairsJson(trigger.eventAttributes);
        out.eventAttribute = pairsJson(trigger.eventAttributes)[0];
      }
      break;
    }
    case "streak":
      out.streakLengthThreshold = trigger.length;
      break;
    case "achievement": {
      const achievement = tenant.achievementByKey.get(trigger.achievement)!;
      Object.assign(out, { achievementId: achievement.id, achievementName: achievement.name });
      break;
    }
    case "time":
      Object.assign(out, { timeUnit: trigger.unit, timeInterval: trigger.interval });
      break;
    case "user_creation":
      break;
  }
  if (trigger.userAttributes.length > 0) out.userAttributes = pairsJson(trigger.userAttributes);
  return out;
}

/** PointsTriggerResponse (GET /v1/points/{key}). */
export function triggerResponseJson(trigger: CompiledTrigger, tenant: CompiledTenant, times: ObjectTimes) {
  return { ...triggerJson(trigger, tenant), status: "active", ...times.get(trigger.id) };
}

/** The trigger of an award, by its key. */
export function awardTriggerJson(tenant: CompiledTenant, system: CompiledSystem, triggerKey: string) {
  const trigger = system.triggers.find((t) => t.key === triggerKey);
  // A trigger removed from the config since keeps its id; its other fields are gone with it.
  return trigger ? triggerJson(trigger, tenant) : { id: stableId(tenant.ns, "trigger", `${system.key}/${triggerKey}`), key: triggerKey };
}

export function awardJson(tenant: CompiledTenant, system: CompiledSystem, userId: string, record: AwardRecord) {
  return {
    id: awardId(tenant.ns, userId, system.key, record.seq),
    awarded: record.awarded,
    date: iso(record.ms),
    total: record.total,
    trigger: awardTriggerJson(tenant, system, record.triggerKey),
  };
}

export function systemHeadJson(system: CompiledSystem) {
  return {
    id: system.id,
    key: system.key,
    name: system.name,
    description: system.description,
    badgeUrl: system.badgeUrl,
    maxPoints: system.maxPoints,
  };
}

/** [{key, value}] as the wire carries attribute filters (trophy-compat §3.4, §3.6). */
export const pairsJson = (pairs: [string, string][]) => pairs.map(([key, value]) => ({ key, value }));

/**
 * UserAchievementResponse (trophy-compat §3.4); achievedAt null when not completed. Composite
 * achievements carry trigger "achievement" (the hosted API's newer value) and `achievementIds`.
 */
export function achievementJson(tenant: CompiledTenant, achievement: CompiledAchievement, achievedAt: number | null) {
  const out: Record<string, unknown> = {
    id: achievement.id,
    key: achievement.key,
    name: achievement.name,
    trigger: achievement.type === "composite" ? "achievement" : achievement.type,
    description: achievement.description,
    badgeUrl: achievement.badgeUrl,
  };
  switch (achievement.type) {
    case "metric": {
      const metric = tenant.metricByKey.get(achievement.metric)!;
      Object.assign(out, { metricId: metric.id, metricName: metric.name, metricValue: achievement.value });
      break;
    }
    case "streak":
      out.streakLength = achievement.length;
      break;
    case "composite":
      out.achievementIds = achievement.prerequisites.map((k) => tenant.achievementByKey.get(k)!.id);
      break;
    case "api":
      break;
  }
  if (achievement.userAttributes.length > 0) out.userAttributes = pairsJson(achievement.userAttributes);
  out.achievedAt = achievedAt === null ? null : iso(achievedAt);
  return out;
}

export const metricTotalJson = fromMicro;

const dayOrNull = (day: string | null): string => (day === null ? "null" : `"${day}"`);

/**
 * JSON text of `{...view, extended}`, the event reply's currentStreak, in the view's field
 * order: dates are formatDay's ASCII and the rest numbers or a frequency name, so nothing needs
 * escaping (test/unit/wire-text.test.ts holds it to JSON.stringify of the same object).
 */
export function streakText(view: StreakView, extended: boolean): string {
  let text = `{"length":${view.length},"frequency":"${view.frequency}","started":${dayOrNull(view.started)},"periodStart":"${view.periodStart}","periodEnd":"${view.periodEnd}","expires":${dayOrNull(view.expires)}`;
  if (view.freezes !== undefined) text += `,"freezes":${view.freezes}`;
  if (view.maxFreezes !== undefined) text += `,"maxFreezes":${view.maxFreezes}`;
  if (view.freezeAutoEarnInterval !== undefined) text += `,"freezeAutoEarnInterval":${view.freezeAutoEarnInterval}`;
  if (view.freezeAutoEarnAmount !== undefined) text += `,"freezeAutoEarnAmount":${view.freezeAutoEarnAmount}`;
  return `${text},"extended":${extended}}`;
}
