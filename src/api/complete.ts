import type { Logger } from "pino";
import typia from "typia";
import type { Clock } from "../clock.js";
import { fail } from "../domain/errors.js";
import { stableId } from "../domain/ids.js";
import type { ApiReply, ApiRequest } from "../http/router.js";
import type { Tenants } from "../tenants.js";
import { completeAchievement } from "../store/user-store.js";
import { parseJson, quoted, validated } from "./body.js";
import { pointsMapJson } from "./points-json.js";
import { userProfileFields, type UserInput } from "./user-input.js";
import { achievementJson } from "./wire.js";

interface CompleteBody {
  user: UserInput;
}
const validateCompleteBody = typia.createValidateEquals<CompleteBody>();

/**
 * POST /v1/achievements/{key}/complete (trophy-compat §2.2 #2, §3.4 AchievementCompletionResponse).
 * Only `type: api` achievements complete this way (422 otherwise; 404 for an unknown key). The
 * user is upserted like in an event. Completing again answers 200 with the original achievedAt,
 * the same completionId and `points: {}`, and changes nothing, unless a composite above it has
 * every part done (added to the tenant file since): that completes now, and the 200 carries it and
 * what it paid; the first completion answers 201.
 * A completion whose reply was lost with the Redis connection, re-sent by ioredis, is still the
 * first for its request: 201, with `points: {}` and only the achievement itself in
 * `achievements` (what it paid and unlocked went with the lost reply; lua/complete-4.lua).
 */
export function completeAchievementHandler(tenants: Tenants, clock: Clock, logger: Logger) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant, store } = tenants.authenticate(req.apiKey);
    const key = req.params[0]!;
    const achievement = tenant.achievementByKey.get(key) ?? fail("ACHIEVEMENT_NOT_FOUND", `Achievement not found: ${quoted(key)}`);
    if (achievement.type !== "api") fail("INVALID_VALUE", `Achievement ${key} is completed by its ${achievement.type === "composite" ? "prerequisites" : achievement.type}, not by the API`);
    const body = validated(parseJson(req.body), validateCompleteBody);
    const profile = userProfileFields(body.user, tenant.userAttributes);
    const now = clock.now();
    const result = await completeAchievement(store, body.user.id, key, profile, now);
    if (result.status === "ineligible") fail("INVALID_VALUE", `User ${quoted(body.user.id)} does not have the attributes achievement ${key} requires`);
    if (result.status === "completed" && result.resent) {
      logger.warn({ tenant: tenant.id, achievement: key, user: body.user.id }, "completion re-sent after a dropped Redis connection was already applied: applied once, answered without its points");
    }
    const completionId = stableId(tenant.ns, "completion", `${key}/${body.user.id}`);
    return {
      status: result.status === "completed" ? 201 : 200,
      body: {
        completionId,
        achievement: achievementJson(tenant, achievement, result.achievedAt),
        // What the composites completed by this call paid (on a 200 too: ones added since).
        points: result.points.length > 0 ? pointsMapJson(tenant, body.user.id, result.points) : {},
        // Composites this completion unlocked, beyond the achievement itself (a Laurel extra),
        // completed now: on a 200, composites added to the tenant file since its parts were done.
        achievements: result.completed.map((k) => achievementJson(tenant, tenant.achievementByKey.get(k)!, now)),
      },
    };
  };
}
