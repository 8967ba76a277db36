import type { Redis } from "ioredis";
import { allBuckets, appendToMonth, closeMonth, decodeMonth, encodeOpenMonth, decodeOpenMonth, openDayField, openMonthDays, type DayBucket, type OpenMonth, type SeriesStore } from "../../src/domain/buckets.js";
import { parseDay, periodOfDay } from "../../src/domain/periods.js";
import { TenantKeys, shardOf } from "../../src/store/keys.js";

/** A day index from "YYYY-MM-DD", and a day's bucket: the tests' shorthand. */
export const day = (iso: string): number => parseDay(iso)!;
export const bucket = (iso: string, count: number, change: number, total: number): DayBucket => ({ day: day(iso), count, change, total });

/**
 * The daily buckets' layout in Redis, for tests: a series' open month in the shard hash {t:s}:bl
 * (its open day and the month's closed days, packed: src/domain/buckets.ts encodeOpenMonth) and
 * its month members in the zset (src/domain/buckets.ts).
 */
export interface SeriesLayout {
  open: OpenMonth | null;
  /** [score, member] ascending. */
  months: [number, string][];
}

function where(tenantId: string, shards: number, series: string, userId: string) {
  const keys = new TenantKeys(tenantId);
  const shard = shardOf(userId, shards);
  return { zset: keys.buckets(shard, series, userId), hash: keys.openMonths(shard), field: openDayField(series, userId) };
}

export async function seriesLayout(redis: Redis, tenantId: string, shards: number, series: string, userId: string): Promise<SeriesLayout> {
  const at = where(tenantId, shards, series, userId);
  const packed = await redis.hgetBuffer(at.hash, at.field);
  const flat = await redis.zrange(at.zset, 0, -1, "WITHSCORES");
  const months: [number, string][] = [];
  for (let i = 0; i < flat.length; i += 2) months.push([Number(flat[i + 1]), flat[i]!]);
  return { open: packed === null ? null : decodeOpenMonth(packed), months };
}

/** The layout as the model's SeriesStore (src/domain/buckets.ts), after checking that each month has one member. */
export async function seriesStore(redis: Redis, tenantId: string, shards: number, series: string, userId: string): Promise<SeriesStore> {
  const { open, months } = await seriesLayout(redis, tenantId, shards, series, userId);
  const byMonth = new Map<number, string>();
  for (const [score, member] of months) {
    if (byMonth.has(score)) throw new Error(`${series}:${userId}: two members of month ${score}: ${byMonth.get(score)} and ${member}`);
    byMonth.set(score, member);
  }
  return { months: byMonth, open };
}

/** Writes a SeriesStore as the series' layout, replacing what Redis held (an earlier version's layout, for tests of the migration). */
export async function writeSeriesStore(redis: Redis, tenantId: string, shards: number, series: string, userId: string, store: SeriesStore): Promise<void> {
  const at = where(tenantId, shards, series, userId);
  await redis.del(at.zset);
  for (const [month, member] of store.months) await redis.zadd(at.zset, month, member);
  if (store.open === null) await redis.hdel(at.hash, at.field);
  else await redis.hset(at.hash, at.field, encodeOpenMonth(store.open));
}

/**
 * Every bucket of a series, oldest first, and the layout's invariants: one member per month,
 * each member in its month's score, days ascending across members, the open month's days after
 * all of them, ascending and in its month.
 */
export async function seriesBuckets(redis: Redis, tenantId: string, shards: number, series: string, userId: string): Promise<DayBucket[]> {
  const store = await seriesStore(redis, tenantId, shards, series, userId);
  let last: number | null = null;
  const inOrder = (b: DayBucket, month: number, where: string) => {
    if (periodOfDay(b.day, "monthly") !== month) throw new Error(`${series}:${userId}: day ${b.day} in ${where} of month ${month}`);
    if (last !== null && b.day <= last) throw new Error(`${series}:${userId}: day ${b.day} in ${where} after day ${last}`);
    last = b.day;
  };
  for (const [score, member] of [...store.months].sort(([a], [b]) => a - b)) for (const b of decodeMonth(member)) inOrder(b, score, "the member");
  if (store.open) for (const b of openMonthDays(store.open)) inOrder(b, store.open.month, "the open month");
  return allBuckets(store);
}

/**
 * A series in the layout of the versions before the open day (every day in the month members,
 * the latest in the last one; no open-day field), as those versions' workers left it.
 */
export function previousLayout(store: SeriesStore): SeriesStore {
  const months = new Map(store.months);
  if (store.open !== null) closeMonth(months, store.open);
  return { months, open: null };
}

/**
 * A series in the layout of the version before the open month: the open day alone in the hash
 * (28 bytes), the days before it, its month's too, in the month members.
 */
export function openDayLayout(store: SeriesStore): SeriesStore {
  if (store.open === null || store.open.closed.length === 0) return store;
  const { month, closed, open } = store.open;
  const months = new Map(store.months);
  appendToMonth(months, month, closed);
  return { months, open: { month, closed: [], open } };
}

/** Rewrites a series in Redis with `to` (previousLayout or openDayLayout). */
export async function rewriteLayout(redis: Redis, tenantId: string, shards: number, series: string, userId: string, to: (store: SeriesStore) => SeriesStore): Promise<void> {
  const store = await seriesStore(redis, tenantId, shards, series, userId);
  await writeSeriesStore(redis, tenantId, shards, series, userId, to(store));
}

/** The previous layout in Redis (see previousLayout). */
export const toPreviousLayout = (redis: Redis, tenantId: string, shards: number, series: string, userId: string): Promise<void> =>
  rewriteLayout(redis, tenantId, shards, series, userId, previousLayout);
