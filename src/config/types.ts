import type { tags } from "typia";

/**
 * The tenant file (YAML or JSON), as written by operators. Validated with typia at start; a
 * bad file stops the start with the path of the bad field (see load.ts). Field docs here are
 * the configuration reference the README repeats.
 */

/** Keys of metrics, systems, triggers, levels and achievements: they appear in URLs and in Redis keys. */
export type Key = string & tags.Pattern<"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$">;
export type TenantId = string & tags.Pattern<"^[a-z0-9][a-z0-9_-]{0,31}$">;
export type Name = string & tags.MinLength<1> & tags.MaxLength<200>;
export type Description = string & tags.MaxLength<2000>;
export type Url = string & tags.MaxLength<2000>;
/** Points per award: a non-zero integer; negative deducts (spec rule 2). */
export type PointsAmount = number & tags.Type<"int32"> & tags.Minimum<-1000000000> & tags.Maximum<1000000000>;

/** An API key: the plain key (fine for development), or its SHA-256 hex digest for production files. */
export type ApiKeyConfig = (string & tags.MinLength<8> & tags.MaxLength<256>) | { sha256: string & tags.Pattern<"^[0-9a-f]{64}$"> };

export interface ConfigFile {
  tenants: TenantConfig[] & tags.MinItems<1>;
}

export interface TenantConfig {
  /** Lowercase id; part of every Redis key of the tenant. */
  id: TenantId;
  name?: Name;
  /** Keys for the application API (X-API-KEY). */
  apiKeys: ApiKeyConfig[] & tags.MinItems<1>;
  /** Keys for /admin/v1 (boosts, streak freezes and restores, the manual clock). */
  adminKeys: ApiKeyConfig[] & tags.MinItems<1>;
  /** Number of user shards; fixed for the life of the tenant's data (default 16). */
  shards?: number & tags.Type<"uint32"> & tags.Minimum<1> & tags.Maximum<1024>;
  /**
   * How long an event's Idempotency-Key is remembered, in hours (up to 10 years). Absent: forever
   * (the spec's default), in the user's hash; with a window each key is its own Redis key that
   * expires, so the memory of keys no longer grows with every keyed event.
   */
  idempotencyWindowHours?: number & tags.Type<"uint32"> & tags.Minimum<1> & tags.Maximum<87600>;
  /** Custom attribute keys; any other key sent by a client is refused with 422. */
  attributes?: {
    user?: Key[];
    event?: Key[];
  };
  /** A/B experiments: this share of users (by a hash of their id) is in the control group (User.control). */
  experiment?: { controlPercent: number & tags.Minimum<0> & tags.Maximum<100> };
  metrics: MetricConfig[] & tags.MinItems<1>;
  points?: PointsSystemConfig[];
  achievements?: AchievementConfig[];
  streak?: StreakConfig;
  leaderboards?: LeaderboardConfig[];
  // issue 6 (outbound events): begin
  /** Outbound events: endpoints that receive signed POSTs of the subscribed event types (README: Webhooks). */
  webhooks?: WebhookConfig[];
  // issue 6: end
}

/** Attribute filters: every pair must equal the user's (or event's) attribute. */
export type AttributeFilter = Record<string, string & tags.MaxLength<1000>>;

export interface MetricConfig {
  key: Key;
  name: Name;
  description?: Description;
  /** Unit label, e.g. "km" (shown in wrapped). */
  units?: string & tags.MaxLength<50>;
}

export interface PointsSystemConfig {
  key: Key;
  name: Name;
  description?: Description;
  badgeUrl?: Url;
  /** Per-user cap on the total (spec rule 5); omit for no maximum. */
  maxPoints?: number & tags.Type<"int64"> & tags.Minimum<1> & tags.Maximum<1000000000000000>;
  triggers: TriggerConfig[];
  /** A user has a level when their total strictly exceeds its points (spec: Level). */
  levels?: LevelConfig[];
  /** Global boosts: for every user, or a cohort matched by user attributes. */
  boosts?: BoostConfig[];
}

export type Rounding = "down" | "up" | "nearest";

/** An ISO 8601 instant with a zone (2026-11-28T00:00:00Z), or a date (midnight UTC). */
export type Instant = string & tags.Pattern<"^\\d{4}-\\d{2}-\\d{2}(T\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,9})?)?(Z|[+-]\\d{2}:?\\d{2}))?$">;

export type Multiplier = number & tags.ExclusiveMinimum<0> & tags.Maximum<1000>;

