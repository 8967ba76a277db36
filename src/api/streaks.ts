import type { Logger } from "pino";
import type { CompiledTenant } from "../config/compiled.js";
import type { Clock } from "../clock.js";
import type { StreakState } from "../domain/outcome.js";
import { formatDay, localDayIndex, periodEndDay, periodOfDay, periodStartDay } from "../domain/periods.js";
import { settleCopy, viewStreak, type StreakView } from "../domain/streak.js";
import type { ApiReply, ApiRequest } from "../http/router.js";
import { ReadPlan } from "../store/read-plan.js";
import { readStoreOf, type RankedStreak, type Stored } from "../store/read-store.js";
import { LogThrottle } from "../log-throttle.js";
import type { Tenants } from "../tenants.js";
import { enumParam, intParam, listParam } from "./query.js";
import { checkUserId } from "./user-input.js";
import { LAST_FREEZE_GRANT_DAY, STREAK_START_DAY } from "../store/state-slots.js";
import { iso } from "./wire.js";
import { failUserNotFound } from "./lookup.js";

/**
 * Streak reads (trophy-compat §2.2 #14, #19, #20; §3.3): a user's streak with its history,
 * several users' streak lengths, and the tenant's rankings. A stored streak is shown as a
 * reader sees it now: settled at the user's current period (freezes consumed, a missed period
 * loses it) without writing, exactly as the event response shows it (domain/streak.ts).
 */

/** Hot-state keys of the streak (store/fields.ts), in StreakState order, then the last extension (ms) and the start day. */
const STREAK_KEYS = ["sl", "ss", "sp", "fz", "fg", "cd", "smp", "sxt", STREAK_START_DAY, LAST_FREEZE_GRANT_DAY] as const;
const EXTENDED_AT = STREAK_KEYS.indexOf("sxt");
const START_DAY_AT = STREAK_KEYS.indexOf(STREAK_START_DAY);
const GRANT_DAY_AT = STREAK_KEYS.indexOf(LAST_FREEZE_GRANT_DAY);

function storedStreak(values: readonly Stored[]): StreakState {
  const n = (i: number) => (values[i] === null || values[i] === undefined ? null : Number(values[i]));
  return { length: n(0) ?? 0, startPeriod: n(1), lastPeriod: n(2), freezes: n(3), grants: n(4) ?? 0, createdDay: n(5), metPeriod: n(6), startDay: n(START_DAY_AT), grantDay: n(GRANT_DAY_AT) };
}

interface StreakNow {
  view: StreakView;
  nowPeriod: number;
  /** Periods a freeze covers as of now, not yet written (settlement happens at the next event). */
  frozen: number[];
  /** Length those frozen periods held. */
  frozenLength: number;
}

function streakNow(tenant: CompiledTenant, stored: StreakState, tz: string, now: number): StreakNow {
  const frequency = tenant.streak?.frequency ?? "daily";
  const nowDay = localDayIndex(now, tz);
  const nowPeriod = periodOfDay(nowDay, frequency);
  const { streak: settled, settlement } = settleCopy(tenant, stored, nowDay, nowPeriod);
  return {
    view: viewStreak(tenant.streak, settled, nowDay, nowPeriod),
    nowPeriod,
    frozen: settlement.frozen,
    // As the model records a settlement: a streak lost after its freezes ran out held its old length.
    frozenLength: settlement.lost > 0 ? settlement.lost : settled.length,
  };
}

/** trophy-compat §2.2 #14: default 7; Laurel bounds it to 1-100 (O(log n + N) per read). */
export const DEFAULT_HISTORY_PERIODS = 7;
export const MAX_HISTORY_PERIODS = 100;

/**
 * streakHistory: the N periods up to and including the current one, oldest first (as the
 * hosted API's example), from {t:s}:sh. `usedFreeze` only when the tenant has freezes.
 * N + 3 members are read newest first: a zone change can leave up to two extended periods
 * ahead of the current local period.
 */
function historyJson(tenant: CompiledTenant, members: readonly string[], current: StreakNow, periods: number) {
  const frequency = tenant.streak?.frequency ?? "daily";
  const byPeriod = new Map<number, { length: number; frozen: boolean }>();
  for (const m of members) {
    const [period, length, frozen] = m.split(":");
    byPeriod.set(Number(period), { length: Number(length), frozen: frozen === "f" });
  }
  for (const p of current.frozen) byPeriod.set(p, { length: current.frozenLength, frozen: true });
  const items = [];
  for (let p = current.nowPeriod - periods + 1; p <= current.nowPeriod; p++) {
    const held = byPeriod.get(p);
    const item: Record<string, unknown> = {
      periodStart: formatDay(periodStartDay(p, frequency)),
      periodEnd: formatDay(periodEndDay(p, frequency)),
      length: held?.length ?? 0,
    };
    if (tenant.streak?.freezes) item.usedFreeze = held?.frozen ?? false;
    items.push(item);
  }
  return items;
}

/** Says that a streak read could not be exact (lostStreaksBacklog). */
export type BacklogWarning = (tenantId: string, read: "rank" | "rankings", cap: number) => void;

