import { metricSeries, pointsSeries, summarise, type Aggregation } from "../domain/buckets.js";
import { fromMicro } from "../domain/decimal.js";
import { fail } from "../domain/errors.js";
import type { ApiReply, ApiRequest } from "../http/router.js";
import { planBuckets } from "../store/bucket-reads.js";
import { ReadPlan } from "../store/read-plan.js";
import { readStoreOf } from "../store/read-store.js";
import type { TenantContext, Tenants } from "../tenants.js";
import { failUserNotFound, metricOf, systemOf } from "./lookup.js";
import { dayParam, enumParam } from "./query.js";
import { checkUserId } from "./user-input.js";
import type { Query } from "../http/query.js";

/**
 * GET /v1/users/{id}/metrics/{key}/event-summary and /points/{key}/event-summary
 * (trophy-compat §2.2 #12, #16; §3.5 UsersMetricEventSummaryResponseItem): the user's
 * daily, weekly or monthly totals and changes on the user's calendar, from the stream
 * worker's daily buckets. Eventually consistent: it shows the events the worker has applied
 * (GET /metrics shows how far behind it is).
 */
const AGGREGATIONS: readonly Aggregation[] = ["daily", "weekly", "monthly"];
/** trophy-compat §2.2 #12: "range ≤ 400 days" (endDate − startDate). */
export const MAX_SUMMARY_DAYS = 400;

export interface SummaryRange {
  aggregation: Aggregation;
  from: number;
  to: number;
}

/**
 * aggregation, startDate, endDate are required (400 when missing or not a date). The range may
 * be a single day (start = end; the hosted spec asks start < end, a one-day range is accepted);
 * start after end, or more than 400 days apart, is 422.
 */
export function summaryRange(query: Query): SummaryRange {
  const aggregation = enumParam(query, "aggregation", AGGREGATIONS, null);
  const from = dayParam(query, ["startDate", "start_date"]);
  const to = dayParam(query, ["endDate", "end_date"]);
  if (from > to) fail("OUT_OF_RANGE", "startDate must not be after endDate");
  if (to - from > MAX_SUMMARY_DAYS) fail("OUT_OF_RANGE", `endDate must be at most ${MAX_SUMMARY_DAYS} days after startDate`);
  return { aggregation, from, to };
}

interface SeriesTarget {
  series: string;
  /** Stored amount → wire number. */
  toWire: (stored: number) => number;
}

function summaryHandler(tenants: Tenants, target: (context: TenantContext, key: string) => SeriesTarget) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const context = tenants.authenticate(req.apiKey);
    const [userId, key] = req.params as [string, string];
    checkUserId(userId, "user id");
    const { series, toWire } = target(context, key);
    const { aggregation, from, to } = summaryRange(req.query);
    const read = readStoreOf(context.store);
    const plan = new ReadPlan(read.slots);
    const buckets = planBuckets(plan, read.keys, read.shard(userId), series, userId, from, to);
    const result = await read.runPlan(userId, plan);
    if (result === null) failUserNotFound(userId);
    const { before, inRange } = buckets(result);
    const items = summarise(before, inRange, from, to, aggregation);
    return { status: 200, body: items.map((i) => ({ date: i.date, total: toWire(i.total), change: toWire(i.change) })) };
  };
}

export const metricEventSummaryHandler = (tenants: Tenants) =>
  summaryHandler(tenants, ({ tenant }, key) => ({ series: metricSeries(metricOf(tenant, key).key), toWire: fromMicro }));

export const pointsEventSummaryHandler = (tenants: Tenants) =>
  summaryHandler(tenants, ({ tenant }, key) => ({ series: pointsSeries(systemOf(tenant, key).key), toWire: (n) => n }));
