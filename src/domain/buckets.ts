import { formatDay, periodEndDay, periodOfDay, periodStartDay, type Frequency } from "./periods.js";

/**
 * Daily buckets: what a user's metric total or points total did on each day of the user's
 * local calendar. The stream worker writes them (lua/applyStream-2.lua); the event summaries
 * (trophy-compat §2.2 #12, #16) and wrapped (§3.8) read them.
 *
 * A bucket holds the day's number of records, their net change, and the running total after
 * the last of them. Metric amounts are micro-units (decimal.ts), points are integers.
 *
 * Layout: the series' OPEN DAY (its latest bucket) apart, in one hash per shard ({t:s}:bl,
 * field openDayField, 28 packed bytes: lua/buckets/open-day.lua); the days before it in one zset
 * per user and series, ONE MEMBER PER MONTH (score = the monthly period of periods.ts), the
 * member listing that month's days "day:count:change:total;..." ascending. The stream worker
 * adds a record to the open day with one HMGET and one HSET for its whole batch, and appends
 * the open day to its month member only when a later day opens (once per user, series and day:
 * rewriting the month member per record was most of the worker's cost). Data of versions that
 * kept the latest day in the zset moves it to the open day on the series' next record.
 * Measured (Redis 7.0, 365 active days): a member per day costs 42.8 KB once past 128 members
 * (the zset leaves listpack for skiplist, ~117 B a day); a member per month 12.6 KB (~34 B a
 * day) however long the history. Reads stay O(log n + months in the range), plus one HGET.
 *
 * Days only move forward within a series: a record whose local day is earlier than the
 * series' latest bucket (the user moved to a zone whose calendar is behind, or the clock was
 * set back) is counted in that latest bucket. So totals are monotone in time, each bucket's
 * total is the previous bucket's total plus its change, and no day is rewritten after a later
 * day exists (the same rule as the streak's: a calendar that moves back never double-counts).
 */
export interface DayBucket {
  day: number;
  count: number;
  change: number;
  total: number;
}

export const metricSeries = (metricKey: string): string => `m:${metricKey}`;
export const pointsSeries = (systemKey: string): string => `p:${systemKey}`;
/** A series' field in the shard's hash of open days (lua/applyStream-2.lua builds the same). */
export const openDayField = (series: string, userId: string): string => `${series}:${userId}`;

/** A month's member: "day:count:change:total;..." (lua/applyStream-2.lua writes it). */
export function encodeMonth(days: readonly DayBucket[]): string {
  return days.map((b) => `${b.day}:${b.count}:${b.change}:${b.total}`).join(";");
}

export function decodeMonth(member: string): DayBucket[] {
  return member.split(";").map((entry) => {
    const [day, count, change, total] = entry.split(":").map(Number);
    return { day: day!, count: count!, change: change!, total: total! };
  });
}

/**
 * The buckets of days from..to, and the last bucket before `from`, out of what a reader fetched:
 * `previous` is the last month member of a month before from's month (or null), `months` the
 * members of the months from..to, ascending, and `open` the series' open day (or null), which
 * is later than every day of the members.
 */
export function bucketsIn(previous: string | null, months: readonly string[], open: DayBucket | null, from: number, to: number): { before: DayBucket | null; inRange: DayBucket[] } {
  let before = previous === null ? null : decodeMonth(previous).at(-1)!;
  const inRange: DayBucket[] = [];
  for (const b of open === null ? months.flatMap(decodeMonth) : [...months.flatMap(decodeMonth), open]) {
    if (b.day < from) before = b;
    else if (b.day <= to) inRange.push(b);
  }
  return { before, inRange };
}

/** One item of an event summary, amounts still in the series' stored unit. */
export interface SummaryItem {
  date: string;
  total: number;
  change: number;
}

/** Aggregations of the event summaries: the streak's calendar periods (weekly = ISO weeks). */
export type Aggregation = Frequency;

/**
 * The event summary over the local days [from, to]: one item per daily, weekly or monthly
 * calendar period that overlaps the range, oldest first. `date` is the period's first day
 * (trophy-compat §3.5: "for weekly/monthly the first date of the bucket"); `change` counts
 * only the days of the period inside the range, and `total` is the running total at the end
 * of the period's last day inside the range, so the changes add up to total(to) - total(from - 1).
 *
 * `before` is the last bucket before `from` (null: nothing before), `inRange` the buckets of
 * days from..to, ascending.
 */
export function summarise(before: DayBucket | null, inRange: readonly DayBucket[], from: number, to: number, aggregation: Aggregation): SummaryItem[] {
  const items: SummaryItem[] = [];
  let total = before?.total ?? 0;
  let i = 0;
  const last = periodOfDay(to, aggregation);
  for (let period = periodOfDay(from, aggregation); period <= last; period++) {
    const end = Math.min(periodEndDay(period, aggregation), to);
    let change = 0;
    for (; i < inRange.length && inRange[i]!.day <= end; i++) {
      change += inRange[i]!.change;
      total = inRange[i]!.total;
    }
    items.push({ date: formatDay(periodStartDay(period, aggregation)), total, change });
  }
  return items;
}

/** Net change and totals of a series over the days [from, to] (wrapped's periods). */
export interface PeriodTotals {
  /** Total at the end of day from - 1. */
  before: number;
  change: number;
  /** Total at the end of day `to`. */
  after: number;
  /** Records counted in the period. */
  count: number;
}

/** `buckets` ascending, `before` the total before the first of them. */
export function periodTotals(beforeAll: number, buckets: readonly DayBucket[], from: number, to: number): PeriodTotals {
  let before = beforeAll;
  let change = 0;
  let count = 0;
  for (const b of buckets) {
    if (b.day < from) before = b.total;
    else if (b.day <= to) {
      change += b.change;
      count += b.count;
    }
  }
  return { before, change, after: before + change, count };
}
