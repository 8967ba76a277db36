import type { Frequency } from "../domain/periods.js";

/**
 * The tenant as the engine uses it: keys resolved, ids derived, decimals turned into
 * micro-units, levels sorted. Built once at start (compile.ts); both the Lua rules and the
 * TypeScript reference model read from this one structure.
 */
export interface CompiledTenant {
  id: string;
  name: string;
  /** UUIDv5 namespace of the tenant; every id of the tenant derives from it. */
  ns: string;
  shards: number;
  apiKeyHashes: Buffer[];
  adminKeyHashes: Buffer[];
  metrics: CompiledMetric[];
  metricByKey: Map<string, CompiledMetric>;
  systems: CompiledSystem[];
  systemByKey: Map<string, CompiledSystem>;
  achievements: CompiledAchievement[];
  achievementByKey: Map<string, CompiledAchievement>;
  streak: CompiledStreak | null;
}

export interface CompiledMetric {
  key: string;
  id: string;
  name: string;
  description: string | null;
  units: string | null;
}

export interface CompiledSystem {
  key: string;
  id: string;
  name: string;
  description: string | null;
  badgeUrl: string | null;
  maxPoints: number | null;
  /** maxPoints, or Laurel's hard ceiling MAX_POINTS when the system has none. */
  cap: number;
  triggers: CompiledTrigger[];
  /** Ascending by points. */
  levels: CompiledLevel[];
}

interface CompiledTriggerBase {
  key: string;
  id: string;
  systemKey: string;
  points: number;
}

export interface CompiledMetricTrigger extends CompiledTriggerBase {
  type: "metric";
  metric: string;
  /** The threshold as configured, in units (for the wire). */
  threshold: number;
  thresholdMicro: number;
}

export interface CompiledUserCreationTrigger extends CompiledTriggerBase {
  type: "user_creation";
}

export type CompiledTrigger = CompiledMetricTrigger | CompiledUserCreationTrigger;

export interface CompiledLevel {
  key: string;
  id: string;
  name: string;
  description: string | null;
  badgeUrl: string | null;
  points: number;
}

export interface CompiledAchievement {
  key: string;
  id: string;
  name: string;
  description: string | null;
  badgeUrl: string | null;
  type: "metric";
  metric: string;
  value: number;
  valueMicro: number;
}

export interface CompiledStreak {
  frequency: Frequency;
  metrics: { metric: string; thresholdMicro: number }[];
  mode: "all" | "any";
}
