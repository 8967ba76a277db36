import { DateTime } from "luxon";

/**
 * An independent oracle for the daily buckets and the event summaries: luxon dates (not
 * src/domain/periods.ts), totals taken from the event responses (not from the worker), and the
 * documented rule that a series' days never move back (README: event summaries).
 */
export interface LoggedChange {
  ms: number;
  tz: string;
  change: number;
  total: number;
}

export type DailySeries = Map<string, { change: number; total: number; count: number }>;

export function localDate(ms: number, tz: string): string {
  return DateTime.fromMillis(ms, { zone: tz }).toISODate()!;
}

export function dailySeries(log: readonly LoggedChange[]): DailySeries {
  const days: DailySeries = new Map();
  let last: string | null = null;
  for (const e of log) {
    let day = localDate(e.ms, e.tz);
    if (last !== null && day < last) day = last;
    const b = days.get(day) ?? { change: 0, total: 0, count: 0 };
    b.change += e.change;
    b.total = e.total;
    b.count += 1;
    days.set(day, b);
    last = day;
  }
  return days;
}

/** What GET .../event-summary must answer for this series, computed with luxon's calendar. */
export function expectedSummary(series: DailySeries, aggregation: "daily" | "weekly" | "monthly", startDate: string, endDate: string) {
  const unit = aggregation === "daily" ? "day" : aggregation === "weekly" ? "week" : "month";
  const start = DateTime.fromISO(startDate, { zone: "UTC" });
  const end = DateTime.fromISO(endDate, { zone: "UTC" });
  const sorted = [...series.entries()].sort(([a], [b]) => (a < b ? -1 : 1));
  const totalAt = (date: string) => {
    let total = 0;
    for (const [d, b] of sorted) if (d <= date) total = b.total;
    return total;
  };
  const out: { date: string; total: number; change: number }[] = [];
  for (let period = start.startOf(unit); period <= end; period = period.plus({ [`${unit}s`]: 1 })) {
    const from = period < start ? start : period;
    const lastDay = period.endOf(unit).startOf("day");
    const to = lastDay > end ? end : lastDay;
    let change = 0;
    for (const [d, b] of sorted) if (d >= from.toISODate()! && d <= to.toISODate()!) change += b.change;
    out.push({ date: period.toISODate()!, total: totalAt(to.toISODate()!), change });
  }
  return out;
}
