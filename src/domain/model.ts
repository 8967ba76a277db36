import type { CompiledSystem, CompiledTenant } from "../config/compiled.js";
import { floorDiv, MAX_TOTAL_MICRO } from "./decimal.js";
import { LaurelError } from "./errors.js";
import { levelIndex } from "./levels.js";
import type { AwardRecord, EventOutcome, PointsChange, StreakState } from "./outcome.js";
import { STREAK_HISTORY_KEPT } from "./streak.js";
import { localDayIndex, periodOfDay, streakDeadline } from "./periods.js";

/**
 * The reference model: every rule of the event path in plain TypeScript over in-memory state.
 * It is the test oracle (DESIGN: "Tests you can trust"): property tests drive the same random
 * sequences through the HTTP API and through this model and require identical results. It reads
 * the whole CompiledTenant, where Lua reads rules narrowed per metric, so the narrowing is checked
 * too. Keep it obvious rather than fast; every rule cites the spec where the spec has it.
 */
export interface ModelStreak {
  length: number;
  startPeriod: number | null;
  lastPeriod: number | null;
  best: number;
  /** Period whose values are being accumulated, and the per-metric values in it (micro). */
  accPeriod: number | null;
  acc: Map<string, number>;
}

export interface ModelUser {
  created: number;
  updated: number;
  /** Profile fields by state-hash name: em, nm, tz, se, dt, ua:<attr>. */
  profile: Map<string, string>;
  metrics: Map<string, number>;
  points: Map<string, { total: number; seq: number }>;
  highWater: Map<string, number>;
  achievements: Map<string, number>;
  streak: ModelStreak;
  idempotency: Map<string, string>;
  /** Newest first, at most AWARDS_KEPT. */
  awards: Map<string, AwardRecord[]>;
}

export interface ModelState {
  users: Map<string, ModelUser>;
  userCount: number;
  completions: Map<string, number>;
  /** "<system>:<level>" → users at that level. */
  levelCounts: Map<string, number>;
  /** Users with a streak: current length, the instant it is lost, longest ever ({t:s}:sa, sd, sb). */
  streakActive: Map<string, number>;
  streakDeadline: Map<string, number>;
  streakBest: Map<string, number>;
  /** Per user: extended period → length ({t:s}:sh:<user>). */
  streakHistory: Map<string, Map<number, number>>;
}

export const AWARDS_KEPT = 100;

export function emptyState(): ModelState {
  return {
    users: new Map(),
    userCount: 0,
    completions: new Map(),
    levelCounts: new Map(),
    streakActive: new Map(),
    streakDeadline: new Map(),
    streakBest: new Map(),
    streakHistory: new Map(),
  };
}

export interface ModelEventInput {
  metricKey: string;
  userId: string;
  now: number;
  eventId: string;
  idempotencyKey: string | null;
  valueMicro: number;
  tz: string | null;
  profile: [string, string][];
}

export interface ModelEventResult {
  outcome: EventOutcome;
  tz: string;
  nowPeriod: number;
}

function newUser(now: number): ModelUser {
  return {
    created: now,
    updated: now,
    profile: new Map(),
    metrics: new Map(),
    points: new Map(),
    highWater: new Map(),
    achievements: new Map(),
    streak: { length: 0, startPeriod: null, lastPeriod: null, best: 0, accPeriod: null, acc: new Map() },
    idempotency: new Map(),
    awards: new Map(),
  };
}

function bump(map: Map<string, number>, key: string, by: number): void {
  map.set(key, (map.get(key) ?? 0) + by);
}

function streakState(user: ModelUser | undefined): StreakState {
  if (!user) return { length: 0, startPeriod: null, lastPeriod: null };
  return { length: user.streak.length, startPeriod: user.streak.startPeriod, lastPeriod: user.streak.lastPeriod };
}

