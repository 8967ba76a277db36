import type { CompiledTenant } from "../config/compiled.js";
import { MAX_TOTAL_MICRO } from "../domain/decimal.js";
import { STREAK_HISTORY_KEPT } from "../domain/streak.js";
import { PROFILE_FIELDS } from "./fields.js";

/**
 * The rules lua/event-3.lua runs for one metric of one tenant, narrowed to what an event on
 * that metric can touch (STACK.md: decoding a rules blob per call costs 7-11 µs; a literal
 * table built into the script costs about 1). The reference model reads the whole
 * CompiledTenant instead, so the property tests also prove the narrowing loses nothing.
 */
export interface EventRules {
  /** State field of the metric total. */
  mf: string;
  maxTotal: number;
  /** Streak history periods kept ({t:s}:sh:<user>). */
  historyKept: number;
  /** Every state field the script reads, in HMGET order. */
  fields: string[];
  systems: {
    key: string;
    cap: number;
    /** Level thresholds, ascending, and their keys. */
    lv: number[];
    lk: string[];
    /** user_creation triggers. */
    uc: { k: string; pts: number }[];
    /** Metric triggers on this metric; hw is the trigger's high-water field. */
    mt: { k: string; th: number; pts: number; hw: string }[];
  }[];
  ach: { k: string; v: number; f: string }[];
  /** Present when this metric counts towards the streak. */
  streak: false | { f: string; any: boolean; m: { f: string; th: number }[] };
}

export const highWaterField = (systemKey: string, triggerKey: string): string => `hw:${systemKey}.${triggerKey}`;
export const streakValueField = (metricKey: string): string => `sv:${metricKey}`;

export function buildEventRules(tenant: CompiledTenant, metricKey: string): EventRules {
  const fields = new Set<string>([...PROFILE_FIELDS, `m:${metricKey}`, "sl", "ss", "sp"]);
  const systems: EventRules["systems"] = [];
  for (const sys of tenant.systems) {
    const uc = sys.triggers.filter((t) => t.type === "user_creation").map((t) => ({ k: t.key, pts: t.points }));
    const mt = sys.triggers.flatMap((t) =>
      t.type === "metric" && t.metric === metricKey
        ? [{ k: t.key, th: t.thresholdMicro, pts: t.points, hw: highWaterField(sys.key, t.key) }]
        : [],
    );
    if (uc.length === 0 && mt.length === 0) continue;
    fields.add(`p:${sys.key}`).add(`pn:${sys.key}`);
    mt.forEach((t) => fields.add(t.hw));
    systems.push({ key: sys.key, cap: sys.cap, lv: sys.levels.map((l) => l.points), lk: sys.levels.map((l) => l.key), uc, mt });
  }
  const ach = tenant.achievements
    .filter((a) => a.type === "metric" && a.metric === metricKey)
    .map((a) => ({ k: a.key, v: a.valueMicro, f: `a:${a.key}` }));
  ach.forEach((a) => fields.add(a.f));

  let streak: EventRules["streak"] = false;
  const rule = tenant.streak;
  if (rule && rule.metrics.some((m) => m.metric === metricKey)) {
    const m = rule.metrics.map((x) => ({ f: streakValueField(x.metric), th: x.thresholdMicro }));
    fields.add("sq").add("sb");
    m.forEach((x) => fields.add(x.f));
    streak = { f: streakValueField(metricKey), any: rule.mode === "any", m };
  }
  return { mf: `m:${metricKey}`, maxTotal: MAX_TOTAL_MICRO, historyKept: STREAK_HISTORY_KEPT, fields: [...fields], systems, ach, streak };
}