/**
 * A streak read that could not be exact: a shard held more than the cap (LOST_STREAK_CAP) of lost streaks
 * awaiting settlement, so a rank was answered null or a ranking may be short. The expiry sweep
 * settles a lost streak within a minute of its deadline, so it is not running (the process
 * that runs the background jobs is down) or far behind: the API cannot say so (its bodies have no
 * room for it), the log does, one line per 30 s a process for each kind of read.
 */
export function lostStreaksBacklog(logger: Logger): BacklogWarning {
  const throttles = { rank: new LogThrottle(), rankings: new LogThrottle() };
  return (tenantId, read, cap) =>
    throttles[read].run((unlogged) =>
      logger.warn({ tenant: tenantId, read, cap, unlogged }, "a shard holds more lost streaks awaiting settlement than a streak read takes out: a rank answered null, a ranking may be short; is the streak expiry sweep running?"),
    );
}

/**
 * GET /v1/users/{id}/streak?historyPeriods=N. Also `rank` (1 + users with a longer active
 * streak; null without an active streak, or when a shard holds too many unsettled lost streaks
 * to tell, store/read-store.ts LOST_STREAK_CAP) and `extended` (the instant of the last
 * extension while the streak is alive, as the newer hosted API adds; null otherwise).
 * Cost: one script on the user's shard, then, with an active streak, one per shard for the rank.
 */
export function userStreakHandler(tenants: Tenants, clock: Clock, backlog: BacklogWarning) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant, store } = tenants.authenticate(req.apiKey);
    const userId = req.params[0]!;
    checkUserId(userId, "user id");
    const periods = intParam(req.query, "historyPeriods", DEFAULT_HISTORY_PERIODS, 1, MAX_HISTORY_PERIODS);
    const read = readStoreOf(store);
    const shard = read.shard(userId);
    const plan = new ReadPlan(read.slots);
    const state = plan.state(STREAK_KEYS);
    const zone = plan.fields(["tz"]);
    const history = plan.revRange(read.keys.streakHistory(shard, userId), "+inf", "-inf", periods + 3);
    const now = clock.now();
    const result = await read.runPlan(userId, plan);
    if (result === null) failUserNotFound(userId);
    const current = streakNow(tenant, storedStreak(result[state] as Stored[]), (result[zone]![0] as string | null) ?? "UTC", now);
    const alive = current.view.length > 0;
    const extended = (result[state] as Stored[])[EXTENDED_AT] ?? null;
    // Null for a live streak only when a shard holds too many lost streaks to tell.
    // Not counting the user: their streak may be longer by now than the length read (read-store.ts streakRank).
    const rank = alive ? await read.streakRank(current.view.length, now, userId) : null;
    if (alive && rank === null) backlog(tenant.id, "rank", read.lostStreakCap);
    return {
      status: 200,
      body: {
        ...current.view,
        streakHistory: historyJson(tenant, result[history] as string[], current, periods),
        rank,
        extended: alive && extended !== null ? iso(Number(extended)) : null,
      },
    };
  };
}

/** trophy-compat §2.2 #19: at most 100 users. */
export const MAX_STREAK_USERS = 100;

/**
 * GET /v1/streaks?userIds=...: BulkStreakResponseItem per distinct requested id, longest first
 * (ties in request order). An unknown user is listed with length 0, as a user without a streak.
 * No ids → []. Cost: one script for every requested user (ReadStore.users).
 */
export function streaksListHandler(tenants: Tenants, clock: Clock) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant, store } = tenants.authenticate(req.apiKey);
    const ids = listParam(req.query, "userIds", MAX_STREAK_USERS);
    for (const id of ids) checkUserId(id, "userIds");
    const read = readStoreOf(store);
    const now = clock.now();
    const users = await read.users(ids, STREAK_KEYS, ["tz"]);
    const items = ids.map((userId) => {
      const user = users.get(userId);
      const length = user ? streakNow(tenant, storedStreak(user.state), user.fields[0] ?? "UTC", now).view.length : 0;
      const at = user?.state[EXTENDED_AT] ?? null;
      return { userId, streakLength: length, extended: length > 0 && at !== null ? iso(Number(at)) : null };
    });
    return { status: 200, body: items.sort((a, b) => b.streakLength - a.streakLength) };
  };
}

/**
 * GET /v1/streaks/rankings?limit&type (trophy-compat §2.2 #20): the top users by active
 * streak (lost streaks excluded by the service clock) or by longest streak ever. limit 1-100,
 * default 10; type active (default) or longest. Ties: user id descending. Cost: one call over
 * every shard (active) or one ZREVRANGE a shard (longest), merged, then an HGET a name
 * (ReadStore.names).
 */
export function streakRankingsHandler(tenants: Tenants, clock: Clock, backlog: BacklogWarning) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant, store } = tenants.authenticate(req.apiKey);
    const limit = intParam(req.query, "limit", 10, 1, 100);
    const type = enumParam(req.query, "type", ["active", "longest"] as const, "active");
    const read = readStoreOf(store);
    let top: RankedStreak[];
    if (type === "active") {
      const active = await read.activeStreaks(limit, clock.now());
      if (!active.complete) backlog(tenant.id, "rankings", read.lostStreakCap);
      top = active.top;
    } else {
      top = await read.longestStreaks(limit);
    }
    const names = await read.names(top.map((t) => t.userId));
    return {
      status: 200,
      body: top.map((t) => ({ userId: t.userId, name: names.get(t.userId) ?? null, streakLength: t.length })),
    };
  };
}
