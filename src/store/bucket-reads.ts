import { bucketsIn, type DayBucket } from "../domain/buckets.js";
import { periodOfDay } from "../domain/periods.js";
import type { ReadPlan } from "./read-plan.js";

/**
 * Adds to a plan the reads of one series' daily buckets over the days from..to (the month
 * members of those months, and the member of the last month before them: O(log n + months)),
 * and returns how to decode them from the plan's result (domain/buckets.ts bucketsIn).
 */
export function planBuckets(plan: ReadPlan, key: string, from: number, to: number): (result: unknown[][]) => { before: DayBucket | null; inRange: DayBucket[] } {
  const fromMonth = periodOfDay(from, "monthly");
  const previous = plan.revRange(key, `(${fromMonth}`, "-inf", 1);
  const months = plan.range(key, fromMonth, periodOfDay(to, "monthly"));
  return (result) => bucketsIn((result[previous]![0] as string | undefined) ?? null, result[months] as string[], from, to);
}
