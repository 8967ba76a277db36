import type {
  AttributePairs,
  CompiledLeaderboard,
  CompiledMetricTrigger,
  CompiledSystem,
  CompiledTenant,
  CompiledTrigger,
} from "../config/compiled.js";
import { MAX_TOTAL_MICRO } from "../domain/decimal.js";
import { STREAK_HISTORY_KEPT } from "../domain/streak.js";
import { MAX_EVENT_FILTERED_TRIGGERS } from "../domain/filters.js";
import { tenantHookParts } from "../jobs/webhooks/kinds.js";
import { userAttributeField } from "./fields.js";
import { TenantKeys } from "./keys.js";
import type { StateSlots } from "./state-slots.js";

/**
 * The rules a Lua script runs, as a table literal built into the script (`local R = {...}`):
 * STACK.md measured 7-11 µs to decode a rules blob per call, about 1 µs to build a literal.
 * Event scripts get the rules narrowed to what an event on their metric can reach; the other
 * scripts (identify, completion, time ticks, admin) get the whole tenant. The reference model
 * reads the CompiledTenant instead, so the property tests also prove the narrowing loses nothing.
 */
type LuaFilter = string[] | false;

interface LuaTrigger {
  /** 1-based index into R.sys. */
  s: number;
  k: string;
  pts: number;
  f: LuaFilter;
}

export interface LuaRules {
  /** State field of the metric total (event scripts). */
  mf: string | false;
  maxTotal: number;
  historyKept: number;
  /** How long an Idempotency-Key is remembered (ms; its own expiring key, KEYS[3]), false: forever (a field of the user's hash). */
  iw: number | false;
  sys: {
    key: string;
    cap: number;
    lv: number[];
    /** State field of the user's own boosts in this system. */
    bf: string;
    boosts: { m: number; s: number; e: number | false; r: string; f: LuaFilter }[];
  }[];
  uc: LuaTrigger[];
  /**
   * Metric triggers on this metric: threshold, high-water field, own counter field when filtered
   * (`otc`: when unfiltered, that field if registered, a config having given it filters before:
   * lua/event-2.lua step 6a), and for a trigger with event-attribute filters its bit in the event script's mask (Node
   * evaluates those filters: lua/event-2.lua ARGV[3]), false for one without.
   */
  mt: (LuaTrigger & { th: number; hw: string; tc: string | false; otc: string | false; eb: number | false })[];
  st: (LuaTrigger & { n: number })[];
  /** Achievement triggers by achievement key. */
  at: Record<string, LuaTrigger[]>;
  /** Time triggers: the due zset suffix and the interval. */
  tt: (LuaTrigger & { z: string; ms: number })[];
  ach: Record<string, { k: string; f: string; ua: LuaFilter; pre: string[] | false; up: string[] | false; v: number | false; n: number | false }>;
  /** Metric achievements of this metric, and streak achievements, in config order. */
  mach: string[];
  sach: string[];
  /** Declared user attribute keys, and every system of the tenant (groups by attribute value). */
  attrs: string[];
  /** The event script's profile reads: the declared attributes' fields, and the same after "tz". */
  pf: string[];
  pfz: string[];
  /** Every registered state name and its index in the state array; their count (state-slots.ts). */
  slot: Record<string, number>;
  ns: number;
  /**
   * Every points system a user may hold a total of (lua/includes/user.lua applyProfile moves the
   * user's total between the groups by attribute value): the tenant's, and those the tenant file
   * no longer has but the registry does (p:<key>), so that one added back finds its groups as
   * the users' attributes are now.
   */
  allSys: string[];
  /** Boards this script can move, in tenant order; Node passes each one's current run. */
  lb: {
    k: string;
    by: "metric" | "points" | "streak";
    sys: number | false;
    bd: string | false;
    style: string;
    max: number;
    /** "{tenant:s}:lb:<board>:" for every shard s: a rank count appends the run (and group). */
    keys: string[];
    /** "{tenant}:lbc:<board>:": the run's counters append the run (TenantKeys.boardCounters). */
    ck: string;
  }[];
  /**
   * What the tenant's webhook endpoints want selected into the hook stream (lua/includes/hooks.lua,
   * src/jobs/webhooks/kinds.ts tenantHookParts): false without endpoints.
   */
  wh: false | Record<string, true>;
  streak:
    | false
    | {
        freq: string;
        counts: boolean;
        f: string | false;
        any: boolean;
        m: { f: string; th: number }[];
        /**
         * The period's value fields of metrics the streak does not count now but may hold a value
         * (every registered sv:<metric> besides m's; a config took the metric out of the streak, or
         * out of the tenant): restarted with m's, so a metric put back counts only that period's
         * values (lua/includes/streak.lua extendStreak). False in scripts that extend no streak.
         */
        o: string[] | false;
        fz: false | { init: number; max: number; every: number; amt: number };
      };
}

