import { fail } from "../domain/errors.js";
import { histogramRanges } from "../domain/histogram.js";
import type { ApiReply, ApiRequest } from "../http/router.js";
import { readStoreOf } from "../store/read-store.js";
import type { Tenants } from "../tenants.js";
import { systemOf } from "./lookup.js";
import { attributeFilterParam } from "./query.js";
import { levelJson } from "./wire.js";

/**
 * GET /v1/points/{key}/summary (trophy-compat §2.2 #21, §3.6 PointsRange[]): how many users
 * hold how many points, in 11 ranges (domain/histogram.ts). 0..0 counts every user of the
 * tenant without a point: users minus users with a total >= 1, so users who never earned in
 * the system are included. Exact, from the per-shard counters and points zsets: two rounds of
 * one script per shard (the first finds the highest total, which sets the ranges).
 *
 * `userAttributes=k:v,k2:v2` counts only users whose attributes match every pair, from the
 * per-shard groups by attribute value: one pair costs what the unfiltered read costs, several
 * pairs intersect the groups (O(size of the smallest group)).
 */
export function pointsSummaryHandler(tenants: Tenants) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant, store } = tenants.authenticate(req.apiKey);
    const system = systemOf(tenant, req.params[0]!);
    const filter = attributeFilterParam(req.query, "userAttributes", tenant.userAttributes);
    const read = readStoreOf(store);
    const { max } = await read.pointsHistogram(system.key, [], filter);
    const ranges = histogramRanges(max);
    const { users, withPoints, counts } = await read.pointsHistogram(system.key, ranges, filter);
    return {
      status: 200,
      body: [{ from: 0, to: 0, users: Math.max(0, users - withPoints) }, ...ranges.map(([from, to], i) => ({ from, to, users: counts[i]! }))],
    };
  };
}

/**
 * GET /v1/points/{key}/level-summary (trophy-compat §6.4: [{level, users}]): users currently
 * at each level, ascending, counted from the per-shard points totals (read-store.ts usersAtLevels).
 * A system without levels answers 422, as the hosted API documents.
 */
export function levelSummaryHandler(tenants: Tenants) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant, store } = tenants.authenticate(req.apiKey);
    const system = systemOf(tenant, req.params[0]!);
    if (system.levels.length === 0) fail("NO_LEVELS", `No levels configured on the points system: ${system.key}`);
    const users = await readStoreOf(store).usersAtLevels(system.key, system.levels.map((l) => l.points));
    return { status: 200, body: system.levels.map((level, i) => ({ level: levelJson(level), users: users[i]! })) };
  };
}
