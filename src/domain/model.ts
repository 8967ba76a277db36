import type { CompiledAchievement, CompiledLeaderboard, CompiledSystem, CompiledTenant, CompiledTrigger } from "../config/compiled.js";
import { boostAtInstant, boostedPoints, endedBoostEnd, intervalPoints, type ActiveBoost, type BoostWindow, type UserBoost } from "./boosts.js";
import { floorDiv, MAX_TOTAL_MICRO } from "./decimal.js";
import { LaurelError } from "./errors.js";
import { eventFiltersMatch, userFiltersMatch } from "./filters.js";
import { histogramTop, rangesOfTop } from "./histogram.js";
import { levelIndex } from "./levels.js";
import type { AwardRecord, BoardChange, EventInput, EventOutcome, PointsChange, StreakState } from "./outcome.js";
import { activeRun, boardMember, compareCodePoints, compareEntries, shownThreshold, thresholdOfEntries, type BoardEntry } from "./leaderboards.js";
import { dateToDay, dayToDate, formatDay, localDayIndex, periodEndDay, periodOfDay, periodStartDay, periodStartInstant, streakDeadline, type Frequency } from "./periods.js";
import { shardOf } from "./shards.js";
import { coveredPeriod, settleStreak, streakFirstDay, STREAK_HISTORY_KEPT, type StreakSettlement } from "./streak.js";
import { longestStreakIn } from "./wrapped.js";

/**
 * The reference model: every rule Laurel applies, in plain TypeScript over in-memory state. It is
 * the test oracle (DESIGN: "Tests you can trust"): property tests drive the same random
 * sequences through the HTTP API and through this model and require identical results. It reads
 * the whole CompiledTenant where Lua reads rules narrowed per metric, so the narrowing is checked
 * too. Keep it obvious rather than fast; each rule names the Lua it mirrors.
 */
export interface ModelStreak {
  /** 0 once lost. */
  length: number;
  startPeriod: number | null;
  /** The local day of the extension that began the streak (lua ssd; kept for every frequency here, read only while its period is startPeriod). */
  startDay: number | null;
  /** Last period extended or covered by a freeze. */
  lastPeriod: number | null;
  /**
   * The instant of the user's work (the first meeting of the threshold in a period, and each time
   * the period's values reach a new number of full thresholds) and its period on the user's
   * calendar (lua sm, smp): coveredPeriod.
   */
  metAt: number | null;
  metPeriod: number | null;
  best: number;
  /** Period whose values are being accumulated, and the per-metric values in it (micro). */
  accPeriod: number | null;
  /** The instant of the accumulated period's first value (lua sqa): moveCalendar keeps the values when it is in the new calendar's period. */
  accStart: number | null;
  /** The most full thresholds the period's values have reached (lua sqk): each new one is work (metAt). */
  accTimes: number | null;
  acc: Map<string, number>;
  freezes: number | null;
  grants: number;
  /** The local day of the last auto-earned freeze (lua fgd), kept from the first settlement on. */
  grantDay?: number | null;
  /** The instant of the last extension, or of a restore that brought the streak back (lua sxt): the streak reads' `extended`. */
  extendedAt: number | null;
}

export interface ModelUser {
  created: number;
  updated: number;
  createdDay: number;
  /** Profile fields by state-hash name: tz, em, nm, se, dt. */
  profile: Map<string, string>;
  /** Custom attributes by key. */
  attributes: Map<string, string>;
  metrics: Map<string, number>;
  points: Map<string, { total: number; seq: number }>;
  /** Per metric trigger ("sys.trig"): high-water mark, and the filtered trigger's own count. */
  highWater: Map<string, number>;
  triggerCounts: Map<string, number>;
  achievements: Map<string, number>;
  streak: ModelStreak;
  /** "<metric>:<key>" → the event it recorded, and until when it is remembered (null: forever). */
  idempotency: Map<string, { eventId: string; until: number | null }>;
  boosts: Map<string, UserBoost[]>;
  /**
   * Per "<board>:<run>": the user's entry in that run, with the rank given at their last change in
   * it. The service keeps the latest run's in the user's state (lb:<board>) and finds an earlier
   * run's, moved after the manual clock was set back, in the run's sets (lua pastEntry).
   */
  boards: Map<string, { value: number; reachedAt: number; breakdown: string; rank: number | null }>;
  /** Newest first, at most AWARDS_KEPT. */
  awards: Map<string, AwardRecord[]>;
  /**
   * Per series ("m:<metric>", "p:<system>"): the daily buckets the stream worker keeps from the
   * records (lua/applyStream-2.lua), oldest first: each day's number of changes, net change and
   * total after the last (recordSeries).
   */
  buckets: Map<string, ModelBucket[]>;
  /**
   * The user's stream records (src/domain/stream-record.ts) with a creation, achievement or points
   * part, oldest first: their kind and those parts (logRecord), what the webhooks are made from.
   */
  records: { kind: "ev" | "us" | "ac" | "tt"; parts: string[] }[];
}

/** One local day of a series (src/domain/buckets.ts DayBucket). */
export interface ModelBucket {
  day: number;
  count: number;
  change: number;
  total: number;
}

export interface ModelState {
  users: Map<string, ModelUser>;
  userCount: number;
  completions: Map<string, number>;
  /** Users with a live streak: current length, the instant it is lost, longest ever ({t:s}:sa, sd, sb). */
  streakActive: Map<string, number>;
  streakDeadline: Map<string, number>;
  streakBest: Map<string, number>;
  /** Per user: period → history member ({t:s}:sh:<user>), "period:length" or "period:length:f". */
  streakHistory: Map<string, Map<number, string>>;
  /** Per time trigger ("sys.trig"): user → next due instant ({t:s}:tt:<sys>.<trig>). */
  timeDue: Map<string, Map<string, number>>;
  /** Per "<board>:<run>:<breakdown>": user → value and the instant it was reached ({t:s}:lb:...). */
  boards: Map<string, Map<string, { value: number; reachedAt: number }>>;
  /** The thresholds the service ranks with, per "<board>:<run>", with the falls counted when each was read (refreshThresholds). */
  thresholds: Map<string, { value: number; at: number; falls: number }>;
  /** Each run's falls counter, per "<board>:<run>" (lua countFall). */
  boardFalls: Map<string, number>;
  /** Per "<board>:<run>:<user>": rank history, newest first ({t:s}:lh:...). */
  boardHistory: Map<string, { t: number; pr: number | null; r: number | null; pv: number | null; v: number | null }[]>;
  /**
   * When set (a test that wants it), every change of a user's state is appended, in order, with
   * what it did: the outcome a stream record carries (src/domain/stream-record.ts), which the
   * outbound events are made from (test/helpers/webhook-expect.ts). Not kept otherwise.
   */
  journal?: ModelChange[];
}

/** One change of a user's state as the model made it (ModelState.journal). */
export interface ModelChange {
  userId: string;
  /** The service time of the change, and the zone, local day and period it was made in (the record's). */
  ms: number;
  tz: string;
  day: number;
  period: number;
  created: boolean;
  completed: string[];
  points: PointsChange[];
  /** The length the streak was extended to (null: not extended). */
  extended: number | null;
  /** Settlement: the length lost (0: none), freezes consumed and auto-earned; freezes granted by an admin. */
  lost: number;
  consumed: number;
  earned: number;
  granted: number;
  boards: BoardChange[];
}

function journal(state: ModelState, change: ModelChange): void {
  const touched = change.created || change.completed.length > 0 || change.points.length > 0 || change.extended !== null || change.lost > 0 || change.consumed > 0 || change.earned > 0 || change.granted > 0 || change.boards.length > 0;
  if (state.journal && touched) state.journal.push(change);
}

/** The zone, local day and period of `now` for a user (their stored zone). */
function placeOf(tenant: CompiledTenant, user: ModelUser, now: number): { tz: string; day: number; period: number } {
  const tz = user.profile.get("tz") ?? "UTC";
  const day = localDayIndex(now, tz);
  return { tz, day, period: periodOfDay(day, tenant.streak?.frequency ?? "daily") };
}

export const AWARDS_KEPT = 100;