export const highWaterField = (t: CompiledTrigger): string => `hw:${t.systemKey}.${t.key}`;
export const triggerCountField = (t: CompiledTrigger): string => `tc:${t.systemKey}.${t.key}`;
const STREAK_VALUE_PREFIX = "sv:";
export const streakValueField = (metricKey: string): string => `${STREAK_VALUE_PREFIX}${metricKey}`;
export const userBoostField = (systemKey: string): string => `bo:${systemKey}`;
export const timeTriggerZset = (t: CompiledTrigger): string => `tt:${t.systemKey}.${t.key}`;

function luaFilter(pairs: AttributePairs): LuaFilter {
  return pairs.length === 0 ? false : pairs.flatMap(([k, v]) => [userAttributeField(k), v]);
}

/** Whether a metric trigger counts its own filtered sum rather than the metric total. */
export function isFiltered(t: CompiledMetricTrigger): boolean {
  return t.userAttributes.length > 0 || t.eventAttributes.length > 0;
}

/**
 * Each event-filtered metric trigger's bit in the event script's mask (a double: 2^0 .. 2^51),
 * in R.mt order; unfiltered triggers have none (they always count the event). The config
 * compiler refuses more than MAX_EVENT_FILTERED_TRIGGERS (domain/filters.ts) on one metric.
 */
export function eventMaskBits(metricTriggers: readonly CompiledMetricTrigger[]): Map<CompiledMetricTrigger, number> {
  const bits = new Map<CompiledMetricTrigger, number>();
  for (const t of metricTriggers) if (t.eventAttributes.length > 0) bits.set(t, 2 ** bits.size);
  // The config compiler refuses more; past it the mask would lose bits silently.
  if (bits.size > MAX_EVENT_FILTERED_TRIGGERS) throw new Error(`${bits.size} event-filtered triggers on one metric; at most ${MAX_EVENT_FILTERED_TRIGGERS}`);
  return bits;
}

export interface BuiltRules {
  rules: LuaRules;
  /** The metric triggers of R.mt with event-attribute filters, and their bits: Node computes the mask. */
  maskBits: Map<CompiledMetricTrigger, number>;
  /** Profile fields every call reads: the zone and the declared attributes (filters). */
  profileFields: string[];
  /** The boards of R.lb, in order: Node computes their current runs. */
  boards: CompiledLeaderboard[];
}

/** The tenant's points systems, then those registered by an earlier config (a total's state name p:<key>). */
function systemsEverRegistered(tenant: CompiledTenant, slots: StateSlots): string[] {
  const keys = tenant.systems.map((s) => s.key);
  const known = new Set(keys);
  for (const name of slots.byName.keys()) {
    if (name.startsWith("p:") && !known.has(name.slice(2))) keys.push(name.slice(2));
  }
  return keys;
}

