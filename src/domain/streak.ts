import type { CompiledStreak, CompiledTenant } from "../config/compiled.js";
import { formatDay, periodEndDay, periodOfDay, periodStartDay, type Frequency } from "./periods.js";
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
  /** Present only when the tenant has freezes (trophy-compat §3.3). */
  freezes?: number;
  maxFreezes?: number;
  freezeAutoEarnInterval?: number;
  freezeAutoEarnAmount?: number;
}

/**
 * lua lastCovered (state.lua): the last period the streak covers on the user's calendar, the
 * stored last period or the period that holds the user's last work (the first meeting of the
 * threshold in a period, or a new count of full thresholds in it), whichever is later. They differ only after a zone change east, which
 * maps the work's instant onto the new calendar (model.ts moveCalendar): a move east neither
 * skips a local day nor extends twice for one instant.
 */
export function coveredPeriod(state: Pick<StreakState, "lastPeriod" | "metPeriod">): number | null {
  const last = state.lastPeriod;
  if (last === null) return null;
  const met = state.metPeriod;
  return met !== null && met !== undefined && met > last ? met : last;
}

export function isAlive(state: StreakState, nowPeriod: number): boolean {
  return state.lastPeriod !== null && state.length > 0 && state.lastPeriod >= nowPeriod - 1;
}

/**
 * `started` (trophy-compat §3.3: "date the streak began"): the local day of the extension that
 * began it (lua ssd), while that day is in its first period; a daily streak's is its first
 * period, and a streak an admin restore reinstated or begun by a process that predates the day
 * shows its first period's first day. At most today: a zone change west carries the stored
 * numbers over, and a streak begun on the old calendar's "tomorrow" (or in its next week or
 * month) read as starting after today.
 */
function startedDay(startPeriod: number, startDay: number | null, frequency: Frequency, nowDay: number): number {
  return Math.min(streakFirstDay(startPeriod, startDay, frequency), nowDay);
}

/** The day a streak that began in `startPeriod` began: the stored start day (ssd) while it is in that period, else the period's first day. */
export function streakFirstDay(startPeriod: number, startDay: number | null, frequency: Frequency): number {
  return startDay !== null && periodOfDay(startDay, frequency) === startPeriod ? startDay : periodStartDay(startPeriod, frequency);
}

/**
 * `state` must be settled at `nowPeriod` (settleStreak in model.ts): the event script settles
 * before it replies, and readers settle a copy (settledStreak) without writing.
 */
export function viewStreak(rule: CompiledStreak | null, state: StreakState, nowDay: number, nowPeriod: number): StreakView {
  const frequency = rule?.frequency ?? "daily";
  const alive = rule !== null && isAlive(state, nowPeriod);
  const view: StreakView = {
    length: alive ? state.length : 0,
    frequency,
    started: alive && state.startPeriod !== null ? formatDay(startedDay(state.startPeriod, state.startDay ?? null, frequency, nowDay)) : null,
    periodStart: formatDay(periodStartDay(nowPeriod, frequency)),
    periodEnd: formatDay(periodEndDay(nowPeriod, frequency)),
    expires: alive ? formatDay(periodEndDay(state.lastPeriod! + 1, frequency)) : null,
  };
  const f = rule?.freezes;
  if (f) {
    view.freezes = state.freezes ?? 0;
    view.maxFreezes = f.max;
    if (f.everyDays > 0) {
      view.freezeAutoEarnInterval = f.everyDays;
      view.freezeAutoEarnAmount = f.amount;
    }
  }
  return view;
}

/** The parts of a streak that settlement moves. */
export interface SettlingStreak {
  length: number;
  lastPeriod: number | null;
  /** The period of the user's last work on the current calendar (coveredPeriod). */
  metPeriod?: number | null;
  freezes: number | null;
  grants: number;
  grantDay?: number | null;
}

export interface StreakSettlement {
  consumed: number;
  earned: number;
  lost: number;
  frozen: number[];
}

