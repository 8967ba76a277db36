import { localDayIndex, periodOfDay } from "../domain/periods.js";

/**
 * The stream worker's Node side (src/jobs/stream-worker.ts): the local day of a record whose
 * writer could not put it in the record. lua/applyStream-2.lua names such records by id, time
 * (ms) and zone; it is given back, per record, the local day and its monthly period (the bucket
 * zset's score), as decimal text. Lua has no zone data (DESIGN: Time).
 */
export function recordDayArgs(needDays: readonly string[]): string[] {
  const args: string[] = [];
  for (let i = 0; i + 2 < needDays.length; i += 3) {
    const day = localDayIndex(Number(needDays[i + 1]), needDays[i + 2]!);
    args.push(needDays[i]!, String(day), String(periodOfDay(day, "monthly")));
  }
  return args;
}

/** Orders stream ids "<ms>-<seq>" (lua/stream/ids.lua idCompare): neither strings nor one number compare right. */
export function compareStreamIds(a: string, b: string): number {
  const [am, as] = a.split("-").map(Number);
  const [bm, bs] = b.split("-").map(Number);
  return am! !== bm! ? Math.sign(am! - bm!) : Math.sign(as! - bs!);
}
