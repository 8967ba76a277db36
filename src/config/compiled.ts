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
  /** How long an Idempotency-Key is remembered (ms); null: forever. */
  idempotencyWindowMs: number | null;
  apiKeyHashes: Buffer[];
  adminKeyHashes: Buffer[];
  metrics: CompiledMetric[];
  metricByKey: Map<string, CompiledMetric>;
  systems: CompiledSystem[];
  systemByKey: Map<string, CompiledSystem>;
  achievements: CompiledAchievement[];
  achievementByKey: Map<string, CompiledAchievement>;
  streak: CompiledStreak | null;
  /** Declared custom attribute keys. */
  userAttributes: ReadonlySet<string>;
  eventAttributes: ReadonlySet<string>;
  /** Percent of users in the experiment's control group (0 = none). */
  controlPercent: number;
  leaderboards: CompiledLeaderboard[];
  leaderboardByKey: Map<string, CompiledLeaderboard>;
  // issue 6 (outbound events): begin
  webhooks: CompiledWebhook[];
  // issue 6: end
}

// issue 6 (outbound events): begin
export interface CompiledWebhook {
  key: string;
  /** The tenant file's URL without its userinfo (what is POSTed to and what the admin API shows). */
  url: string;
  /** `Basic base64(user:password)` from the URL's userinfo, percent-decoded; null without one. */
  authorization: string | null;
  /** Active secrets, the first one signs X-Trophy-Signature. */
  secrets: string[];
  events: ReadonlySet<string>;
  /** Coalescing window per event type, ms (absent: every change is delivered). */
  coalesceMs: ReadonlyMap<string, number>;
  timeoutMs: number;
}
// issue 6: end

export interface CompiledLeaderboard {
  key: string;
  id: string;
  name: string;
  description: string | null;
  rankBy: "metric" | "points" | "streak";
  metric: string | null;
  points: string | null;
  /** Day indexes (UTC); end exclusive. */
  startDay: number;
  endDay: number | null;
  runUnit: "day" | "month" | "year" | null;
  runInterval: number | null;
  maxParticipants: number;
  /** Finished runs kept, the newest; null: all. */
  keepFinishedRuns: number | null;
  breakdownAttribute: string | null;
  ranking: "competition" | "dense" | "ordinal";
}

/** Attribute filter pairs, in config order: every pair must match. */
export type AttributePairs = [string, string][];

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
  boosts: CompiledBoost[];
}

export type Rounding = "down" | "up" | "nearest";

export interface CompiledBoost {
  key: string;
  id: string;
  systemKey: string;
  name: string;
  multiplier: number;
  /** ms; end exclusive, null = never ends. */
  start: number;
  end: number | null;
  rounding: Rounding;
  userAttributes: AttributePairs;
}

interface CompiledTriggerBase {
  key: string;
  id: string;
  systemKey: string;
  points: number;
  userAttributes: AttributePairs;
}

export interface CompiledMetricTrigger extends CompiledTriggerBase {
  type: "metric";
  metric: string;
  /** The threshold as configured, in units (for the wire). */
  threshold: number;
  thresholdMicro: number;
  eventAttributes: AttributePairs;
}

export interface CompiledUserCreationTrigger extends CompiledTriggerBase {
  type: "user_creation";
}

export interface CompiledStreakTrigger extends CompiledTriggerBase {
  type: "streak";
  length: number;
}

export interface CompiledAchievementTrigger extends CompiledTriggerBase {
  type: "achievement";
  achievement: string;
}

export interface CompiledTimeTrigger extends CompiledTriggerBase {
  type: "time";
  unit: "hour" | "day";
  interval: number;
  intervalMs: number;
}

export type CompiledTrigger =
  | CompiledMetricTrigger
  | CompiledUserCreationTrigger
  | CompiledStreakTrigger
  | CompiledAchievementTrigger
  | CompiledTimeTrigger;

export interface CompiledLevel {
  key: string;
  id: string;
  name: string;
  description: string | null;
  badgeUrl: string | null;
  points: number;
}

interface CompiledAchievementBase {
  key: string;
  id: string;
  name: string;
  description: string | null;
  badgeUrl: string | null;
  userAttributes: AttributePairs;
}

export interface CompiledMetricAchievement extends CompiledAchievementBase {
  type: "metric";
  metric: string;
  value: number;
  valueMicro: number;
}

export interface CompiledStreakAchievement extends CompiledAchievementBase {
  type: "streak";
  length: number;
}

export interface CompiledApiAchievement extends CompiledAchievementBase {
  type: "api";
}

export interface CompiledCompositeAchievement extends CompiledAchievementBase {
  type: "composite";
  prerequisites: string[];
}

export type CompiledAchievement = CompiledMetricAchievement | CompiledStreakAchievement | CompiledApiAchievement | CompiledCompositeAchievement;

export interface CompiledStreak {
  frequency: Frequency;
  metrics: { metric: string; thresholdMicro: number }[];
  mode: "all" | "any";
  freezes: CompiledFreezes | null;
}

export interface CompiledFreezes {
  initial: number;
  max: number;
  /** 0 when freezes are not auto-earned. */
  everyDays: number;
  amount: number;
}