/**
 * lua settleStreak. In local-day order, credits auto-earned freezes and lets each period that
 * ended without an extension consume one; with none left the streak is lost (length 0). It
 * settles from the last period covered (coveredPeriod, as the Lua from lastCovered); the streak's
 * lastPeriod changes only when a freeze is consumed.
 * Pure on its inputs: the streak read uses it to show the settled state without writing.
 */
export function settleStreak(
  tenant: CompiledTenant,
  streak: SettlingStreak,
  createdDay: number | null,
  nowDay: number,
  nowPeriod: number,
): StreakSettlement {
  const out: StreakSettlement = { consumed: 0, earned: 0, lost: 0, frozen: [] };
  const rule = tenant.streak;
  if (!rule) return out;
  let last = coveredPeriod(streak);
  let pending: number | null = streak.length > 0 && last !== null && last < nowPeriod - 1 ? last + 1 : null;
  const f = rule.freezes;
  if (f) {
    let held = streak.freezes ?? 0;
    let grants = streak.grants;
    const every = f.everyDays > 0 && createdDay !== null ? f.everyDays : null;
    // The day of the last grant credited; grants come `everyDays` apart from it, so a changed
    // everyDays takes effect from the last grant (counted from the day of first identification,
    // a raised one left users without a grant for as many periods as they had been credited).
    let lastGrant = every !== null ? (streak.grantDay ?? createdDay! + grants * every) : null;
    for (let guard = 0; guard < 100_000; guard++) {
      const consumeDay = pending !== null ? periodStartDay(pending + 1, rule.frequency) : null;
      const nextGrant = lastGrant !== null ? lastGrant + every! : null;
      if (nextGrant !== null && nextGrant <= nowDay && (consumeDay === null || nextGrant <= consumeDay)) {
        const due = consumeDay === null ? Math.floor((nowDay - lastGrant!) / every!) : 1;
        // Grants fill up to the maximum and take nothing away: a user holding more (the tenant
        // file lowered `max`) keeps them, and earns none until below it (lua settleStreak).
        const before = held;
        if (held < f.max) held = Math.min(f.max, held + due * f.amount);
        out.earned += held - before;
        grants += due;
        lastGrant = lastGrant! + due * every!;
      } else if (consumeDay !== null && pending !== null) {
        if (held === 0) {
          // No freeze left: the streak is lost; grants due later are still credited.
          pending = null;
          continue;
        }
        held -= 1;
        out.consumed += 1;
        out.frozen.push(pending);
        streak.lastPeriod = last = pending;
        pending = pending + 1 <= nowPeriod - 1 ? pending + 1 : null;
      } else break;
    }
    streak.freezes = held;
    streak.grants = grants;
    // Kept from the first settlement on (lua writes fgd when absent or moved), so that a later
    // change of everyDays finds it.
    if (lastGrant !== null) streak.grantDay = lastGrant;
  }
  if (streak.length > 0 && last !== null && last < nowPeriod - 1) {
    out.lost = streak.length;
    streak.length = 0;
  }
  return out;
}


/**
 * A settled copy of a stored streak at (nowDay, nowPeriod), for readers: writes nothing. Its
 * lastPeriod is the last period covered (coveredPeriod), which viewStreak reads; `settlement` is
 * what settling did (the freezes a read shows as used).
 */
export function settleCopy(tenant: CompiledTenant, state: StreakState, nowDay: number, nowPeriod: number): { streak: StreakState; settlement: StreakSettlement } {
  const streak = { ...state, grants: state.grants ?? 0 };
  const settlement = settleStreak(tenant, streak, state.createdDay ?? null, nowDay, nowPeriod);
  streak.lastPeriod = coveredPeriod(streak);
  return { streak, settlement };
}

export function settledStreak(tenant: CompiledTenant, state: StreakState, nowDay: number, nowPeriod: number): StreakState {
  return settleCopy(tenant, state, nowDay, nowPeriod).streak;
}