export function emptyState(): ModelState {
  return {
    users: new Map(),
    userCount: 0,
    completions: new Map(),
    streakActive: new Map(),
    streakDeadline: new Map(),
    streakBest: new Map(),
    streakHistory: new Map(),
    timeDue: new Map(),
    boards: new Map(),
    thresholds: new Map(),
    boardFalls: new Map(),
    boardHistory: new Map(),
  };
}

export interface ModelEventResult {
  outcome: EventOutcome;
  tz: string;
  nowDay: number;
  nowPeriod: number;
}

function bump(map: Map<string, number>, key: string, by: number): void {
  map.set(key, (map.get(key) ?? 0) + by);
}

const triggerId = (t: CompiledTrigger): string => `${t.systemKey}.${t.key}`;

export function streakState(user: ModelUser | undefined): StreakState {
  if (!user) return { length: 0, startPeriod: null, lastPeriod: null, freezes: null };
  const s = user.streak;
  return { length: s.length, startPeriod: s.startPeriod, startDay: s.startDay, lastPeriod: s.lastPeriod, freezes: s.freezes, grants: s.grants, grantDay: s.grantDay ?? null, createdDay: user.createdDay };
}

/** The streak as the event script replies it (lua eventReplyHead): its last period the last covered. */
function repliedStreak(user: ModelUser): StreakState {
  return { ...streakState(user), lastPeriod: coveredPeriod(user.streak) };
}

/**
 * One request's work on one user (mirrors the locals of a Lua script run): awards per system,
 * achievements completed, streak outcome. `commit` writes the shard-level effects.
 */
class UserRequest {
  private readonly changes = new Map<string, PointsChange & { seq: number }>();
  private readonly boostCache = new Map<string, { multiplier: number; rounding: ActiveBoost["rounding"] }>();
  readonly completed: string[] = [];

  constructor(
    readonly tenant: CompiledTenant,
    readonly state: ModelState,
    readonly userId: string,
    readonly user: ModelUser,
    readonly now: number,
  ) {}

  matches(pairs: [string, string][]): boolean {
    return userFiltersMatch(pairs, this.user.attributes);
  }

  /** The boosts of a system that apply to this user, global (matching the user's attributes) and the user's own. */
  boostWindows(system: CompiledSystem): BoostWindow[] {
    return [...system.boosts.filter((b) => this.matches(b.userAttributes)), ...(this.user.boosts.get(system.key) ?? [])];
  }

  /** lua boostOf: the boosts active now, multiplied. */
  private boostOf(system: CompiledSystem) {
    let cached = this.boostCache.get(system.key);
    if (!cached) {
      cached = boostAtInstant(this.boostWindows(system), this.now);
      this.boostCache.set(system.key, cached);
    }
    return cached;
  }

  /** lua award: boost (unless `preBoosted`), then cap or floor; records only a change actually applied. */
  award(system: CompiledSystem, triggerKey: string, amount: number, preBoosted = false): void {
    let change = this.changes.get(system.key);
    if (!change) {
      const current = this.user.points.get(system.key) ?? { total: 0, seq: 0 };
      change = { systemKey: system.key, added: 0, total: current.total, before: current.total, awards: [], seq: current.seq };
      this.changes.set(system.key, change);
    }
    if (amount > 0 && !preBoosted) {
      const { multiplier, rounding } = this.boostOf(system);
      amount = boostedPoints(amount, multiplier, rounding);
    }
    const total = change.total;
    const next = amount > 0 ? (total >= system.cap ? total : Math.min(total + amount, system.cap)) : Math.min(Math.max(total + amount, 0), total);
    const applied = next - total;
    if (applied === 0) return;
    change.total = next;
    change.added += applied;
    change.seq += 1;
    change.awards.push({ seq: change.seq, ms: this.now, awarded: applied, total: next, triggerKey });
  }

  /** lua fire: every trigger whose user filter matches. */
  fire(triggers: readonly CompiledTrigger[]): void {
    for (const t of triggers) {
      if (this.matches(t.userAttributes)) this.award(this.tenant.systemByKey.get(t.systemKey)!, t.key, t.points);
    }
  }

  /** lua complete: once, if the user matches; fires achievement triggers, then composites above it. */
  complete(achievement: CompiledAchievement): boolean {
    if (this.user.achievements.has(achievement.key)) {
      // Met again though done: a composite above it may still wait, its prerequisites all done,
      // when the tenant file added it (or took a part the user lacked out of it) after its last
      // part completed. Nothing else would complete it; it completes now.
      this.completeAbove(achievement);
      return false;
    }
    if (!this.matches(achievement.userAttributes)) return false;
    this.user.achievements.set(achievement.key, this.now);
    this.completed.push(achievement.key);
    this.fire(triggersOf(this.tenant, (t) => t.type === "achievement" && t.achievement === achievement.key));
    // A composite completes when its last prerequisite does.
    this.completeAbove(achievement);
    return true;
  }

  /** lua completeAbove: the composites above a done achievement whose prerequisites are all done complete; a done composite is looked through for those above it. */
  private completeAbove(achievement: CompiledAchievement): void {
    for (const parent of this.tenant.achievements) {
      if (parent.type !== "composite" || !parent.prerequisites.includes(achievement.key)) continue;
      if (this.user.achievements.has(parent.key)) this.completeAbove(parent);
      else if (parent.prerequisites.every((p) => this.user.achievements.has(p))) this.complete(parent);
    }
  }

  /** lua flushAchievements + flushPoints: counters, totals, award lists. */
  commit(): PointsChange[] {
    for (const key of this.completed) bump(this.state.completions, key, 1);
    const out: PointsChange[] = [];
    for (const change of this.changes.values()) {
      if (change.awards.length === 0) continue;
      const system = this.tenant.systemByKey.get(change.systemKey)!;
      this.user.points.set(system.key, { total: change.total, seq: change.seq });
      const list = this.user.awards.get(system.key) ?? [];
      this.user.awards.set(system.key, [...[...change.awards].reverse(), ...list].slice(0, AWARDS_KEPT));
      const { seq: _seq, ...plain } = change;
      out.push(plain);
    }
    return out;
  }
}

function triggersOf(tenant: CompiledTenant, pick: (t: CompiledTrigger) => boolean): CompiledTrigger[] {
  return tenant.systems.flatMap((s) => s.triggers.filter(pick));
}

function newUser(now: number, createdDay: number): ModelUser {
  return {
    created: now,
    updated: now,
    createdDay,
    profile: new Map(),
    attributes: new Map(),
    metrics: new Map(),
    points: new Map(),
    highWater: new Map(),
    triggerCounts: new Map(),
    achievements: new Map(),
    streak: { length: 0, startPeriod: null, startDay: null, lastPeriod: null, metAt: null, metPeriod: null, best: 0, accPeriod: null, accStart: null, accTimes: null, acc: new Map(), freezes: null, grants: 0, extendedAt: null },
    idempotency: new Map(),
    boosts: new Map(),
    boards: new Map(),
    awards: new Map(),
    buckets: new Map(),
    records: [],
  };
}

/**
 * A stream record's creation, achievement and points parts (src/domain/stream-record.ts: "c",
 * "a:<achievement>" per completion, "p:<sys>:<added>:<total>:<level before>:<level after>" per
 * system changed, level indexes by levelIndex, 0 = none); a record without any is not kept.
 */
function logRecord(tenant: CompiledTenant, user: ModelUser, kind: "ev" | "us" | "ac" | "tt", created: boolean, completed: readonly string[], points: readonly PointsChange[]): void {
  const levels = (key: string) => tenant.systemByKey.get(key)!.levels;
  const parts = [
    ...(created ? ["c"] : []),
    ...completed.map((key) => `a:${key}`),
    // A change has one award at least (UserRequest.commit): the last one's number ends the part.
    ...points.map((p) => `p:${p.systemKey}:${p.added}:${p.total}:${levelIndex(levels(p.systemKey), p.before)}:${levelIndex(levels(p.systemKey), p.total)}:${p.awards.at(-1)!.seq}`),
  ];
  if (parts.length > 0) user.records.push({ kind, parts });
}

