import type { CompiledAchievement, CompiledTenant } from "../config/compiled.js";
import { userFiltersMatch } from "../domain/filters.js";
import type { ApiReply, ApiRequest } from "../http/router.js";
import { userAttributeField } from "../store/fields.js";
import { ReadPlan } from "../store/read-plan.js";
import { readStoreOf, type ReadStore } from "../store/read-store.js";
import type { Tenants } from "../tenants.js";
import { attributeFilterParam } from "./query.js";
import { checkUserId } from "./user-input.js";
import { achievementJson } from "./wire.js";
import { failUserNotFound } from "./lookup.js";

/**
 * GET /v1/achievements and GET /v1/users/{id}/achievements (trophy-compat §2.2 #1, #13; §3.4
 * AchievementWithStatsResponse, UserAchievementWithStatsResponse). Achievements are listed in
 * config order. `completions` is the number of users who completed one, `rarity` that number
 * as a percentage of the tenant's users (rounded to 2 decimals, 0 without users): both summed
 * exactly from the per-shard counters {t:s}:agg, never from a scan of users.
 */

/** An achievement with a user-attribute filter is available only to users it matches (trophy-compat §5.7). */
export function availableTo(achievement: CompiledAchievement, attributes: ReadonlyMap<string, string>): boolean {
  return userFiltersMatch(achievement.userAttributes, attributes);
}

export interface UserAchievementState {
  /** Completion instant per achievement key; absent = not completed. */
  achievedAt: Map<string, number>;
  attributes: Map<string, string>;
}

/** Adds to a plan what userAchievementState needs: the completion times and the user's attributes. */
export function planUserAchievements(plan: ReadPlan, tenant: CompiledTenant): (result: unknown[][]) => UserAchievementState {
  const attributeKeys = [...tenant.userAttributes];
  const times = plan.state(tenant.achievements.map((a) => `a:${a.key}`));
  const fields = plan.fields(attributeKeys.map(userAttributeField));
  return (result) => {
    const achievedAt = new Map<string, number>();
    (result[times] as (number | null)[]).forEach((ms, i) => {
      if (ms !== null) achievedAt.set(tenant.achievements[i]!.key, ms);
    });
    const attributes = new Map<string, string>();
    (result[fields] as (string | null)[]).forEach((v, i) => {
      if (v !== null) attributes.set(attributeKeys[i]!, v);
    });
    return { achievedAt, attributes };
  };
}

/**
 * The achievements a user sees: the completed ones, and with `includeIncomplete` those still
 * open to the user (available by their attribute filter), each with achievedAt or null.
 */
export function userAchievementList(list: readonly CompiledAchievement[], state: UserAchievementState, includeIncomplete: boolean) {
  return list.filter((a) => state.achievedAt.has(a.key) || (includeIncomplete && availableTo(a, state.attributes)));
}

/** completions and rarity per achievement (and the tenant's users): S × HMGET of {t:s}:agg. */
async function achievementStats(read: ReadStore, list: readonly CompiledAchievement[]) {
  const [users, ...completions] = await read.counters(["users", ...list.map((a) => `ac:${a.key}`)]);
  const stats = new Map<string, { completions: number; rarity: number }>();
  list.forEach((a, i) => {
    const done = completions[i]!;
    stats.set(a.key, { completions: done, rarity: users! > 0 ? Math.round((done / users!) * 10_000) / 100 : 0 });
  });
  return stats;
}

export function allAchievementsHandler(tenants: Tenants) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant, store } = tenants.authenticate(req.apiKey);
    const filter = attributeFilterParam(req.query, "userAttributes", tenant.userAttributes);
    const list = filter === null ? tenant.achievements : tenant.achievements.filter((a) => availableTo(a, filter));
    const stats = await achievementStats(readStoreOf(store), list);
    return {
      status: 200,
      body: list.map((a) => {
        const { achievedAt: _notUserScoped, ...json } = achievementJson(tenant, a, null);
        return { ...json, ...stats.get(a.key) };
      }),
    };
  };
}

export function userAchievementsHandler(tenants: Tenants) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant, store } = tenants.authenticate(req.apiKey);
    const userId = req.params[0]!;
    checkUserId(userId, "user id");
    // trophy-compat §2.2 #13: only the literal "true" includes incomplete achievements.
    const includeIncomplete = req.query.get("includeIncomplete") === "true";
    const read = readStoreOf(store);
    const plan = new ReadPlan(read.slots);
    const decode = planUserAchievements(plan, tenant);
    // The user's read and the counters are independent: both in flight at once.
    const [result, stats] = await Promise.all([read.runPlan(userId, plan), achievementStats(read, tenant.achievements)]);
    if (result === null) failUserNotFound(userId);
    const state = decode(result);
    return {
      status: 200,
      body: userAchievementList(tenant.achievements, state, includeIncomplete).map((a) => ({
        ...achievementJson(tenant, a, state.achievedAt.get(a.key) ?? null),
        ...stats.get(a.key),
      })),
    };
  };
}
