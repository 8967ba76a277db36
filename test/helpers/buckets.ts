import type { Redis } from "ioredis";
import { decodeMonth, encodeMonth, openDayField, type DayBucket } from "../../src/domain/buckets.js";
import { periodOfDay } from "../../src/domain/periods.js";
import { TenantKeys, shardOf } from "../../src/store/keys.js";

/**
 * The daily buckets' layout in Redis, for tests: a series' open day in the shard hash {t:s}:bl
 * (lua/buckets/open-day.lua: day, month, count as int32, change, total as doubles,
 * little-endian) and its month members in the zset (src/domain/buckets.ts).
 */
export interface SeriesLayout {
  open: (DayBucket & { month: number }) | null;
  /** [score, member] ascending. */
  months: [number, string][];
}

function where(tenantId: string, shards: number, series: string, userId: string) {
  const keys = new TenantKeys(tenantId);
  const shard = shardOf(userId, shards);
  return { zset: keys.buckets(shard, series, userId), hash: keys.openDays(shard), field: openDayField(series, userId) };
}

export async function seriesLayout(redis: Redis, tenantId: string, shards: number, series: string, userId: string): Promise<SeriesLayout> {
  const at = where(tenantId, shards, series, userId);
  const packed = await redis.hgetBuffer(at.hash, at.field);
  const open = packed === null ? null : { day: packed.readInt32LE(0), month: packed.readInt32LE(4), count: packed.readInt32LE(8), change: packed.readDoubleLE(12), total: packed.readDoubleLE(20) };
  const flat = await redis.zrange(at.zset, 0, -1, "WITHSCORES");
  const months: [number, string][] = [];
  for (let i = 0; i < flat.length; i += 2) months.push([Number(flat[i + 1]), flat[i]!]);
  return { open, months };
}

/**
 * Every bucket of a series, oldest first, and the layout's invariants: each member in its
 * month's score, days ascending across members, the open day after all of them and in its month.
 */
export async function seriesBuckets(redis: Redis, tenantId: string, shards: number, series: string, userId: string): Promise<DayBucket[]> {
  const { open, months } = await seriesLayout(redis, tenantId, shards, series, userId);
  const days: DayBucket[] = [];
  for (const [score, member] of months) {
    for (const b of decodeMonth(member)) {
      if (periodOfDay(b.day, "monthly") !== score) throw new Error(`${series}:${userId}: day ${b.day} in the member of month ${score}`);
      if (days.length > 0 && b.day <= days.at(-1)!.day) throw new Error(`${series}:${userId}: day ${b.day} after day ${days.at(-1)!.day}`);
      days.push(b);
    }
  }
  if (open) {
    if (periodOfDay(open.day, "monthly") !== open.month) throw new Error(`${series}:${userId}: open day ${open.day} with month ${open.month}`);
    if (days.length > 0 && open.day <= days.at(-1)!.day) throw new Error(`${series}:${userId}: open day ${open.day} not after day ${days.at(-1)!.day}`);
    days.push({ day: open.day, count: open.count, change: open.change, total: open.total });
  }
  return days;
}

/**
 * Rewrites a series in the layout of the versions before the open day (every day in the month
 * members, the latest in the last one; no open-day field), as those versions' workers left it.
 */
export async function toPreviousLayout(redis: Redis, tenantId: string, shards: number, series: string, userId: string): Promise<void> {
  const at = where(tenantId, shards, series, userId);
  const { open, months } = await seriesLayout(redis, tenantId, shards, series, userId);
  if (!open) return;
  const last = months.at(-1);
  const day = { day: open.day, count: open.count, change: open.change, total: open.total };
  if (last && last[0] === open.month) {
    await redis.zrem(at.zset, last[1]);
    await redis.zadd(at.zset, open.month, encodeMonth([...decodeMonth(last[1]), day]));
  } else {
    await redis.zadd(at.zset, open.month, encodeMonth([day]));
  }
  await redis.hdel(at.hash, at.field);
}