/**
 * The changes one stream record carries into the daily buckets (lua/applyStream-2.lua): an
 * event's metric change (micro, with the total after it) and every points change, all on the
 * record's local day (the event's day on its zone; for other records the day of `now` in the
 * user's zone after the change). Days only move forward in a series: a day at or before the
 * series' latest bucket counts in that bucket.
 */
function recordSeries(user: ModelUser, day: number, metric: { key: string; change: number; total: number } | null, points: readonly PointsChange[]): void {
  const add = (series: string, change: number, total: number) => {
    const buckets = user.buckets.get(series) ?? [];
    user.buckets.set(series, buckets);
    const last = buckets.at(-1);
    if (last !== undefined && day <= last.day) {
      last.count += 1;
      last.change += change;
      last.total = total;
    } else buckets.push({ day, count: 1, change, total });
  };
  if (metric !== null) add(`m:${metric.key}`, metric.change, metric.total);
  for (const p of points) add(`p:${p.systemKey}`, p.added, p.total);
}

/** recordSeries for a record other than an event's: on the day of `now` in the user's stored zone. */
function recordPointsSeries(user: ModelUser, now: number, points: readonly PointsChange[]): void {
  if (points.length > 0) recordSeries(user, localDayIndex(now, user.profile.get("tz") ?? "UTC"), null, points);
}

/** lua applyProfile: returns whether a stored value changed. */
function applyProfile(user: ModelUser, profile: [string, string][]): boolean {
  let changed = false;
  for (const [field, value] of profile) {
    const isAttribute = field.startsWith("ua:");
    const map = isAttribute ? user.attributes : user.profile;
    const key = isAttribute ? field.slice(3) : field;
    if (map.get(key) !== value) {
      map.set(key, value);
      changed = true;
    }
  }
  return changed;
}

/** lua createUser: first identification. */
function createUser(req: UserRequest, localDay: number): void {
  const { tenant, state, user, userId, now } = req;
  user.createdDay = localDay;
  req.fire(triggersOf(tenant, (t) => t.type === "user_creation"));
  for (const t of triggersOf(tenant, (t) => t.type === "time")) {
    if (t.type !== "time") continue;
    const due = state.timeDue.get(triggerId(t)) ?? new Map<string, number>();
    due.set(userId, now + t.intervalMs);
    state.timeDue.set(triggerId(t), due);
  }
  if (tenant.streak?.freezes) {
    user.streak.freezes = tenant.streak.freezes.initial;
    user.streak.grants = 0;
  }
}

export function applyEvent(tenant: CompiledTenant, state: ModelState, input: EventInput): ModelEventResult {
  const existing = state.users.get(input.userId);
  const tz = input.tz ?? existing?.profile.get("tz") ?? "UTC";
  const rule = tenant.streak;
  const frequency = rule?.frequency ?? "daily";
  const nowDay = localDayIndex(input.now, tz);
  const nowPeriod = periodOfDay(nowDay, frequency);
  const oldTotal = existing?.metrics.get(input.metricKey) ?? 0;

  // Spec: idempotency rules 1-4; a replay changes nothing and reports the current state.
  if (input.idempotencyKey !== null && existing) {
    // With an idempotency window, a key is remembered until the window after its event has passed.
    const original = existing.idempotency.get(`${input.metricKey}:${input.idempotencyKey}`);
    if (original !== undefined && (original.until === null || input.now < original.until)) {
      // Nothing is written, a zone sent included: the streak is read on the stored zone's calendar.
      const storedTz = existing.profile.get("tz") ?? "UTC";
      const storedDay = localDayIndex(input.now, storedTz);
      const outcome = { kind: "replay", eventId: original.eventId, totalMicro: oldTotal, streak: repliedStreak(existing) } as const;
      return { outcome, tz: storedTz, nowDay: storedDay, nowPeriod: periodOfDay(storedDay, frequency) };
    }
  }

  const newTotal = oldTotal + input.valueMicro;
  if (newTotal > MAX_TOTAL_MICRO || newTotal < -MAX_TOTAL_MICRO) throw new LaurelError("TOTAL_OUT_OF_RANGE");

  const created = !existing;
  const user = existing ?? newUser(input.now, nowDay);
  if (created) {
    state.users.set(input.userId, user);
    state.userCount += 1;
  }
  if (input.idempotencyKey !== null) {
    const until = tenant.idempotencyWindowMs === null ? null : input.now + tenant.idempotencyWindowMs;
    user.idempotency.set(`${input.metricKey}:${input.idempotencyKey}`, { eventId: input.eventId, until });
  }
  const req = new UserRequest(tenant, state, input.userId, user, input.now);
  const zoneChanged = !created && changesZone(user, input.profile);
  const profileChanged = applyProfile(user, input.profile);
  if (created) createUser(req, nowDay);
  else if (profileChanged) user.updated = input.now;

  // Spec rule 1 and DESIGN: each newly crossed multiple above the high-water mark pays once;
  // a filtered trigger counts only the values of events that pass its filters, saturating at the
  // metric total's range (events the filter passes can move it further than the total).
  // A trigger's mark starts where its count stands when the trigger first counts for the user
  // (added to the config since, or its filters added or removed: the mark held was of the other
  // count): an unfiltered one at the metric total before this event, a filtered one's own sum at 0.
  // So an edit pays from its start on: neither the progress made before it (a burst) nor a mark of
  // the other count to climb past first (a stall). The own sum of a trigger whose filters were
  // removed, still stored, says the mark is of the sum (lua event-2.lua step 6a).
  user.metrics.set(input.metricKey, newTotal);
  for (const t of triggersOf(tenant, (x) => x.type === "metric" && x.metric === input.metricKey)) {
    if (t.type !== "metric") continue;
    if (!eventFiltersMatch(t.eventAttributes, input.eventAttributes) || !req.matches(t.userAttributes)) continue;
    const id = triggerId(t);
    let counted = newTotal;
    if (t.userAttributes.length > 0 || t.eventAttributes.length > 0) {
      if (!user.triggerCounts.has(id)) user.highWater.delete(id);
      counted = Math.min(MAX_TOTAL_MICRO, Math.max(-MAX_TOTAL_MICRO, (user.triggerCounts.get(id) ?? 0) + input.valueMicro));
      user.triggerCounts.set(id, counted);
    } else if (!user.highWater.has(id) || user.triggerCounts.has(id)) {
      user.triggerCounts.delete(id);
      if (oldTotal > 0) user.highWater.set(id, oldTotal);
      else user.highWater.delete(id);
    }
    const hw = user.highWater.get(id) ?? 0;
    if (counted > hw) {
      user.highWater.set(id, counted);
      const crossings = floorDiv(counted, t.thresholdMicro) - floorDiv(hw, t.thresholdMicro);
      if (crossings > 0) req.award(tenant.systemByKey.get(t.systemKey)!, t.key, crossings * t.points);
    }
  }

  // Streak: settle (freezes, loss), then accumulate the period's value and extend once per period.
  const s = user.streak;
  // The event moved the user to another zone: the streak continues on its calendar (lua moveCalendar).
  if (zoneChanged && rule) moveCalendar(s, rule.frequency, tz, nowPeriod);
  const settlement = created ? { consumed: 0, earned: 0, lost: 0, frozen: [] } : settleStreak(tenant, s, user.createdDay, nowDay, nowPeriod);
  recordSettlement(state, input.userId, s, settlement);
  let extended = false;
  if (rule && rule.metrics.some((m) => m.metric === input.metricKey)) {
    if (s.accPeriod !== nowPeriod) {
      // Every metric's value, counted by the streak now or not (lua st.m and st.oi): one put back
      // into the streak later in the period counts only the period's values.
      for (const metric of s.acc.keys()) s.acc.set(metric, 0);
      s.accPeriod = nowPeriod;
      s.accStart = input.now;
      s.accTimes = null;
    }
    s.acc.set(input.metricKey, (s.acc.get(input.metricKey) ?? 0) + input.valueMicro);
    // Full thresholds the period's values have reached: the least of the metrics' (mode all),
    // their sum (mode any, each a meeting by itself). Met at one.
    const counts = rule.metrics.map((m) => Math.floor((s.acc.get(m.metric) ?? 0) / m.thresholdMicro));
    const times = rule.mode === "any" ? counts.reduce((sum, n) => sum + Math.max(0, n), 0) : Math.min(...counts);
    const met = times >= 1;
    // Covered before this event's work; then the work's instant: the first meeting of the
    // threshold in the period, and each time its values reach more full thresholds (the least of
    // the metrics' in mode all, their sum in mode any) than they had.
    const last = coveredPeriod(s);
    const mostReached = s.metPeriod === s.accPeriod ? (s.accTimes ?? 0) : 0;
    if (met && times > mostReached) {
      s.metAt = input.now;
      s.metPeriod = nowPeriod;
      s.accTimes = times;
    }
    if (met && (last === null || nowPeriod > last)) {
      if (last !== null && last === nowPeriod - 1 && s.length > 0) s.length += 1;
      else {
        s.length = 1;
        s.startPeriod = nowPeriod;
        s.startDay = nowDay;
      }
      s.lastPeriod = nowPeriod;
      s.extendedAt = input.now;
      if (s.length > s.best) {
        s.best = s.length;
        state.streakBest.set(input.userId, s.best);
      }
      state.streakActive.set(input.userId, s.length);
      state.streakDeadline.set(input.userId, streakDeadline(nowPeriod, rule.frequency, tz));
      const history = state.streakHistory.get(input.userId) ?? new Map<number, string>();
      history.set(nowPeriod, `${nowPeriod}:${s.length}`);
      const trimmedTo = Math.min(nowPeriod - STREAK_HISTORY_KEPT, (s.startPeriod ?? nowPeriod) - 1); // never inside the live streak
      if (nowPeriod % 64 === 0) for (const p of history.keys()) if (p <= trimmedTo) history.delete(p);
      state.streakHistory.set(input.userId, history);
      extended = true;
      for (const t of triggersOf(tenant, (x) => x.type === "streak")) {
        if (t.type === "streak" && s.length % t.length === 0 && req.matches(t.userAttributes)) req.award(tenant.systemByKey.get(t.systemKey)!, t.key, t.points);
      }
      for (const a of tenant.achievements) if (a.type === "streak" && s.length >= a.length) req.complete(a);
    }
  }
  if (!extended && settlement.frozen.length > 0 && settlement.lost === 0 && rule) {
    state.streakDeadline.set(input.userId, streakDeadline(nowPeriod - 1, rule.frequency, tz));
  }
  if (zoneChanged && rule) placeDeadline(state, input.userId, s, rule.frequency, tz, nowPeriod, input.now);

  // Metric achievements: completed once, when the total reaches the value.
  for (const a of tenant.achievements) {
    if (a.type === "metric" && a.metric === input.metricKey && newTotal >= a.valueMicro) req.complete(a);
  }

  const points = req.commit();
  recordSeries(user, nowDay, { key: input.metricKey, change: input.valueMicro, total: newTotal }, points);
  logRecord(tenant, user, "ev", created, req.completed, points);
  const streakLength = extended || settlement.lost > 0 ? s.length : null;
  const boards = updateBoards(tenant, state, input.userId, user, input.now, { metricKey: input.metricKey, value: input.valueMicro, points, streakLength });
  journal(state, { userId: input.userId, ms: input.now, tz, day: nowDay, period: nowPeriod, created, completed: req.completed, points, extended: extended ? s.length : null, lost: settlement.lost, consumed: settlement.consumed, earned: settlement.earned, granted: 0, boards });
  return {
    outcome: {
      kind: "processed",
      eventId: input.eventId,
      totalMicro: newTotal,
      streak: repliedStreak(user),
      extended,
      achievements: req.completed,
      points,
      boards,
    },
    tz,
    nowDay,
    nowPeriod,
  };
}