export interface BoostConfig {
  key: Key;
  name: Name;
  /** Positive; decimals allowed (spec: Points boost). */
  multiplier: Multiplier;
  start: Instant;
  /** Exclusive; omit for a boost that never ends. */
  end?: Instant;
  /** How a decimal result is rounded (spec rule 7); default down. */
  rounding?: Rounding;
  userAttributes?: AttributeFilter;
}

export type TriggerConfig =
  | MetricTriggerConfig
  | UserCreationTriggerConfig
  | StreakTriggerConfig
  | AchievementTriggerConfig
  | TimeTriggerConfig;

interface TriggerBase {
  /** Stable key: the trigger's id derives from it, so keep it when editing the trigger. */
  key: Key;
  points: PointsAmount;
  /** Only users whose attributes match every pair (any trigger kind, trophy-compat §5.5). */
  userAttributes?: AttributeFilter;
}

/** `points` for every `threshold` units of `metric` (spec rule 1). */
export interface MetricTriggerConfig extends TriggerBase {
  type: "metric";
  metric: Key;
  threshold: number & tags.ExclusiveMinimum<0> & tags.Maximum<1000000000>;
  /** Only events whose attributes match every pair. */
  eventAttributes?: AttributeFilter;
}

/** `points` once, when the user is first identified (by an event, identify, create or completion). */
export interface UserCreationTriggerConfig extends TriggerBase {
  type: "user_creation";
}

/** `points` each time the streak reaches a multiple of `length` periods. */
export interface StreakTriggerConfig extends TriggerBase {
  type: "streak";
  length: number & tags.Type<"uint32"> & tags.Minimum<1> & tags.Maximum<100000>;
}

/** `points` when `achievement` completes (in the same request that completes it). */
export interface AchievementTriggerConfig extends TriggerBase {
  type: "achievement";
  achievement: Key;
}

/** `points` every `interval` hours or days per user, counted from the user's first identification. */
export interface TimeTriggerConfig extends TriggerBase {
  type: "time";
  unit: "hour" | "day";
  interval: number & tags.Type<"uint32"> & tags.Minimum<1> & tags.Maximum<100000>;
}

export interface LevelConfig {
  key: Key;
  name: Name;
  description?: Description;
  badgeUrl?: Url;
  points: number & tags.Type<"int64"> & tags.Minimum<0> & tags.Maximum<1000000000000000>;
}

export type AchievementConfig = MetricAchievementConfig | StreakAchievementConfig | ApiAchievementConfig | CompositeAchievementConfig;

interface AchievementBase {
  key: Key;
  name: Name;
  description?: Description;
  badgeUrl?: Url;
  /** Only users whose attributes match every pair can complete it (and see it in filtered lists). */
  userAttributes?: AttributeFilter;
}

/** Completed when the streak reaches `length` periods. */
export interface StreakAchievementConfig extends AchievementBase {
  type: "streak";
  length: number & tags.Type<"uint32"> & tags.Minimum<1> & tags.Maximum<100000>;
}

/** Completed by POST /v1/achievements/{key}/complete. */
export interface ApiAchievementConfig extends AchievementBase {
  type: "api";
}

/** Completed when every listed achievement is completed. */
export interface CompositeAchievementConfig extends AchievementBase {
  type: "composite";
  achievements: Key[] & tags.MinItems<1>;
}

/** Completed once, when the user's total of `metric` reaches `value`. */
export interface MetricAchievementConfig extends AchievementBase {
  type: "metric";
  metric: Key;
  value: number & tags.Minimum<-1000000000> & tags.Maximum<1000000000>;
}

export interface StreakConfig {
  frequency: "daily" | "weekly" | "monthly";
  /** The streak is extended in a period when the user's value of these metrics in the period reaches the threshold. */
  metrics: StreakMetricConfig[] & tags.MinItems<1>;
  /** With several metrics: all must reach their threshold (default), or any one. */
  mode?: "all" | "any";
  /** Freezes: a missed period consumes one instead of breaking the streak. */
  freezes?: StreakFreezeConfig;
}

export interface StreakFreezeConfig {
  /** Granted at first identification (default 0). */
  initial?: number & tags.Type<"uint32"> & tags.Maximum<100>;
  /** The most a user can hold (1-100). */
  max: number & tags.Type<"uint32"> & tags.Minimum<1> & tags.Maximum<100>;
  /** `amount` freezes every `everyDays` days after first identification. */
  autoEarn?: {
    everyDays: number & tags.Type<"uint32"> & tags.Minimum<1> & tags.Maximum<3650>;
    amount: number & tags.Type<"uint32"> & tags.Minimum<1> & tags.Maximum<100>;
  };
}

