import { Buffer } from "node:buffer"; // not the global, an accessor (see store/redis-script.ts)
import { formatDay, periodEndDay, periodOfDay, periodStartDay, type Frequency } from "./periods.js";

/**
 * Daily buckets: what a user's metric total or points total did on each day of the user's
 * local calendar. The stream worker writes them (lua/applyStream-2.lua); the event summaries
 * (trophy-compat §2.2 #12, #16) and wrapped (§3.8) read them.
 *
 * A bucket holds the day's number of records, their net change, and the running total after
 * the last of them. Metric amounts are micro-units (decimal.ts), points are integers.
 *
 * Layout: the series' OPEN MONTH apart, in one hash per shard ({t:s}:bl, field openDayField,
 * packed: encodeOpenMonth below, lua/buckets/open-day.lua): its open day (its latest bucket) and
 * the days of the same month closed before it; the days before those in one zset per user and
 * series, ONE MEMBER PER MONTH (score = the monthly period of periods.ts), the member listing
 * that month's days "day:count:change:total;..." ascending. Every day in the zset is earlier
 * than every day in the hash. The stream worker adds a record to the open day with one HMGET and
 * one HSET for its whole batch; a later day in the same month appends the closed day to the
 * hash value (no zset call: rewriting the month member at every day change cost the worker ~42k
 * Redis instructions a series); a later month writes the closed month to its member
 * (applyChange below). Data of earlier versions needs no conversion: a value of the open day
 * alone (28 bytes, the layout before the open month) is an open month with no closed days, and
 * a series with no field (the layout before the open day) moves its latest day out of the zset
 * on its next record. A month member can therefore already exist for the open month (its
 * earlier days, left by those versions): closing the month appends to it.
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
/** A series' field in the shard's hash of open months (lua/applyStream-2.lua builds the same). */
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
 * A series' field in {t:s}:bl: its OPEN MONTH, the open day (the series' latest bucket) and the
 * days of the same month closed before it, which join the month's member only when a later month
 * opens.
 */
export interface OpenMonth {
  /** The open day's monthly period (periods.ts): every day here is of it. */
  month: number;
  /** The days of the month closed before the open day, ascending. */
  closed: DayBucket[];
  open: DayBucket;
}

/**
 * The field's value, packed little-endian (lua/buckets/open-day.lua reads and writes the same):
 * the open day as day, month, count (int32), change, total (doubles: exact integers up to 2^53,
 * amounts are micro-units or points), 28 bytes, exactly the value of the version before the open
 * month; then each closed day, ascending, as day, count (int32), change, total (doubles), 24
 * bytes. A closed day is appended, never rewritten, so a day change costs no text formatting.
 */
const OPEN_DAY_BYTES = 28;
const CLOSED_DAY_BYTES = 24;

export function encodeOpenMonth({ month, closed, open }: OpenMonth): Buffer {
  const buf = Buffer.alloc(OPEN_DAY_BYTES + CLOSED_DAY_BYTES * closed.length);
  buf.writeInt32LE(open.day, 0);
  buf.writeInt32LE(month, 4);
  buf.writeInt32LE(open.count, 8);
  buf.writeDoubleLE(open.change, 12);
  buf.writeDoubleLE(open.total, 20);
  closed.forEach((b, i) => {
    const at = OPEN_DAY_BYTES + CLOSED_DAY_BYTES * i;
    buf.writeInt32LE(b.day, at);
    buf.writeInt32LE(b.count, at + 4);
    buf.writeDoubleLE(b.change, at + 8);
    buf.writeDoubleLE(b.total, at + 16);
  });
  return buf;
}

export function decodeOpenMonth(value: Buffer): OpenMonth {
  const open = { day: value.readInt32LE(0), count: value.readInt32LE(8), change: value.readDoubleLE(12), total: value.readDoubleLE(20) };
  const closed: DayBucket[] = [];
  for (let at = OPEN_DAY_BYTES; at < value.length; at += CLOSED_DAY_BYTES) {
    closed.push({ day: value.readInt32LE(at), count: value.readInt32LE(at + 4), change: value.readDoubleLE(at + 8), total: value.readDoubleLE(at + 16) });
  }
  return { month: value.readInt32LE(4), closed, open };
}

