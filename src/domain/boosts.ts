import type { Rounding } from "../config/compiled.js";

/**
 * Boost arithmetic (spec rules 6 and 7). Mirrors lua/includes/math.lua `boosted` and
 * lua/includes/points.lua `boostOf`.
 *
 * - Active boosts multiply: 2 × 1.5 × 3 = 9.
 * - Only grants are boosted: a deduction (a metering charge) is never multiplied.
 * - When stacked boosts disagree on rounding, the most conservative mode wins (down, then
 *   nearest, then up): stacking never pays more than the stingiest active boost's rule. Only
 *   decimal multipliers have a say: a rounding mode applies only to them (spec: Points boost).
 * - A product that misses an integer by float noise is that integer (10 × 1.1 = 11 under "up").
 */
const ROUNDING_RANK: Record<Rounding, number> = { down: 1, nearest: 2, up: 3 };

export interface ActiveBoost {
  multiplier: number;
  rounding: Rounding;
}

export function combineBoosts(boosts: readonly ActiveBoost[]): { multiplier: number; rounding: Rounding } {
  let multiplier = 1;
  let rounding: Rounding | null = null;
  for (const b of boosts) {
    multiplier *= b.multiplier;
    // A rounding mode applies only to a decimal multiplier (spec: Points boost): a whole one's
    // (`down` by default) takes no part in the choice (lua/includes/points.lua boostAt).
    if (!Number.isInteger(b.multiplier) && (rounding === null || ROUNDING_RANK[b.rounding] < ROUNDING_RANK[rounding])) rounding = b.rounding;
  }
  return { multiplier, rounding: rounding ?? "down" };
}

export function boostedPoints(amount: number, multiplier: number, rounding: Rounding): number {
  if (amount <= 0 || multiplier === 1) return amount;
  const x = amount * multiplier;
  const nearest = Math.floor(x + 0.5);
  if (Math.abs(x - nearest) < 1e-9 * Math.max(1, Math.abs(x))) return nearest;
  if (rounding === "up") return Math.ceil(x);
  if (rounding === "nearest") return nearest;
  return Math.floor(x);
}

/**
 * A window is active from start (inclusive) to end (exclusive), by the service clock. An empty
 * window (end <= start: a scheduled boost cancelled by DELETE) never runs, so it is finished
 * at once rather than "scheduled" until its start.
 */
export function boostStatus(start: number, end: number | null, now: number): "scheduled" | "active" | "finished" {
  if (end !== null && (now >= end || end <= start)) return "finished";
  if (now < start) return "scheduled";
  return "active";
}

/**
 * The end DELETE gives a live user boost at `now` (lua/userBoost-3.lua does the same): a
 * scheduled one is cancelled (an empty window, end = start); an active one finishes now, but one
 * that started in this very millisecond ends 1 ms after it. Grants in that millisecond were
 * boosted, so its window must not read as empty ("never ran"), which would also drop its
 * points.boost_finished.
 */
export function endedBoostEnd(start: number, now: number): number {
  return start > now ? start : Math.max(now, start + 1);
}

/** A user boost as kept in the state field bo:<sys>: "id,multiplier,start,end,rounding;...". */
export interface UserBoost {
  id: string;
  multiplier: number;
  start: number;
  end: number | null;
  rounding: Rounding;
}

export function encodeUserBoosts(boosts: readonly UserBoost[]): string {
  return boosts.map((b) => `${b.id},${b.multiplier},${b.start},${b.end ?? ""},${b.rounding}`).join(";");
}


/** A boost window as the interval rule needs it: global boosts (matching the user) and the user's own alike. */
export interface BoostWindow {
  multiplier: number;
  rounding: Rounding;
  start: number;
  end: number | null;
}

/** The combined boost of the windows active at instant t (start inclusive, end exclusive). */
export function boostAtInstant(windows: readonly BoostWindow[], t: number): { multiplier: number; rounding: Rounding } {
  return combineBoosts(windows.filter((w) => w.start <= t && (w.end === null || t < w.end)));
}

/**
 * The points of n intervals of a time trigger paying `points` each, the first due at `first`,
 * one every `interval` ms (lua/includes/points.lua intervalPoints). Points are earned at their
 * due instant, so each interval is boosted by the boosts active then, not at the later tick that
 * pays it (spec: "points earned in the window are multiplied"). The intervals between two boost
 * changes form one run, boosted together: one rounding per run, as n crossings of a metric
 * trigger in one event are.
 */
export function intervalPoints(windows: readonly BoostWindow[], points: number, first: number, interval: number, n: number): number {
  if (points <= 0) return n * points;
  let total = 0;
  for (let i = 0; i < n; ) {
    const t = first + i * interval;
    const { multiplier, rounding } = boostAtInstant(windows, t);
    let change: number | null = null;
    for (const w of windows) {
      for (const x of [w.start, w.end]) if (x !== null && x > t && (change === null || x < change)) change = x;
    }
    const k = change === null ? n - i : Math.min(n - i, Math.ceil((change - t) / interval));
    total += boostedPoints(k * points, multiplier, rounding);
    i += k;
  }
  return total;
}