/** Rank number of (value, member) in a group by the board's style: lua rankOf. */
export function modelRank(board: CompiledLeaderboard, entries: ReadonlyMap<string, { value: number; reachedAt: number }>, value: number, member: string): number {
  return modelPlace(board, entries, value, member).rank;
}

/** The rank by style and the ordinal position (1-based, board order) of (value, member) in a group. */
function modelPlace(board: CompiledLeaderboard, entries: ReadonlyMap<string, { value: number; reachedAt: number }>, value: number, member: string): { rank: number; position: number } {
  let above = 0;
  let tiesAhead = 0;
  const distinct = new Set<number>();
  for (const [user, e] of entries) {
    if (e.value > value) {
      above += 1;
      distinct.add(e.value);
    } else if (e.value === value && compareCodePoints(boardMember(e.reachedAt, user), member) > 0) tiesAhead += 1;
  }
  const position = above + tiesAhead + 1;
  return { rank: board.ranking === "dense" ? distinct.size + 1 : board.ranking === "ordinal" ? position : above + 1, position };
}

/** The entries of a group in board order (value first, then first to reach it). */
export function modelBoardOrder(entries: ReadonlyMap<string, { value: number; reachedAt: number }>): BoardEntry[] {
  return [...entries].map(([user, e]) => ({ member: boardMember(e.reachedAt, user), value: e.value })).sort(compareEntries);
}

/** What ThresholdCache.refresh does: the threshold of each active run without breakdown, read at `readAt` (the clock's latest time). */
export function refreshThresholds(tenant: CompiledTenant, state: ModelState, now: number, readAt = now): void {
  for (const board of tenant.leaderboards) {
    const run = activeRun(board, now);
    if (run === null || board.breakdownAttribute !== null) continue;
    const id = `${board.key}:${run}`;
    const value = thresholdOfEntries(board, modelBoardOrder(state.boards.get(`${id}:`) ?? new Map())) ?? -Infinity;
    state.thresholds.set(id, { value, at: readAt, falls: state.boardFalls.get(id) ?? 0 });
  }
}

/**
 * lua updateBoards: moves the user's entry on every active board whose value this request
 * changed (metric boards by the event's value, points boards by the points added, streak boards
 * to the new streak length; 0 leaves a streak board), counts the new rank unless the value is
 * below the cached threshold of a full board, or equal to it and reached after the read (and
 * the board's values did not fall since it was read), and appends to the user's rank history
 * of the run.
 */
export function updateBoards(
  tenant: CompiledTenant,
  state: ModelState,
  userId: string,
  user: ModelUser,
  now: number,
  change: { metricKey: string | null; value: number; points: PointsChange[]; streakLength: number | null },
): BoardChange[] {
  const out: BoardChange[] = [];
  for (const board of tenant.leaderboards) {
    const run = activeRun(board, now);
    if (run === null) continue;
    const breakdown = board.breakdownAttribute === null ? "" : (user.attributes.get(board.breakdownAttribute) ?? "");
    if (board.breakdownAttribute !== null && breakdown === "") continue;
    let delta = 0;
    let absolute: number | null = null;
    if (board.rankBy === "metric") delta = board.metric === change.metricKey ? change.value : 0;
    else if (board.rankBy === "points") delta = change.points.find((p) => p.systemKey === board.points)?.added ?? 0;
    else if (change.streakLength !== null && tenant.streak) absolute = change.streakLength;
    if (delta === 0 && absolute === null) continue;
    // As Node passes it: NaN for a breakdown board (no threshold kept per group), -Infinity while
    // the board has room (or before the first refresh).
    const read = state.thresholds.get(`${board.key}:${run}`);
    const threshold = board.breakdownAttribute !== null ? NaN : (read?.value ?? -Infinity);
    // lua fellSince: the run's values fell since the threshold was read.
    const fellSince = () => (state.boardFalls.get(`${board.key}:${run}`) ?? 0) !== (read?.falls ?? 0);
    const entryKey = `${board.key}:${run}`;
    const current = user.boards.get(entryKey) ?? null;
    const oldValue = current ? current.value : null;
    const newValue = absolute ?? (oldValue ?? 0) + delta;
    if (current) state.boards.get(`${board.key}:${run}:${current.breakdown}`)?.delete(userId);
    let rank: number | null = null;
    if (absolute === 0) user.boards.delete(entryKey);
    else {
      const id = `${board.key}:${run}:${breakdown}`;
      const entries = state.boards.get(id) ?? new Map<string, { value: number; reachedAt: number }>();
      entries.set(userId, { value: newValue, reachedAt: now });
      state.boards.set(id, entries);
      // lua updateBoards: a value below the cached threshold (or equal to it, read before now)
      // is off the board uncounted, unless the board's threshold is not kept (breakdown), the
      // user's own entry may have held a place, or the board's values fell since the threshold
      // was read; lua rankOf: the place decides.
      const count = newValue > threshold || Number.isNaN(threshold) || (oldValue !== null && oldValue >= threshold) || (newValue === threshold && now <= (read?.at ?? 0)) || fellSince();
      if (count) {
        const place = modelPlace(board, entries, newValue, boardMember(now, userId));
        rank = place.position > board.maxParticipants ? null : place.rank;
      }
      user.boards.set(entryKey, { value: newValue, reachedAt: now, breakdown, rank });
    }
    // lua countFall: an entry that may have held a place fell (or left the board).
    if (oldValue !== null && (absolute === 0 || newValue < oldValue) && !Number.isNaN(threshold) && (oldValue >= threshold || fellSince())) {
      const id = `${board.key}:${run}`;
      state.boardFalls.set(id, (state.boardFalls.get(id) ?? 0) + 1);
    }
    const previousRank = current ? current.rank : null;
    if (rank !== null || previousRank !== null) {
      const historyId = `${board.key}:${run}:${userId}`;
      const history = state.boardHistory.get(historyId) ?? [];
      history.unshift({ t: now, pr: previousRank, r: rank, pv: oldValue, v: absolute === 0 ? null : newValue });
      state.boardHistory.set(historyId, history.slice(0, 100));
    }
    out.push({ boardKey: board.key, run, oldValue, newValue, breakdown, rank, previousRank, threshold: shownThreshold(threshold) });
  }
  return out;
}

