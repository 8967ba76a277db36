import { periodTotals, type DayBucket } from "./buckets.js";
import { dateToDay, dayToDate, periodEndDay, periodOfDay, periodStartDay, type Frequency } from "./periods.js";

/**
 * The year in review (trophy-compat §3.8) from the daily buckets. Pure: the reader hands over
 * the buckets of the year and this computes the periods and the numbers.
 *
 * Decisions where the hosted API says nothing:
 *   - A day is active when the user recorded at least one metric event that day (points paid
 *     by time triggers alone do not make a day active). Weeks are ISO weeks, Monday to Sunday,
 *     the streak's; a week or month is active when one of its days in the year is.
 *   - "Most active" = the most metric events; ties go to the earliest. A year without events
 *     names its first day, first week and January, with zero changes.
 *   - Weeks at the year's edges are clipped to the year (start/end inside the year).
 *   - percentChange = change ÷ |total before the period| × 100, truncated to one decimal; 100
 *     when the total before was 0 and it changed (the hosted API's example: 2500 on 12500 is
 *     20, 150000 from nothing is 100), 0 when nothing changed.
 */
export interface DaySpan {
  from: number;
  to: number;
}

export interface WrappedPeriods {
  daysActive: number;
  weeksActive: number;
  monthsActive: number;
  mostActiveDay: DaySpan;
  mostActiveWeek: DaySpan;
  /** 0 = January. */
  mostActiveMonth: { month: number; span: DaySpan };
  entireYear: DaySpan;
}

export function yearSpan(year: number): DaySpan {
  return { from: dateToDay(year, 1, 1), to: dateToDay(year, 12, 31) };
}

/** `metricBuckets`: every metric series' buckets (any days); only their counts inside the year matter. */
export function wrappedPeriods(year: number, metricBuckets: readonly (readonly DayBucket[])[]): WrappedPeriods {
  const span = yearSpan(year);
  const perDay = new Map<number, number>();
  for (const buckets of metricBuckets) {
    for (const b of buckets) if (b.day >= span.from && b.day <= span.to && b.count > 0) perDay.set(b.day, (perDay.get(b.day) ?? 0) + b.count);
  }
  const busiest = (key: (day: number) => number): { key: number; count: number } | null => {
    const totals = new Map<number, number>();
    for (const [day, count] of perDay) totals.set(key(day), (totals.get(key(day)) ?? 0) + count);
    let best: { key: number; count: number } | null = null;
    for (const [k, count] of totals) if (!best || count > best.count || (count === best.count && k < best.key)) best = { key: k, count };
    return best;
  };
  const clip = (from: number, to: number): DaySpan => ({ from: Math.max(from, span.from), to: Math.min(to, span.to) });
  const month = (day: number) => dayToDate(day).m - 1;
  const day = busiest((d) => d)?.key ?? span.from;
  const week = busiest((d) => periodOfDay(d, "weekly"))?.key ?? periodOfDay(span.from, "weekly");
  const monthIndex = busiest(month)?.key ?? 0;
  return {
    daysActive: perDay.size,
    weeksActive: new Set([...perDay.keys()].map((d) => periodOfDay(d, "weekly"))).size,
    monthsActive: new Set([...perDay.keys()].map(month)).size,
    mostActiveDay: { from: day, to: day },
    mostActiveWeek: clip(periodStartDay(week, "weekly"), periodEndDay(week, "weekly")),
    mostActiveMonth: { month: monthIndex, span: { from: dateToDay(year, monthIndex + 1, 1), to: dateToDay(year, monthIndex + 2, 1) - 1 } },
    entireYear: span,
  };
}

export interface SeriesInPeriod {
  currentTotal: number;
  changeThisPeriod: number;
  percentChange: number;
}

/** A series over a span: total at its end, change within it (units as stored). */
export function seriesInPeriod(totalBefore: number, buckets: readonly DayBucket[], span: DaySpan): SeriesInPeriod {
  const t = periodTotals(totalBefore, buckets, span.from, span.to);
  return { currentTotal: t.after, changeThisPeriod: t.change, percentChange: percentChange(t.before, t.change) };
}

export function percentChange(before: number, change: number): number {
  if (change === 0) return 0;
  if (before === 0) return 100;
  return Math.trunc((change / Math.abs(before)) * 1000) / 10;
}

export interface LongestStreak {
  length: number;
  /** Period the streak began in, and the period it reached its length in. */
  startPeriod: number | null;
  endPeriod: number | null;
}

/**
 * The longest streak length the user reached in a period of [fromPeriod, toPeriod], from the
 * streak history ({t:s}:sh members "period:length" or "period:length:f" for a frozen period,
 * any order). It began at the last period at or before its peak with length 1 and no gap
 * after it (frozen periods keep the length, so peak − length + 1 would be wrong); the history
 * may begin before the year. Ties go to the earliest peak.
 */
export function longestStreakIn(history: readonly string[], fromPeriod: number, toPeriod: number): LongestStreak {
  const entries = history
    .map((m) => {
      const [period, length, frozen] = m.split(":");
      return { period: Number(period), length: Number(length), frozen: frozen === "f" };
    })
    .sort((a, b) => a.period - b.period);
  let best: { index: number; length: number } | null = null;
  entries.forEach((e, index) => {
    if (!e.frozen && e.period >= fromPeriod && e.period <= toPeriod && e.length > (best?.length ?? 0)) best = { index, length: e.length };
  });
  if (best === null) return { length: 0, startPeriod: null, endPeriod: null };
  const peak: { index: number; length: number } = best;
  let start = peak.index;
  while (start > 0 && !(entries[start]!.length === 1 && !entries[start]!.frozen) && entries[start - 1]!.period === entries[start]!.period - 1) start--;
  const first = entries[start]!;
  // The history's first entry in the middle of a streak: a streak that is over and began more
  // than STREAK_HISTORY_KEPT periods ago may have lost its beginning to the trim. Its `length` extended
  // periods end there; taken without freezes before them, the start is that many periods back.
  const startPeriod = start === 0 && (first.length !== 1 || first.frozen) ? first.period - first.length + (first.frozen ? 0 : 1) : first.period;
  return { length: peak.length, startPeriod, endPeriod: entries[peak.index]!.period };
}

/** Periods of a frequency that overlap a span. */
export function periodsOf(span: DaySpan, frequency: Frequency): { from: number; to: number } {
  return { from: periodOfDay(span.from, frequency), to: periodOfDay(span.to, frequency) };
}
