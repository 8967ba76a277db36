import type { CompiledStreak } from "../config/compiled.js";
import { formatDay, periodEndDay, periodStartDay, type Frequency } from "./periods.js";
import type { StreakState } from "./outcome.js";

/**
 * The streak as a reader sees it at period `nowPeriod` of the user's calendar.
 *
 * A streak is alive while its last extended period is the current one or the one before:
 * it can still be extended in the current period. `expires` is the last day of the period
 * after the last extension (trophy-compat §5.4: "expires one full period after periodEnd"
 * when extended in the current period). A zone change that moves the user's calendar back
 * keeps the streak alive (the last period is then ahead of "now").
 */
/** Streak history periods kept per user: about two years of daily periods, enough for restore windows (trophy-compat §6.6) and wrapped. */
export const STREAK_HISTORY_KEPT = 800;

export interface StreakView {
  length: number;
  frequency: Frequency;
  started: string | null;
  periodStart: string;
  periodEnd: string;
  expires: string | null;
}

export function isAlive(state: StreakState, nowPeriod: number): boolean {
  return state.lastPeriod !== null && state.length > 0 && state.lastPeriod >= nowPeriod - 1;
}

export function viewStreak(rule: CompiledStreak | null, state: StreakState, nowPeriod: number): StreakView {
  const frequency = rule?.frequency ?? "daily";
  const alive = rule !== null && isAlive(state, nowPeriod);
  return {
    length: alive ? state.length : 0,
    frequency,
    started: alive && state.startPeriod !== null ? formatDay(periodStartDay(state.startPeriod, frequency)) : null,
    periodStart: formatDay(periodStartDay(nowPeriod, frequency)),
    periodEnd: formatDay(periodEndDay(nowPeriod, frequency)),
    expires: alive ? formatDay(periodEndDay(state.lastPeriod! + 1, frequency)) : null,
  };
}
