import { fail } from "../domain/errors.js";
import { histogramTop, rangesOfTop } from "../domain/histogram.js";
import type { ApiReply, ApiRequest } from "../http/router.js";
import { readStoreOf } from "../store/read-store.js";
import type { Tenants } from "../tenants.js";
import { systemOf } from "./lookup.js";
import { attributeFilterParam } from "./query.js";
import { levelJson } from "./wire.js";

/** Tops remembered by a points summary route (pointsSummaryHandler) before it forgets them all. */
const TOPS_KEPT = 10_000;

/**
 * GET /v1/points/{key}/summary (trophy-compat §2.2 #21, §3.6 PointsRange[]): how many users
 * hold how many points, in 11 ranges (domain/histogram.ts). 0..0 counts every user of the
 * tenant without a point: users minus users with a total >= 1, so users who never earned in
 * the system are included. Exact, from the per-shard counters and points zsets, one script per
 * shard (one call on a standalone Redis) that counts the ranges and finds the highest total,
 * which sets the ranges: the ranges asked for are those of the last summary's highest total (of
 * this system and filter), and only when the total found has crossed into another power of ten
 * is the call made again with its own (two round trips, where every summary took two before).
 *
 * `userAttributes=k:v,k2:v2` counts only users whose attributes match every pair, from the
 * per-shard groups by attribute value: one pair costs what the unfiltered read costs, several
 * pairs intersect the groups (O(size of the smallest group)).
 */
export function pointsSummaryHandler(tenants: Tenants) {
  // The top (histogramTop) the last summary of each tenant, system and filter found. Forgotten
  // all at once past TOPS_KEPT: filters are the clients' choice, and a forgotten one costs a
  // summary a second round trip, nothing more.
  const lastTops = new Map<string, number>();
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant, store } = tenants.authenticate(req.apiKey);
    const system = systemOf(tenant, req.params[0]!);
    const filter = attributeFilterParam(req.query, "userAttributes", tenant.userAttributes);
    const read = readStoreOf(store);
    const topKey = `${tenant.id}\n${system.key}\n${filter === null ? "" : [...filter].flat().join("\n")}`;
    let top = lastTops.get(topKey) ?? 10;
    let histogram = await read.pointsHistogram(system.key, rangesOfTop(top), filter);
    if (histogramTop(histogram.max) !== top) {
      top = histogramTop(histogram.max);
      histogram = await read.pointsHistogram(system.key, rangesOfTop(top), filter);
    }
    if (lastTops.size >= TOPS_KEPT) lastTops.clear();
    lastTops.set(topKey, top);
    const ranges = rangesOfTop(top);
    const { users, withPoints, counts } = histogram;
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
