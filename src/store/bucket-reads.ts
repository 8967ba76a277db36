import { bucketsIn, openDayField, type DayBucket } from "../domain/buckets.js";
import { periodOfDay } from "../domain/periods.js";
import type { TenantKeys } from "./keys.js";
import type { ReadPlan } from "./read-plan.js";

/**
 * Adds to a plan the reads of one user's daily buckets in one series over the days from..to
 * (the month members of those months, the member of the last month before them: O(log n +
 * months); and the series' open month, its latest days, kept apart), and returns how to decode
 * them from the plan's result (domain/buckets.ts bucketsIn).
 */
export function planBuckets(plan: ReadPlan, keys: TenantKeys, shard: number, series: string, userId: string, from: number, to: number): (result: unknown[][]) => { before: DayBucket | null; inRange: DayBucket[] } {
  const key = keys.buckets(shard, series, userId);
  const fromMonth = periodOfDay(from, "monthly");
  const previous = plan.revRange(key, `(${fromMonth}`, "-inf", 1);
  const months = plan.range(key, fromMonth, periodOfDay(to, "monthly"));
  const open = plan.openMonth(keys.openMonths(shard), openDayField(series, userId));
  return (result) => bucketsIn((result[previous]![0] as string | undefined) ?? null, result[months] as string[], daysOf(result[open] as number[]), from, to);
}

/** The open month's days as the plan's step replies them: flat, day, count, change, total each. */
function daysOf(flat: readonly number[]): DayBucket[] {
  const days: DayBucket[] = [];
  for (let i = 0; i < flat.length; i += 4) days.push({ day: flat[i]!, count: flat[i + 1]!, change: flat[i + 2]!, total: flat[i + 3]! });
  return days;
}