/** Accumulates awards per system for one request, applying maxPoints and the zero floor. */
class PointsLedger {
  private readonly changes = new Map<string, PointsChange & { seq: number }>();

  constructor(private readonly user: ModelUser, private readonly now: number) {}

  award(system: CompiledSystem, triggerKey: string, amount: number): void {
    let change = this.changes.get(system.key);
    if (!change) {
      const current = this.user.points.get(system.key) ?? { total: 0, seq: 0 };
      change = { systemKey: system.key, added: 0, total: current.total, before: current.total, awards: [], seq: current.seq };
      this.changes.set(system.key, change);
    }
    const total = change.total;
    let next: number;
    if (amount > 0) {
      // Spec rule 5: maxPoints limits the total; a total above a lowered cap is kept.
      next = total >= system.cap ? total : Math.min(total + amount, system.cap);
    } else {
      // Spec rule 2 and DESIGN: a deduction never takes the total below zero.
      next = Math.min(Math.max(total + amount, 0), total);
    }
    const applied = next - total;
    if (applied === 0) return;
    change.total = next;
    change.added += applied;
    change.seq += 1;
    change.awards.push({ seq: change.seq, ms: this.now, awarded: applied, total: next, triggerKey });
  }

  /** Commits changed systems to the user and the shard counters; returns them in first-award order. */
  commit(tenant: CompiledTenant, state: ModelState): PointsChange[] {
    const out: PointsChange[] = [];
    for (const change of this.changes.values()) {
      if (change.awards.length === 0) continue;
      const system = tenant.systemByKey.get(change.systemKey)!;
      this.user.points.set(system.key, { total: change.total, seq: change.seq });
      const before = levelIndex(system.levels, change.before);
      const after = levelIndex(system.levels, change.total);
      if (before !== after) {
        if (before > 0) bump(state.levelCounts, `${system.key}:${system.levels[before - 1]!.key}`, -1);
        if (after > 0) bump(state.levelCounts, `${system.key}:${system.levels[after - 1]!.key}`, 1);
      }
      const list = this.user.awards.get(system.key) ?? [];
      const merged = [...[...change.awards].reverse(), ...list].slice(0, AWARDS_KEPT);
      this.user.awards.set(system.key, merged);
      const { seq: _seq, ...plain } = change;
      out.push(plain);
    }
    return out;
  }
}