/**
 * lua/includes/state.lua moveCalendar: after a zone change, the work's instant read on the new
 * calendar (`tz` at `nowPeriod`), when it is in the current or the previous period; the period's
 * accumulated values stay when all were sent in the new calendar's current period, else start again.
 */
function moveCalendar(s: ModelStreak, frequency: Frequency, tz: string, nowPeriod: number): void {
  const start = periodStartInstant(nowPeriod, frequency, tz);
  s.metPeriod = null;
  if (s.metAt !== null && s.metAt >= start) s.metPeriod = nowPeriod;
  else if (s.metAt !== null && s.metAt >= periodStartInstant(nowPeriod - 1, frequency, tz)) s.metPeriod = nowPeriod - 1;
  if (s.accPeriod !== null) s.accPeriod = (s.accStart ?? 0) >= start ? nowPeriod : null;
}

/**
 * lua/includes/state.lua placeDeadline: a live streak's deadline on the calendar of `tz` (after a
 * zone change, or a settlement); the earlier one for a streak covered after nowPeriod, now for one
 * already lost on that calendar.
 */
function placeDeadline(state: ModelState, userId: string, s: ModelStreak, frequency: Frequency, tz: string, nowPeriod: number, now: number): void {
  const last = coveredPeriod(s);
  if (s.length === 0 || last === null) return;
  let lostAt = now;
  if (last >= nowPeriod) lostAt = streakDeadline(nowPeriod, frequency, tz);
  else if (last === nowPeriod - 1) lostAt = streakDeadline(nowPeriod - 1, frequency, tz);
  state.streakDeadline.set(userId, lostAt);
}

/** Whether `profile` moves the user to another zone (lua user.lua applyProfile's zoneChanged). */
function changesZone(user: ModelUser, profile: readonly [string, string][]): boolean {
  return profile.some(([field, value]) => field === "tz" && user.profile.get("tz") !== value);
}

/** The shard-level effects of a settlement: frozen periods in the history, a lost streak leaves the zsets. */
function recordSettlement(state: ModelState, userId: string, streak: ModelStreak, settlement: StreakSettlement): void {
  if (settlement.frozen.length > 0) {
    const history = state.streakHistory.get(userId) ?? new Map<number, string>();
    const length = settlement.lost > 0 ? settlement.lost : streak.length;
    for (const p of settlement.frozen) history.set(p, `${p}:${length}:f`);
    state.streakHistory.set(userId, history);
  }
  if (settlement.lost > 0) {
    state.streakActive.delete(userId);
    state.streakDeadline.delete(userId);
  }
}

/** GET /v1/points/{key}/level-summary: users at each level of the system (store/read-store.ts usersAtLevels). */
export function usersAtLevels(tenant: CompiledTenant, state: ModelState, systemKey: string): number[] {
  const levels = tenant.systemByKey.get(systemKey)!.levels;
  const counts = levels.map(() => 0);
  for (const user of state.users.values()) {
    const level = levelIndex(levels, user.points.get(systemKey)?.total ?? 0);
    if (level > 0) counts[level - 1]! += 1;
  }
  return counts;
}

/** The metering read in the model: null for an unknown user. */
export function readUserPoints(state: ModelState, userId: string, systemKey: string, awards: number) {
  const user = state.users.get(userId);
  if (!user) return null;
  return { total: user.points.get(systemKey)?.total ?? 0, awards: (user.awards.get(systemKey) ?? []).slice(0, awards) };
}

/**
 * GET /v1/points/{key}/summary (src/api/points-summary.ts, lua/pointsHistogram-2.lua): the users
 * (those whose attributes match every pair of `filter`) by total: 0..0 every such user without a
 * point (never earned in the system, or 0), then the ten ranges up to the highest total's power of ten.
 */
export function modelPointsSummary(state: ModelState, systemKey: string, filter: ReadonlyMap<string, string> | null): { from: number; to: number; users: number }[] {
  const users = [...state.users.values()].filter((u) => filter === null || [...filter].every(([k, v]) => u.attributes.get(k) === v));
  const totals = users.flatMap((u) => u.points.get(systemKey)?.total ?? []);
  const withPoints = totals.filter((total) => total >= 1).length;
  const ranges = rangesOfTop(histogramTop(Math.max(0, ...totals)));
  return [{ from: 0, to: 0, users: users.length - withPoints }, ...ranges.map(([from, to]) => ({ from, to, users: totals.filter((total) => total >= from && total <= to).length }))];
}

/**
 * GET /v1/streaks/rankings (src/api/streaks.ts): the `limit` longest streaks, active (those in
 * {t:s}:sa whose deadline has not passed: lua/streakTop-2.lua) or longest ever ({t:s}:sb), ties by
 * user id descending in bytes (read-store.ts topStreaks).
 */
export function modelStreakRankings(state: ModelState, type: "active" | "longest", limit: number, now: number): { userId: string; name: string | null; streakLength: number }[] {
  const entries =
    type === "active" ? [...state.streakActive].filter(([userId]) => !((state.streakDeadline.get(userId) ?? Infinity) <= now)) : [...state.streakBest];
  return entries
    .sort(([ua, la], [ub, lb]) => lb - la || compareCodePoints(ub, ua))
    .slice(0, limit)
    .map(([userId, streakLength]) => ({ userId, name: state.users.get(userId)?.profile.get("nm") ?? null, streakLength }));
}

/** A user's achievement as the user reads list it: its key and completion instant (null: still open to the user). */
export interface ModelUserAchievement {
  key: string;
  achievedAt: number | null;
}

/**
 * The achievements a user sees (src/api/achievements.ts userAchievementList): among `list`, the
 * completed ones, and with `includeIncomplete` those whose attribute filter the user matches.
 */
function userAchievements(user: ModelUser, list: readonly CompiledAchievement[], includeIncomplete: boolean): ModelUserAchievement[] {
  return list
    .filter((a) => user.achievements.has(a.key) || (includeIncomplete && userFiltersMatch(a.userAttributes, user.attributes)))
    .map((a) => ({ key: a.key, achievedAt: user.achievements.get(a.key) ?? null }));
}

/**
 * GET /v1/users/{id}/achievements: the user's achievements in config order, each with how many
 * users completed it and that as a percentage of the tenant's users (2 decimals); null for an unknown user.
 */