/** Rules for an event on `metricKey`, or for the whole tenant when metricKey is null. */
export function buildRules(tenant: CompiledTenant, metricKey: string | null, slots: StateSlots): BuiltRules {
  const streakRule = tenant.streak;
  const countsForStreak = streakRule !== null && (metricKey === null || streakRule.metrics.some((m) => m.metric === metricKey));

  // Achievements reachable from this metric, then composites above them and their prerequisites.
  const all = tenant.achievements;
  const direct = all.filter((a) =>
    metricKey === null ? true : (a.type === "metric" && a.metric === metricKey) || (a.type === "streak" && countsForStreak),
  );
  const reachable = new Set(direct.map((a) => a.key));
  const composites = all.filter((a) => a.type === "composite");
  for (let grew = true; grew; ) {
    grew = false;
    for (const c of composites) {
      if (!reachable.has(c.key) && c.type === "composite" && c.prerequisites.some((p) => reachable.has(p))) {
        reachable.add(c.key);
        grew = true;
      }
    }
  }
  for (const c of composites) {
    if (reachable.has(c.key) && c.type === "composite") c.prerequisites.forEach((p) => reachable.add(p));
  }
  const achievements = all.filter((a) => reachable.has(a.key));

  const triggers: CompiledTrigger[] = [];
  for (const sys of tenant.systems) {
    for (const t of sys.triggers) {
      const wanted =
        t.type === "user_creation" ||
        t.type === "time" ||
        (t.type === "metric" && (metricKey === null || t.metric === metricKey)) ||
        (t.type === "streak" && countsForStreak) ||
        (t.type === "achievement" && reachable.has(t.achievement));
      if (wanted) triggers.push(t);
    }
  }
  const systems: CompiledSystem[] = tenant.systems.filter((s) => triggers.some((t) => t.systemKey === s.key));
  const sysIndex = new Map(systems.map((s, i) => [s.key, i + 1]));
  const lua = (t: CompiledTrigger): LuaTrigger => ({ s: sysIndex.get(t.systemKey)!, k: t.key, pts: t.points, f: luaFilter(t.userAttributes) });

  const metricTriggers = triggers.filter((t): t is CompiledMetricTrigger => t.type === "metric" && metricKey !== null);
  const maskBits = eventMaskBits(metricTriggers);
  const attributeFields = [...tenant.userAttributes].map(userAttributeField);
  const rules: LuaRules = {
    mf: metricKey === null ? false : `m:${metricKey}`,
    maxTotal: MAX_TOTAL_MICRO,
    historyKept: STREAK_HISTORY_KEPT,
    iw: tenant.idempotencyWindowMs ?? false,
    sys: systems.map((s) => ({
      key: s.key,
      cap: s.cap,
      lv: s.levels.map((l) => l.points),
      bf: userBoostField(s.key),
      boosts: s.boosts.map((b) => ({ m: b.multiplier, s: b.start, e: b.end ?? false, r: b.rounding, f: luaFilter(b.userAttributes) })),
    })),
    uc: triggers.filter((t) => t.type === "user_creation").map(lua),
    mt: metricTriggers.map((t) => ({
      ...lua(t),
      th: t.thresholdMicro,
      hw: highWaterField(t),
      tc: isFiltered(t) ? triggerCountField(t) : false,
      otc: !isFiltered(t) && slots.byName.has(triggerCountField(t)) ? triggerCountField(t) : false,
      eb: maskBits.get(t) ?? false,
    })),
    st: triggers.flatMap((t) => (t.type === "streak" ? [{ ...lua(t), n: t.length }] : [])),
    at: {},
    tt: triggers.flatMap((t) => (t.type === "time" ? [{ ...lua(t), z: timeTriggerZset(t), ms: t.intervalMs }] : [])),
    ach: {},
    mach: achievements.filter((a) => a.type === "metric" && a.metric === metricKey).map((a) => a.key),
    sach: countsForStreak ? achievements.filter((a) => a.type === "streak").map((a) => a.key) : [],
    lb: [],
    attrs: [...tenant.userAttributes],
    pf: attributeFields,
    pfz: ["tz", ...attributeFields],
    slot: slots.toRecord(),
    ns: slots.size,
    allSys: systemsEverRegistered(tenant, slots),
    wh: tenantHookParts(tenant),
    streak: false,
  };
  // Boards this script can move: metric boards of this metric, points boards of a system it pays,
  // streak boards (any call may extend, lose or restore the streak).
  const boards = tenant.leaderboards.filter((b) =>
    b.rankBy === "metric" ? metricKey !== null && b.metric === metricKey : b.rankBy === "points" ? sysIndex.has(b.points!) : streakRule !== null,
  );
  const tenantKeys = new TenantKeys(tenant.id);
  rules.lb = boards.map((b) => ({
    k: b.key,
    by: b.rankBy,
    sys: b.rankBy === "points" ? sysIndex.get(b.points!)! : false,
    bd: b.breakdownAttribute === null ? false : userAttributeField(b.breakdownAttribute),
    style: b.ranking,
    max: b.maxParticipants,
    keys: Array.from({ length: tenant.shards }, (_, shard) => tenantKeys.boardRunHead(shard, b.key)),
    ck: tenantKeys.boardCounters(b.key, ""),
  }));
  for (const t of triggers) if (t.type === "achievement") (rules.at[t.achievement] ??= []).push(lua(t));
  for (const a of achievements) {
    const up = composites.filter((c) => c.type === "composite" && c.prerequisites.includes(a.key) && reachable.has(c.key)).map((c) => c.key);
    rules.ach[a.key] = {
      k: a.key,
      f: `a:${a.key}`,
      ua: luaFilter(a.userAttributes),
      pre: a.type === "composite" ? a.prerequisites : false,
      up: up.length > 0 ? up : false,
      v: a.type === "metric" ? a.valueMicro : false,
      n: a.type === "streak" ? a.length : false,
    };
  }
  if (streakRule) {
    const m = streakRule.metrics.map((x) => ({ f: streakValueField(x.metric), th: x.thresholdMicro }));
    const counted = new Set(m.map((x) => x.f));
    const others = countsForStreak && metricKey !== null ? [...slots.byName.keys()].filter((name) => name.startsWith(STREAK_VALUE_PREFIX) && !counted.has(name)) : [];
    const fz = streakRule.freezes;
    rules.streak = {
      freq: streakRule.frequency,
      counts: countsForStreak && metricKey !== null,
      f: metricKey !== null && countsForStreak ? streakValueField(metricKey) : false,
      any: streakRule.mode === "any",
      m,
      o: others.length > 0 ? others : false,
      fz: fz ? { init: fz.initial, max: fz.max, every: fz.everyDays, amt: fz.amount } : false,
    };
  }
  return { rules, maskBits, profileFields: rules.pfz, boards };
}