export interface StreakMetricConfig {
  metric: Key;
  threshold: number & tags.ExclusiveMinimum<0> & tags.Maximum<1000000000>;
}

/**
 * A leaderboard (trophy-compat §3.7, §5.6). Runs are UTC windows: a repeating board's run k covers
 * [start + k × runInterval runUnit, start + (k + 1) × runInterval runUnit) in UTC; weekly is
 * `runUnit: day, runInterval: 7`. A perpetual board (no runUnit) has one run from `start`.
 */
export interface LeaderboardConfig {
  key: Key;
  name: Name;
  description?: Description;
  rankBy: "metric" | "points" | "streak";
  /** With rankBy metric: the metric whose total within the run ranks users. */
  metric?: Key;
  /** With rankBy points: the system whose points earned within the run rank users. */
  points?: Key;
  /** A date (YYYY-MM-DD, midnight UTC). */
  start: string & tags.Pattern<"^\\d{4}-\\d{2}-\\d{2}$">;
  /** Exclusive end date; the board is finished from then on. */
  end?: string & tags.Pattern<"^\\d{4}-\\d{2}-\\d{2}$">;
  runUnit?: "day" | "month" | "year";
  runInterval?: number & tags.Type<"uint32"> & tags.Minimum<1> & tags.Maximum<3650>;
  /** Users on the board: the top maxParticipants (default 1000; millions are fine). */
  maxParticipants?: number & tags.Type<"uint32"> & tags.Minimum<1> & tags.Maximum<100000000>;
  /**
   * Boards with runs: how many finished runs stay stored and readable, the newest ones (default:
   * all). Older runs are deleted by a background job (src/jobs/run-retention.ts); a read that
   * names one answers 404.
   */
  keepFinishedRuns?: number & tags.Type<"uint32"> & tags.Minimum<1> & tags.Maximum<100000>;
  /** Split the board by this user attribute (declared in attributes.user). */
  breakdownAttribute?: Key;
  /**
   * Rank numbers for ties (the order is always: higher value first, then first to reach it):
   * competition 1,2,2,4 (default), dense 1,2,2,3, ordinal 1,2,3,4.
   */
  ranking?: "competition" | "dense" | "ordinal";
}

// issue 6 (outbound events): begin
/** Outbound event types (trophy-compat §3.12, §5.8). */
export type WebhookEventType =
  | "achievement.completed"
  | "streak.started"
  | "streak.extended"
  | "streak.lost"
  | "streak.freeze_consumed"
  | "streak.freeze_earned"
  | "points.changed"
  | "points.level_changed"
  | "points.boost_started"
  | "points.boost_finished"
  | "leaderboard.started"
  | "leaderboard.finished"
  | "leaderboard.rank_changed";

/**
 * A signing secret: any string of 16 to 256 characters. A secret of the form `whsec_<base64>`
 * is base64-decoded for the Standard Webhooks signature (as the Standard Webhooks libraries
 * do); X-Trophy-Signature always uses the string as written (README: Webhooks, Signatures).
 */
export type WebhookSecret = string & tags.MinLength<16> & tags.MaxLength<256>;

/** One endpoint: signed HTTP POSTs of the subscribed event types, retried with backoff. */
export interface WebhookConfig {
  /** Stable key: delivery ids and the admin API name the endpoint by it. */
  key: Key;
  /** http(s) URL the events are POSTed to. */
  url: Url & tags.Pattern<"^https?://[^\\s]+$">;
  /** The signing secret; or `secrets` to rotate. Exactly one of the two. */
  secret?: WebhookSecret;
  /**
   * Several active secrets during a rotation: the Standard Webhooks header carries one signature
   * per secret; X-Trophy-Signature is signed with the first. Put the new secret first.
   */
  secrets?: WebhookSecret[] & tags.MinItems<1> & tags.MaxItems<5>;
  /** The event types this endpoint receives. */
  events: WebhookEventType[] & tags.MinItems<1>;
  /**
   * Optional coalescing, per type, in minutes (off by default): at most one delivery per user
   * (and per points system or leaderboard) in each window of that many minutes of the service
   * clock, sent when the window closes with the state of the last change in it.
   */
  coalesce?: Partial<Record<WebhookEventType, number & tags.Type<"uint32"> & tags.Minimum<1> & tags.Maximum<1440>>>;
  /** Seconds to wait for the receiver's answer before the attempt counts as failed (default 10). */
  timeoutSeconds?: number & tags.Minimum<1> & tags.Maximum<60>;
}
// issue 6: end
