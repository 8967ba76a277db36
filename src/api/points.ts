import { rememberedAwardId } from "../domain/award-ids.js";
import { levelOf } from "../domain/levels.js";
import type { ApiReply, ApiRequest } from "../http/router.js";
import type { Tenants } from "../tenants.js";
import { failUserNotFound, systemOf } from "./lookup.js";
import { intParam } from "./query.js";
import { checkUserId } from "./user-input.js";
import { RawJson } from "../http/raw-json.js";
import { awardText, levelText, systemHeadText } from "./points-json.js";
import { levelJson, systemHeadJson, triggerResponseJson } from "./wire.js";

/** Default number of awards in the user points read (trophy-compat §2.2 #15: default 10, 1-100). */
export const DEFAULT_AWARDS = 10;

/** GET /v1/users/{id}/points/{key}: the metering gate, one Redis round trip. */
export function userPointsHandler(tenants: Tenants) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant, store } = tenants.authenticate(req.apiKey);
    const [userId, systemKey] = req.params as [string, string];
    checkUserId(userId, "user id");
    const system = systemOf(tenant, systemKey);
    const awards = intParam(req.query, "awards", DEFAULT_AWARDS, 1, 100);
    const read = await store.readUserPoints(userId, system.key, awards);
    if (read === null) failUserNotFound(userId);
    const level = levelOf(system.levels, read.total);
    // UserPointsResponse: the system's head, total, level, awards (rendered as text, raw-json.ts).
    const awardsText = read.awards.map((a) => awardText(tenant, system, a, rememberedAwardId(tenant.ns, userId, system.key, a.seq))).join(",");
    return {
      status: 200,
      body: new RawJson(`${systemHeadText(system)},"total":${read.total},"level":${level === null ? "null" : levelText(level)},"awards":[${awardsText}]}`),
    };
  };
}

/** GET /v1/points/{key}: the system and its triggers (trophy-compat §3.6 PointsSystemResponse). */
export function pointsSystemHandler(tenants: Tenants) {
  return (req: ApiRequest): ApiReply => {
    const { tenant, times } = tenants.authenticate(req.apiKey);
    const system = systemOf(tenant, req.params[0]!);
    return {
      status: 200,
      body: {
        ...systemHeadJson(system),
        triggers: system.triggers.map((t) => triggerResponseJson(t, tenant, times)),
        levels: system.levels.map(levelJson),
      },
    };
  };
}

/** GET /v1/points/{key}/levels (trophy-compat §6.4 PointsLevel[]), ascending by points. */
export function levelsHandler(tenants: Tenants) {
  return (req: ApiRequest): ApiReply => {
    const { tenant } = tenants.authenticate(req.apiKey);
    return { status: 200, body: systemOf(tenant, req.params[0]!).levels.map(levelJson) };
  };
}