/** The days an open month holds, ascending: its closed days, then its open day. */
export const openMonthDays = (o: OpenMonth | null): DayBucket[] => (o === null ? [] : [...o.closed, o.open]);

/** A series as the stream worker keeps it: its month members by month (the zset), its open month (null: no field). */
export interface SeriesStore {
  months: Map<number, string>;
  open: OpenMonth | null;
}

/** Every bucket of a series, oldest first: the month members' days, then the open month's. */
export function allBuckets(series: SeriesStore): DayBucket[] {
  const months = [...series.months.entries()].sort(([a], [b]) => a - b);
  return [...months.flatMap(([, member]) => decodeMonth(member)), ...openMonthDays(series.open)];
}

/**
 * One change of a series on a local day (`month` its monthly period), as the stream worker
 * applies it: lua/applyStream-2.lua does the same, change by change. `total` is the total after
 * it when the record carries one, else null (the running total plus the change).
 *
 * On the open day or before it (days only move forward), it adds to the open day. A later day of
 * the open month closes the open day into the month's closed days; a later month closes the
 * month into its member first (closeMonth). A series without an open month takes its latest day
 * out of the zset first (a series of the layout before the open day; a new one has none).
 */
export function applyChange(series: SeriesStore, day: number, month: number, change: number, total: number | null): void {
  if (series.open === null) takeLatestDay(series);
  const current = series.open;
  if (current !== null && day <= current.open.day) {
    const b = current.open;
    b.count += 1;
    b.change += change;
    b.total = total ?? b.total + change;
    return;
  }
  const opened = { day, count: 1, change, total: total ?? (current?.open.total ?? 0) + change };
  if (current !== null && current.month === month) {
    series.open = { month, closed: [...current.closed, current.open], open: opened };
    return;
  }
  if (current !== null) closeMonth(series.months, current);
  series.open = { month, closed: [], open: opened };
}

/**
 * Writes the days of a month a series leaves to the month's member. The member may already
 * exist, holding the month's earlier days: written by a version before the open month (which
 * closed each day into it), or left by takeLatestDay. The days are then appended to it: one
 * member per month.
 */
export function closeMonth(months: Map<number, string>, closing: OpenMonth): void {
  appendToMonth(months, closing.month, openMonthDays(closing));
}

/** Appends days (later than the member's) to a month's member, or makes the member: one member per month. */
export function appendToMonth(months: Map<number, string>, month: number, days: readonly DayBucket[]): void {
  const text = encodeMonth(days);
  const member = months.get(month);
  months.set(month, member === undefined ? text : `${member};${text}`);
}

/** The latest day of the latest month member becomes the open day; the member keeps the rest. */
function takeLatestDay(series: SeriesStore): void {
  const month = Math.max(...series.months.keys());
  if (!Number.isFinite(month)) return;
  const days = decodeMonth(series.months.get(month)!);
  const open = days.pop()!;
  if (days.length === 0) series.months.delete(month);
  else series.months.set(month, encodeMonth(days));
  series.open = { month, closed: [], open };
}

/**
 * The buckets of days from..to, and the last bucket before `from`, out of what a reader fetched:
 * `previous` is the last month member of a month before from's month (or null), `months` the
 * members of the months from..to, ascending, and `latest` the days of the series' open month
 * (openMonthDays: its closed days and its open day; empty when none), which are later than
 * every day of the members.
 */
export function bucketsIn(previous: string | null, months: readonly string[], latest: readonly DayBucket[], from: number, to: number): { before: DayBucket | null; inRange: DayBucket[] } {
  let before = previous === null ? null : decodeMonth(previous).at(-1)!;
  const inRange: DayBucket[] = [];
  for (const b of [...months.flatMap(decodeMonth), ...latest]) {
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