export function modelUserAchievements(tenant: CompiledTenant, state: ModelState, userId: string, includeIncomplete: boolean): (ModelUserAchievement & { completions: number; rarity: number })[] | null {
  const user = state.users.get(userId);
  if (!user) return null;
  return userAchievements(user, tenant.achievements, includeIncomplete).map((a) => {
    const completions = state.completions.get(a.key) ?? 0;
    return { ...a, completions, rarity: state.userCount > 0 ? Math.round((completions / state.userCount) * 10_000) / 100 : 0 };
  });
}

/**
 * GET /v1/users/{id}/metrics (src/api/user-metrics.ts): each metric's total (micro) and its
 * metric achievements completed or still open to the user; null for an unknown user.
 */
export function modelUserMetrics(tenant: CompiledTenant, state: ModelState, userId: string): { key: string; totalMicro: number; achievements: ModelUserAchievement[] }[] | null {
  const user = state.users.get(userId);
  if (!user) return null;
  return tenant.metrics.map((m) => ({
    key: m.key,
    totalMicro: user.metrics.get(m.key) ?? 0,
    achievements: userAchievements(user, tenant.achievements.filter((a) => a.type === "metric" && a.metric === m.key), true),
  }));
}

/** A series' total at the end of `day`: its last bucket's at or before it, 0 before its first. */
function seriesTotalAt(buckets: readonly ModelBucket[], day: number): number {
  let total = 0;
  for (const b of buckets) if (b.day <= day) total = b.total;
  return total;
}

/**
 * GET /v1/users/{id}/metrics/{key}/event-summary and /points/{key}/event-summary
 * (src/api/event-summary.ts, trophy-compat §2.2 #12, #16): per daily, weekly (ISO) or monthly
 * period overlapping the local days [from, to], oldest first, its first day, the changes of its
 * days inside the range and the total at the end of its last day inside it (amounts as stored:
 * micro for metrics); null for an unknown user.
 */
export function modelEventSummary(state: ModelState, userId: string, series: string, from: number, to: number, aggregation: Frequency): { date: string; total: number; change: number }[] | null {
  const user = state.users.get(userId);
  if (!user) return null;
  const buckets = user.buckets.get(series) ?? [];
  const items: { date: string; total: number; change: number }[] = [];
  for (let period = periodOfDay(from, aggregation); period <= periodOfDay(to, aggregation); period++) {
    const first = Math.max(periodStartDay(period, aggregation), from);
    const last = Math.min(periodEndDay(period, aggregation), to);
    const change = buckets.filter((b) => b.day >= first && b.day <= last).reduce((sum, b) => sum + b.change, 0);
    items.push({ date: formatDay(periodStartDay(period, aggregation)), total: seriesTotalAt(buckets, last), change });
  }
  return items;
}

/** One span of wrapped: each metric's and system's total at its end, change in it and percent change; the achievements completed in it. */
export interface ModelWrappedSpan {
  from: number;
  to: number;
  metrics: { key: string; total: number; change: number; percentChange: number }[];
  points: { key: string; total: number; change: number; percentChange: number }[];
  achievements: { key: string; achievedAt: number }[];
}

export type ModelWrapped =
  | { status: 404 | 422 }
  | {
      status: 200;
      daysActive: number;
      weeksActive: number;
      monthsActive: number;
      mostActiveDay: ModelWrappedSpan;
      mostActiveWeek: ModelWrappedSpan;
      mostActiveMonth: { month: number } & ModelWrappedSpan;
      entireYear: ModelWrappedSpan;
      longestStreak: { length: number; periodStart: number | null; periodEnd: number | null; started: number | null };
    };

/**
 * GET /v1/users/{id}/wrapped?year= (src/api/wrapped.ts, trophy-compat §3.8, the decisions in
 * domain/wrapped.ts): the year on the user's calendar; `year` null is the current one in the
 * user's zone; 422 past it (or past the UTC year + 1, before the user is looked up), 404 for an
 * unknown user. Active days: days with a metric event; the most active day, ISO week (clipped to
 * the year) and month by events, ties to the earliest, none: the first. percentChange: change ÷
 * |total before| × 100 truncated to one decimal, 100 from 0, 0 without change.
 */
export function modelWrapped(tenant: CompiledTenant, state: ModelState, userId: string, year: number | null, now: number): ModelWrapped {
  const yearOf = (tz: string) => dayToDate(localDayIndex(now, tz)).y;
  if (year !== null && (year < 1 || year > yearOf("UTC") + 1)) return { status: 422 };
  const user = state.users.get(userId);
  if (!user) return { status: 404 };
  const tz = user.profile.get("tz") ?? "UTC";
  const y = year ?? yearOf(tz);
  if (y > yearOf(tz)) return { status: 422 };
  const yearFrom = dateToDay(y, 1, 1);
  const yearTo = dateToDay(y + 1, 1, 1) - 1;
  const perDay = new Map<number, number>();
  for (const m of tenant.metrics) {
    for (const b of user.buckets.get(`m:${m.key}`) ?? []) if (b.day >= yearFrom && b.day <= yearTo) perDay.set(b.day, (perDay.get(b.day) ?? 0) + b.count);
  }
  const busiest = (keyOf: (day: number) => number, none: number): number => {
    const counts = new Map<number, number>();
    for (const [day, n] of perDay) counts.set(keyOf(day), (counts.get(keyOf(day)) ?? 0) + n);
    let best = none;
    let most = 0;
    for (const [key, n] of [...counts].sort(([a], [b]) => a - b)) if (n > most) [best, most] = [key, n];
    return best;
  };
  const percent = (before: number, change: number) => (change === 0 ? 0 : before === 0 ? 100 : Math.trunc((change / Math.abs(before)) * 1000) / 10);
  const seriesIn = (series: string, from: number, to: number) => {
    const buckets = user.buckets.get(series) ?? [];
    const before = seriesTotalAt(buckets, from - 1);
    const change = buckets.filter((b) => b.day >= from && b.day <= to).reduce((sum, b) => sum + b.change, 0);
    return { total: before + change, change, percentChange: percent(before, change) };
  };
  const span = (from: number, to: number): ModelWrappedSpan => ({
    from,
    to,
    metrics: tenant.metrics.map((m) => ({ key: m.key, ...seriesIn(`m:${m.key}`, from, to) })),
    points: tenant.systems.map((s) => ({ key: s.key, ...seriesIn(`p:${s.key}`, from, to) })),
    achievements: tenant.achievements
      .filter((a) => user.achievements.has(a.key))
      .map((a) => ({ key: a.key, achievedAt: user.achievements.get(a.key)! }))
      .filter((a) => localDayIndex(a.achievedAt, tz) >= from && localDayIndex(a.achievedAt, tz) <= to),
  });
  const day = busiest((d) => d, yearFrom);
  const week = busiest((d) => periodOfDay(d, "weekly"), periodOfDay(yearFrom, "weekly"));
  const month = busiest((d) => dayToDate(d).m - 1, 0);
  const frequency = tenant.streak?.frequency ?? "daily";
  const fromPeriod = periodOfDay(yearFrom, frequency);
  const toPeriod = periodOfDay(yearTo, frequency);
  const history = [...(state.streakHistory.get(userId) ?? [])].filter(([period]) => period <= toPeriod).map(([, member]) => member);
  const longest = longestStreakIn(history, fromPeriod, toPeriod);
  const s = user.streak;
  return {
    status: 200,
    daysActive: perDay.size,
    weeksActive: new Set([...perDay.keys()].map((d) => periodOfDay(d, "weekly"))).size,
    monthsActive: new Set([...perDay.keys()].map((d) => dayToDate(d).m)).size,
    mostActiveDay: span(day, day),
    mostActiveWeek: span(Math.max(periodStartDay(week, "weekly"), yearFrom), Math.min(periodEndDay(week, "weekly"), yearTo)),
    mostActiveMonth: { month, ...span(dateToDay(y, month + 1, 1), dateToDay(y, month + 2, 1) - 1) },
    entireYear: span(yearFrom, yearTo),
    longestStreak: {
      length: longest.length,
      periodStart: longest.startPeriod === null ? null : periodStartDay(longest.startPeriod, frequency),
      periodEnd: longest.endPeriod === null ? null : periodEndDay(longest.endPeriod, frequency),
      // The day the streak began is known for the user's last streak (its start period the stored one).
      started: longest.startPeriod === null ? null : streakFirstDay(longest.startPeriod, longest.startPeriod === s.startPeriod ? s.startDay : null, frequency),
    },
  };
}