export function applyEvent(tenant: CompiledTenant, state: ModelState, input: ModelEventInput): ModelEventResult {
  const existing = state.users.get(input.userId);
  const tz = input.tz ?? existing?.profile.get("tz") ?? "UTC";
  const frequency = tenant.streak?.frequency ?? "daily";
  const nowPeriod = periodOfDay(localDayIndex(input.now, tz), frequency);
  const oldTotal = existing?.metrics.get(input.metricKey) ?? 0;

  // Spec: idempotency rules 1-4; a replay changes nothing and reports the current state.
  if (input.idempotencyKey !== null && existing) {
    const original = existing.idempotency.get(`${input.metricKey}:${input.idempotencyKey}`);
    if (original !== undefined) {
      return { outcome: { kind: "replay", eventId: original, totalMicro: oldTotal, streak: streakState(existing) }, tz, nowPeriod };
    }
  }

  const newTotal = oldTotal + input.valueMicro;
  if (newTotal > MAX_TOTAL_MICRO || newTotal < -MAX_TOTAL_MICRO) throw new LaurelError("TOTAL_OUT_OF_RANGE");

  const created = !existing;
  const user = existing ?? newUser(input.now);
  if (created) {
    state.users.set(input.userId, user);
    state.userCount += 1;
  }
  if (input.idempotencyKey !== null) user.idempotency.set(`${input.metricKey}:${input.idempotencyKey}`, input.eventId);

  let profileChanged = false;
  for (const [field, value] of input.profile) {
    if (user.profile.get(field) !== value) {
      user.profile.set(field, value);
      profileChanged = true;
    }
  }
  if (profileChanged && !created) user.updated = input.now;

  const ledger = new PointsLedger(user, input.now);
  // First identification (trophy-compat §5.5 user_creation): once, when the user is created.
  if (created) {
    for (const system of tenant.systems) {
      for (const t of system.triggers) if (t.type === "user_creation") ledger.award(system, t.key, t.points);
    }
  }

  // Spec rule 1 and DESIGN: each newly crossed multiple of the threshold above the high-water mark pays once.
  user.metrics.set(input.metricKey, newTotal);
  for (const system of tenant.systems) {
    for (const t of system.triggers) {
      if (t.type !== "metric" || t.metric !== input.metricKey) continue;
      const hwKey = `${system.key}.${t.key}`;
      const hw = user.highWater.get(hwKey) ?? 0;
      if (newTotal > hw) {
        user.highWater.set(hwKey, newTotal);
        const crossings = floorDiv(newTotal, t.thresholdMicro) - floorDiv(hw, t.thresholdMicro);
        if (crossings > 0) ledger.award(system, t.key, crossings * t.points);
      }
    }
  }

  // Streak: the period's values accumulate; the first period in which the threshold is met extends it.
  let extended = false;
  const rule = tenant.streak;
  if (rule && rule.metrics.some((m) => m.metric === input.metricKey)) {
    const s = user.streak;
    if (s.accPeriod !== nowPeriod) {
      for (const m of rule.metrics) if (s.acc.has(m.metric)) s.acc.set(m.metric, 0);
      s.accPeriod = nowPeriod;
    }
    s.acc.set(input.metricKey, (s.acc.get(input.metricKey) ?? 0) + input.valueMicro);
    const reached = rule.metrics.map((m) => (s.acc.get(m.metric) ?? 0) >= m.thresholdMicro);
    const met = rule.mode === "any" ? reached.some(Boolean) : reached.every(Boolean);
    if (met && (s.lastPeriod === null || nowPeriod > s.lastPeriod)) {
      if (s.lastPeriod !== null && s.lastPeriod === nowPeriod - 1 && s.length > 0) s.length += 1;
      else {
        s.length = 1;
        s.startPeriod = nowPeriod;
      }
      s.lastPeriod = nowPeriod;
      if (s.length > s.best) {
        s.best = s.length;
        state.streakBest.set(input.userId, s.best);
      }
      state.streakActive.set(input.userId, s.length);
      state.streakDeadline.set(input.userId, streakDeadline(nowPeriod, rule.frequency, tz));
      const history = state.streakHistory.get(input.userId) ?? new Map<number, number>();
      history.set(nowPeriod, s.length);
      if (nowPeriod % 64 === 0) for (const p of history.keys()) if (p <= nowPeriod - STREAK_HISTORY_KEPT) history.delete(p);
      state.streakHistory.set(input.userId, history);
      extended = true;
    }
  }

  // Metric achievements: completed once, when the total reaches the value.
  const achievements: string[] = [];
  for (const a of tenant.achievements) {
    if (a.type === "metric" && a.metric === input.metricKey && !user.achievements.has(a.key) && newTotal >= a.valueMicro) {
      user.achievements.set(a.key, input.now);
      bump(state.completions, a.key, 1);
      achievements.push(a.key);
    }
  }

  const points = ledger.commit(tenant, state);
  return {
    outcome: {
      kind: "processed",
      eventId: input.eventId,
      totalMicro: newTotal,
      streak: streakState(user),
      extended,
      achievements,
      points,
      created,
    },
    tz,
    nowPeriod,
  };
}

/** The metering read in the model: null for an unknown user. */
export function readUserPoints(state: ModelState, userId: string, systemKey: string, awards: number) {
  const user = state.users.get(userId);
  if (!user) return null;
  return { total: user.points.get(systemKey)?.total ?? 0, awards: (user.awards.get(systemKey) ?? []).slice(0, awards) };
}
