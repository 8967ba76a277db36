import { metricSeries, pointsSeries } from "../domain/buckets.js";
import { localDayIndex, periodOfDay } from "../domain/periods.js";
import { eventDetail, type StreamRecord } from "../domain/stream-record.js";
import { packDoubles } from "../store/redis-script.js";

/**
 * What one stream record does to the materialised reads, as lua/applyStream-2.lua takes it.
 * The local day and its month are computed here, in TypeScript: Lua has no zone data (DESIGN: Time).
 *
 *   series op  "m:<metric>" or "p:<system>", change, total after ('' = previous total + change), count
 */
export interface EntryOps {
  id: string;
  userId: string;
  day: number;
  /** The monthly period of the day (periods.ts): the bucket zset's score. */
  month: number;
  ops: [string, number, number | "", number][];
}

export function opsOf(record: StreamRecord): EntryOps {
  const ops: EntryOps["ops"] = [];
  if (record.kind === "ev") {
    // The total after the event comes from the event script, written in the same atomic call;
    // records from before it carried one fall back to the running total.
    const { metricKey, valueMicro, totalMicro } = eventDetail(record);
    ops.push([metricSeries(metricKey), valueMicro, totalMicro ?? "", 1]);
  }
  // Other kinds carry only their points parts; a "ub" record (a user boost changed) has none, so
  // it touches no series and only moves the watermark past it.
  for (const p of record.points) ops.push([pointsSeries(p.systemKey), p.added, p.total, 1]);
  const day = localDayIndex(record.ms, record.tz);
  return { id: record.id, userId: record.userId, day, month: periodOfDay(day, "monthly"), ops };
}

/**
 * Flattens entries into the script's ARGV tail (lua/applyStream-2.lua): per entry id, user, month
 * (text), the numbers as little-endian doubles (day, n, then n × (change, total or NaN, count)),
 * then the n series. Lua reads doubles with struct.unpack far cheaper than it parses text.
 */
export function opsArgs(entries: readonly EntryOps[]): (string | Buffer)[] {
  const args: (string | Buffer)[] = [];
  for (const e of entries) {
    const numbers = [e.day, e.ops.length, ...e.ops.flatMap(([, change, total, count]) => [change, total === "" ? Number.NaN : total, count])];
    args.push(e.id, e.userId, String(e.month), packDoubles(numbers), ...e.ops.map(([series]) => series));
  }
  return args;
}

/** Orders stream ids "<ms>-<seq>" (lua/stream/ids.lua idCompare): neither strings nor one number compare right. */
export function compareStreamIds(a: string, b: string): number {
  const [am, as] = a.split("-").map(Number);
  const [bm, bs] = b.split("-").map(Number);
  return am! !== bm! ? Math.sign(am! - bm!) : Math.sign(as! - bs!);
}