/**
 * A board's status in GET /v1/leaderboards (README, Leaderboards: by the service clock's UTC day):
 * scheduled before its start day, finished from its end day (exclusive end) on, else active.
 */
export function modelBoardStatus(board: CompiledLeaderboard, now: number): "scheduled" | "active" | "finished" {
  const day = Math.floor(now / 86_400_000);
  if (day < board.startDay) return "scheduled";
  return board.endDay !== null && day >= board.endDay ? "finished" : "active";
}

/**
 * keepFinishedRuns (README, Leaderboards): the first run a read still finds; a board keeps its
 * newest `keepFinishedRuns` finished runs and the active one, all of them without the setting.
 */
export function modelFirstKeptRun(board: CompiledLeaderboard, now: number): number {
  const status = modelBoardStatus(board, now);
  if (board.keepFinishedRuns === null || status === "scheduled") return 0;
  const day = Math.floor(now / 86_400_000);
  // The run holding the day (the active one), or the day before the end (the last one).
  let current = 0;
  while (runFirstDay(board, current + 1) <= (status === "active" ? day : board.endDay! - 1)) current++;
  const newestFinished = status === "active" ? current - 1 : current;
  return Math.max(0, newestFinished - board.keepFinishedRuns + 1);
}

/** The first UTC day of a board's run k: k intervals of days, months or years after its start (a 31st kept as the month's last day). */
function runFirstDay(board: CompiledLeaderboard, run: number): number {
  if (board.runUnit === null) return run === 0 ? board.startDay : Infinity;
  if (board.runUnit === "day") return board.startDay + run * board.runInterval!;
  const { y, m, d } = dayToDate(board.startDay);
  const months = m - 1 + run * board.runInterval! * (board.runUnit === "year" ? 12 : 1);
  const year = y + Math.floor(months / 12);
  const month = (months % 12) + 1;
  return Math.min(dateToDay(year, month, d), dateToDay(year, month + 1, 1) - 1);
}

/** A boost's status (trophy-compat §5.5): finished from its end on (an empty window, a cancelled scheduled boost, at once), scheduled before its start, else active. */
export function modelBoostStatus(start: number, end: number | null, now: number): "scheduled" | "active" | "finished" {
  if (end !== null && (now >= end || end <= start)) return "finished";
  return now < start ? "scheduled" : "active";
}

/* ---------- Identify, completion, time triggers, admin: the other writers of user state ---------- */

export type ModelUpsertMode = "upsert" | "update" | "prefs";

/**
 * lua applyProfile + identify: the user of an identify or completion request, created (with
 * what first identification does) when new, its `updated` moved when the profile changed.
 */
function identifyUser(tenant: CompiledTenant, state: ModelState, userId: string, profile: [string, string][], now: number) {
  const existing = state.users.get(userId);
  const localDay = localDayIndex(now, profile.find(([f]) => f === "tz")?.[1] ?? "UTC");
  const user = existing ?? newUser(now, localDay);
  const req = new UserRequest(tenant, state, userId, user, now);
  const zoneChanged = existing !== undefined && changesZone(user, profile);
  const changed = applyProfile(user, profile);
  // lua user-3.lua / complete-4.lua: a new zone moves a live streak's deadline to its calendar.
  const rule = tenant.streak;
  if (zoneChanged && rule) {
    const tz = user.profile.get("tz")!;
    const nowPeriod = periodOfDay(localDayIndex(now, tz), rule.frequency);
    moveCalendar(user.streak, rule.frequency, tz, nowPeriod);
    placeDeadline(state, userId, user.streak, rule.frequency, tz, nowPeriod, now);
  }
  if (!existing) {
    state.users.set(userId, user);
    state.userCount += 1;
    createUser(req, localDay);
  } else if (changed) user.updated = now;
  return { user, req };
}

/** lua/user-3.lua (without preferences, which the model does not need for points). */
export function applyUpsert(
  tenant: CompiledTenant,
  state: ModelState,
  userId: string,
  mode: ModelUpsertMode,
  profile: [string, string][],
  now: number,
): { status: "created" | "updated" | "missing"; points: PointsChange[] } {
  const existing = state.users.get(userId);
  if (!existing && mode !== "upsert") return { status: "missing", points: [] };
  const { user, req } = identifyUser(tenant, state, userId, profile, now);
  const points = req.commit();
  recordPointsSeries(user, now, points);
  logRecord(tenant, user, "us", !existing, req.completed, points);
  const boards = updateBoards(tenant, state, userId, user, now, { metricKey: null, value: 0, points, streakLength: null });
  journal(state, { userId, ms: now, ...placeOf(tenant, user, now), created: !existing, completed: req.completed, points, extended: null, lost: 0, consumed: 0, earned: 0, granted: 0, boards });
  return { status: existing ? "updated" : "created", points };
}

/** lua/complete-4.lua. */
export function applyComplete(
  tenant: CompiledTenant,
  state: ModelState,
  userId: string,
  achievementKey: string,
  profile: [string, string][],
  now: number,
): { status: "completed"; completed: string[]; points: PointsChange[] } | { status: "already"; achievedAt: number; completed: string[]; points: PointsChange[] } | { status: "ineligible" } {
  const achievement = tenant.achievementByKey.get(achievementKey)!;
  const existing = state.users.get(userId);
  const done = existing?.achievements.get(achievementKey);
  if (existing !== undefined && done !== undefined) {
    // Met again though done: composites above it with every part done complete now (added to
    // the tenant file since); the profile sent is not applied.
    const req = new UserRequest(tenant, state, userId, existing, now);
    req.complete(achievement);
    if (req.completed.length === 0) return { status: "already", achievedAt: done, completed: [], points: [] };
    const points = req.commit();
    recordPointsSeries(existing, now, points);
    logRecord(tenant, existing, "ac", false, req.completed, points);
    const boards = updateBoards(tenant, state, userId, existing, now, { metricKey: null, value: 0, points, streakLength: null });
    journal(state, { userId, ms: now, ...placeOf(tenant, existing, now), created: false, completed: req.completed, points, extended: null, lost: 0, consumed: 0, earned: 0, granted: 0, boards });
    return { status: "already", achievedAt: done, completed: req.completed, points };
  }
  // Eligibility with the attributes this request sends, before anything is written.
  const attributes = new Map(existing?.attributes ?? []);
  for (const [field, value] of profile) if (field.startsWith("ua:")) attributes.set(field.slice(3), value);
  if (!userFiltersMatch(achievement.userAttributes, attributes)) return { status: "ineligible" };
  const { user, req } = identifyUser(tenant, state, userId, profile, now);
  req.complete(achievement);
  const points = req.commit();
  recordPointsSeries(user, now, points);
  logRecord(tenant, user, "ac", existing === undefined, req.completed, points);
  const boards = updateBoards(tenant, state, userId, user, now, { metricKey: null, value: 0, points, streakLength: null });
  journal(state, { userId, ms: now, ...placeOf(tenant, user, now), created: existing === undefined, completed: req.completed, points, extended: null, lost: 0, consumed: 0, earned: 0, granted: 0, boards });
  return { status: "completed", completed: req.completed, points };
}

/**
 * lua/timeTick-4.lua for every time trigger, in config order: each due user is paid every
 * interval that has fully elapsed, as one award (each interval boosted as at its due instant),
 * and is next due one interval after the last.
 */
