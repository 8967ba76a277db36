import type { CompiledAchievement, CompiledLevel, CompiledSystem, CompiledTenant, CompiledTrigger } from "../config/compiled.js";
import { fromMicro } from "../domain/decimal.js";
import { awardId, stableId } from "../domain/ids.js";
import type { AwardRecord } from "../domain/outcome.js";
import type { ObjectTimes } from "../store/object-times.js";

/**
 * JSON shapes of the wire (service-spec "Resources", trophy-compat §3). Optional fields the
 * hosted API always emits are emitted here too, as null, so clients see one stable shape.
 */
export const iso = (ms: number): string => new Date(ms).toISOString();

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

/** The trigger as embedded in an award (spec: Trigger; trophy-compat PointsTrigger). */
export function triggerJson(trigger: CompiledTrigger, tenant: CompiledTenant) {
  const base = { id: trigger.id, key: trigger.key, type: trigger.type, points: trigger.points };
  switch (trigger.type) {
    case "metric":
      return {
        ...base,
        metricId: tenant.metricByKey.get(trigger.metric)!.id,
        metricName: tenant.metricByKey.get(trigger.metric)!.name,
        metricThreshold: trigger.threshold,
      };
    case "user_creation":
      return base;
  }
}

/** PointsTriggerResponse (GET /v1/points/{key}). */
export function triggerResponseJson(trigger: CompiledTrigger, tenant: CompiledTenant, times: ObjectTimes) {
  return { ...triggerJson(trigger, tenant), status: "active", ...times.get(trigger.id) };
}

export function awardJson(tenant: CompiledTenant, system: CompiledSystem, userId: string, record: AwardRecord) {
  const trigger = system.triggers.find((t) => t.key === record.triggerKey);
  return {
    id: awardId(tenant.ns, userId, system.key, record.seq),
    awarded: record.awarded,
    date: iso(record.ms),
    total: record.total,
    // A trigger removed from the config since keeps its id; its other fields are gone with it.
    trigger: trigger ? triggerJson(trigger, tenant) : { id: stableId(tenant.ns, "trigger", `${system.key}/${record.triggerKey}`), key: record.triggerKey },
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

/** UserAchievementResponse (trophy-compat §3.4); achievedAt null when not completed. */
export function achievementJson(tenant: CompiledTenant, achievement: CompiledAchievement, achievedAt: number | null) {
  const metric = tenant.metricByKey.get(achievement.metric)!;
  return {
    id: achievement.id,
    key: achievement.key,
    name: achievement.name,
    trigger: achievement.type,
    description: achievement.description,
    badgeUrl: achievement.badgeUrl,
    metricId: metric.id,
    metricName: metric.name,
    metricValue: achievement.value,
    achievedAt: achievedAt === null ? null : iso(achievedAt),
  };
}

export const metricTotalJson = fromMicro;