export function applyTimeTicks(tenant: CompiledTenant, state: ModelState, now: number): void {
  for (const t of triggersOf(tenant, (x) => x.type === "time")) {
    if (t.type !== "time") continue;
    const due = state.timeDue.get(triggerId(t));
    if (!due) continue;
    // The service pays shard by shard, each shard in due order (ZRANGEBYSCORE: score, then member).
    const order = [...due].sort(([ua, da], [ub, db]) => shardOf(ua, tenant.shards) - shardOf(ub, tenant.shards) || da - db || (ua < ub ? -1 : ua > ub ? 1 : 0));
    for (const [userId, dueAt] of order) {
      if (dueAt > now) continue;
      const user = state.users.get(userId)!;
      const n = Math.floor((now - dueAt) / t.intervalMs) + 1;
      const req = new UserRequest(tenant, state, userId, user, now);
      const system = tenant.systemByKey.get(t.systemKey)!;
      if (req.matches(t.userAttributes)) req.award(system, t.key, intervalPoints(req.boostWindows(system), t.points, dueAt, t.intervalMs, n), true);
      const points = req.commit();
      recordPointsSeries(user, now, points);
      logRecord(tenant, user, "tt", false, req.completed, points);
      const boards = updateBoards(tenant, state, userId, user, now, { metricKey: null, value: 0, points, streakLength: null });
      journal(state, { userId, ms: now, ...placeOf(tenant, user, now), created: false, completed: req.completed, points, extended: null, lost: 0, consumed: 0, earned: 0, granted: 0, boards });
      due.set(userId, dueAt + n * t.intervalMs);
    }
  }
}

/**
 * lua/userBoost-3.lua: live boosts are kept; a finished one is dropped once no unpaid interval of
 * the system's time triggers is due before its end (a catch-up boosts each interval by the boosts
 * active at its due instant); ending keeps an active one until now (endedBoostEnd: 1 ms after its
 * start when it started this millisecond).
 */
export function applyUserBoost(
  tenant: CompiledTenant,
  state: ModelState,
  userId: string,
  systemKey: string,
  op: "add" | "end",
  boost: UserBoost,
  now: number,
): boolean {
  const user = state.users.get(userId);
  if (!user) return false;
  let keepAfter = now;
  for (const t of tenant.systemByKey.get(systemKey)!.triggers) {
    const due = t.type === "time" ? state.timeDue.get(triggerId(t))?.get(userId) : undefined;
    if (due !== undefined && due < keepAfter) keepAfter = due;
  }
  let found = false;
  const kept: UserBoost[] = [];
  for (const b of user.boosts.get(systemKey) ?? []) {
    if (b.end !== null && b.end <= now) {
      if (b.end > keepAfter) kept.push(b);
      continue;
    }
    if (b.id === boost.id) {
      found = true;
      if (b.start <= now) kept.push({ ...b, end: endedBoostEnd(b.start, now) });
    } else kept.push(b);
  }
  if (op === "add") kept.push(boost);
  else if (!found) return false;
  user.boosts.set(systemKey, kept);
  return true;
}

/** lua/streakAdmin-9.lua: settle, then grant freezes or restore the streak ("settle": only settle, the expiry sweep's op). */
export function applyStreakAdmin(
  tenant: CompiledTenant,
  state: ModelState,
  userId: string,
  op: "freeze" | "restore" | "settle",
  amountOrWindowStart: number,
  now: number,
):
  | { status: "missing" }
  | { status: "frozen"; granted: number }
  | { status: "restored"; length: number }
  | { status: "nothing-to-restore" }
  | { status: "already-longest" }
  | { status: "settled"; consumed: number; lost: number } {
  const user = state.users.get(userId);
  if (!user) {
    // The sweep's settlement removes what the streak indexes hold of a user without state.
    if (op === "settle") {
      state.streakActive.delete(userId);
      state.streakDeadline.delete(userId);
    }
    return { status: "missing" };
  }
  const rule = tenant.streak!;
  const tz = user.profile.get("tz") ?? "UTC";
  const nowDay = localDayIndex(now, tz);
  const nowPeriod = periodOfDay(nowDay, rule.frequency);
  const s = user.streak;
  const settlement = settleStreak(tenant, s, user.createdDay, nowDay, nowPeriod);
  recordSettlement(state, userId, s, settlement);
  placeDeadline(state, userId, s, rule.frequency, tz, nowPeriod, now);
  const settled = { userId, ms: now, tz, day: nowDay, period: nowPeriod, created: false, completed: [], points: [], extended: null, lost: settlement.lost, consumed: settlement.consumed, earned: settlement.earned };
  if (op === "settle") {
    const boards = updateBoards(tenant, state, userId, user, now, { metricKey: null, value: 0, points: [], streakLength: settlement.lost > 0 ? s.length : null });
    journal(state, { ...settled, granted: 0, boards });
    return { status: "settled", consumed: settlement.consumed, lost: settlement.lost };
  }
  const result = streakAdminOp(state, userId, s, op, amountOrWindowStart, rule, tz, nowPeriod, now);
  const restored = result.status === "restored";
  const boards = updateBoards(tenant, state, userId, user, now, { metricKey: null, value: 0, points: [], streakLength: restored || settlement.lost > 0 ? s.length : null });
  journal(state, { ...settled, granted: result.status === "frozen" ? result.granted : 0, boards });
  return result;
}

/**
 * src/jobs/streak-expiry.ts sweepExpiredStreaks: every user whose streak deadline has passed
 * (sd <= now) settled as lua/streakAdmin-9.lua "settle" settles, in the stored zone, shard by
 * shard in the index's order (deadline, then user id). Returns how many settlements changed
 * something (a freeze consumed or the streak lost), as the sweep counts them.
 */
export function applyStreakSweep(tenant: CompiledTenant, state: ModelState, now: number): number {
  if (!tenant.streak) return 0;
  const due = [...state.streakDeadline]
    .filter(([, at]) => at <= now)
    .sort(([ua, da], [ub, db]) => shardOf(ua, tenant.shards) - shardOf(ub, tenant.shards) || da - db || (ua < ub ? -1 : ua > ub ? 1 : 0));
  let changed = 0;
  for (const [userId] of due) {
    const result = applyStreakAdmin(tenant, state, userId, "settle", 0, now);
    if (result.status === "settled" && (result.consumed > 0 || result.lost > 0)) changed += 1;
  }
  return changed;
}

function streakAdminOp(
  state: ModelState,
  userId: string,
  s: ModelStreak,
  op: "freeze" | "restore",
  amountOrWindowStart: number,
  rule: NonNullable<CompiledTenant["streak"]>,
  tz: string,
  nowPeriod: number,
  now: number,
) {
  if (op === "freeze") {
    const held = s.freezes ?? 0;
    const granted = Math.max(0, Math.min(amountOrWindowStart, rule.freezes!.max - held));
    if (granted > 0) s.freezes = held + granted;
    return { status: "frozen" as const, granted };
  }
  let best = 0;
  for (const [period, member] of state.streakHistory.get(userId) ?? []) {
    if (period >= amountOrWindowStart) best = Math.max(best, Number(member.split(":")[1]));
  }
  const last = coveredPeriod(s);
  const alive = s.length > 0 && last !== null && last >= nowPeriod - 1;
  if (best === 0) return { status: "nothing-to-restore" as const };
  if (alive && s.length >= best) return { status: "already-longest" as const };
  const newLast = last !== null && last >= nowPeriod ? last : nowPeriod - 1;
  // lua streakAdmin: `extended` kept when the restored streak keeps its last period, else now.
  if (newLast !== last) s.extendedAt = now;
  s.length = best;
  s.startPeriod = newLast - best + 1;
  s.startDay = null; // lua streakAdmin: a restored streak shows its first period's first day
  s.lastPeriod = newLast;
  // The history holds the restored streak: its periods extended one by one, 1 to best.
  const history = state.streakHistory.get(userId) ?? new Map<number, string>();
  for (let i = 1; i <= best; i++) history.set(s.startPeriod + i - 1, `${s.startPeriod + i - 1}:${i}`);
  state.streakHistory.set(userId, history);
  if (best > s.best) {
    s.best = best;
    state.streakBest.set(userId, best);
  }
  state.streakActive.set(userId, best);
  // As placeDeadline: a last period ahead of now (a move west) is lost as the current one.
  state.streakDeadline.set(userId, streakDeadline(newLast >= nowPeriod ? nowPeriod : nowPeriod - 1, rule.frequency, tz));
  return { status: "restored" as const, length: best };
}
