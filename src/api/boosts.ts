import { randomUUID } from "node:crypto";
import typia, { type tags } from "typia";
import type { Clock } from "../clock.js";
import type { CompiledBoost, CompiledSystem, Rounding } from "../config/compiled.js";
import { boostStatus, encodeUserBoosts, endedBoostEnd } from "../domain/boosts.js";
import { fail } from "../domain/errors.js";
import { userFiltersMatch } from "../domain/filters.js";
import { parseDay } from "../domain/periods.js";
import type { ApiReply, ApiRequest } from "../http/router.js";
import type { TenantContext, Tenants } from "../tenants.js";
import { changeUserBoost, readUser } from "../store/user-store.js";
import { isCleanText, parseJson, quoted, uncleanPart, validated } from "./body.js";
import { failUserNotFound, systemOf } from "./lookup.js";
import { checkUserId } from "./user-input.js";
import { iso, pairsJson } from "./wire.js";
import { boolParam, userIdParam } from "./query.js";

/**
 * Boosts (spec: Points boost, States and transitions, rules 6-7; trophy-compat §6.4 PointsBoost).
 * Global boosts come from the tenant file; user-specific boosts are created and ended through
 * the admin API. Status is by the service clock: scheduled before start, active in
 * [start, end), finished from end on.
 */
interface CreateBoostBody {
  userId: string;
  name: string & tags.MinLength<1> & tags.MaxLength<200>;
  multiplier: number;
  start: string;
  end?: string | null;
  rounding?: Rounding | null;
}
const validateCreateBoost = typia.createValidateEquals<CreateBoostBody>();

/** A stored user boost record (the {t:s}:ub index); status is computed when read. */
export interface UserBoostRecord {
  id: string;
  name: string;
  userId: string;
  pointsSystemKey: string;
  start: number;
  end: number | null;
  multiplier: number;
  rounding: Rounding;
  created: number;
}

const INSTANT = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2}))?$/;

function parseInstant(text: string, field: string): number {
  const ms = INSTANT.test(text) && parseDay(text.slice(0, 10)) !== null ? Date.parse(text.length === 10 ? `${text}T00:00:00Z` : text) : NaN;
  if (!Number.isFinite(ms)) fail("INVALID_VALUE", `${field} must be an ISO 8601 date or instant with a zone`);
  return ms;
}

/** PointsBoost of a global boost, its status at `now` (trophy-compat §6.4; webhook payloads too). */
export function globalBoostJson(system: CompiledSystem, boost: CompiledBoost, now: number) {
  const out: Record<string, unknown> = {
    id: boost.id,
    key: boost.key,
    name: boost.name,
    status: boostStatus(boost.start, boost.end, now),
    userId: null,
    pointsSystemId: system.id,
    pointsSystemKey: system.key,
    pointsSystemName: system.name,
    start: iso(boost.start),
    end: boost.end === null ? null : iso(boost.end),
    multiplier: boost.multiplier,
    rounding: boost.rounding,
  };
  if (boost.userAttributes.length > 0) out.userAttributes = pairsJson(boost.userAttributes);
  return out;
}

/** PointsBoost of a user boost, its status at `now`. */
export function userBoostJson(system: CompiledSystem, record: UserBoostRecord, now: number) {
  return {
    id: record.id,
    name: record.name,
    status: boostStatus(record.start, record.end, now),
    userId: record.userId,
    pointsSystemId: system.id,
    pointsSystemKey: system.key,
    pointsSystemName: system.name,
    start: iso(record.start),
    end: record.end === null ? null : iso(record.end),
    multiplier: record.multiplier,
    rounding: record.rounding,
    created: iso(record.created),
  };
}

/** Every user boost record of the tenant's shards (admin listing), or of one user's shard. */
async function userBoostRecords(context: TenantContext, userId: string | null): Promise<UserBoostRecord[]> {
  const { store } = context;
  const shards = userId === null ? [...Array(store.tenant.shards).keys()] : [store.shard(userId)];
  const pipeline = store.redis.pipeline();
  for (const shard of shards) pipeline.hgetall(store.keys.userBoosts(shard));
  const results = (await pipeline.exec()) ?? [];
  const records: UserBoostRecord[] = [];
  for (const [err, hash] of results) {
    if (err) throw err;
    for (const json of Object.values(hash as Record<string, string>)) records.push(JSON.parse(json) as UserBoostRecord);
  }
  return records
    .filter((r) => userId === null || r.userId === userId)
    .sort((a, b) => a.created - b.created || a.id.localeCompare(b.id));
}

/** POST /admin/v1/points/{key}/boosts: a boost for one user. */
export function createBoostHandler(tenants: Tenants, clock: Clock) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const context = tenants.authenticateAdmin(req.apiKey);
    const system = systemOf(context.tenant, req.params[0]!);
    const body = validated(parseJson(req.body), validateCreateBoost);
    checkUserId(body.userId, "userId");
    if (!isCleanText(body.name)) fail("INVALID_VALUE", `name contains ${uncleanPart(body.name)}`);
    if (!Number.isFinite(body.multiplier) || body.multiplier <= 0 || body.multiplier > 1000) {
      fail("INVALID_VALUE", "multiplier must be a positive number up to 1000");
    }
    if (Math.round(body.multiplier * 1e6) / 1e6 !== body.multiplier) fail("INVALID_VALUE", "multiplier has more than 6 decimals");
    const start = parseInstant(body.start, "start");
    const end = body.end == null ? null : parseInstant(body.end, "end");
    if (end !== null && end <= start) fail("INVALID_VALUE", "end must be after start");
    const now = clock.now();
    if (end !== null && end <= now) fail("INVALID_VALUE", "end must be in the future");
    const record: UserBoostRecord = {
      id: randomUUID(),
      name: body.name,
      userId: body.userId,
      pointsSystemKey: system.key,
      start,
      end,
      multiplier: body.multiplier,
      rounding: body.rounding ?? "down",
      created: now,
    };
    const entry = encodeUserBoosts([{ id: record.id, multiplier: record.multiplier, start, end, rounding: record.rounding }]);
    const result = await changeUserBoost(context.store, body.userId, "add", system.key, now, record.id, entry, JSON.stringify(record));
    if (result === "no-user") failUserNotFound(body.userId);
    return { status: 201, body: userBoostJson(system, record, now) };
  };
}

/** GET /admin/v1/points/{key}/boosts?userId&includeFinished: user boosts of the system. */
export function listUserBoostsHandler(tenants: Tenants, clock: Clock) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const context = tenants.authenticateAdmin(req.apiKey);
    const system = systemOf(context.tenant, req.params[0]!);
    const userId = userIdParam(req.query, "userId");
    const finished = boolParam(req.query, "includeFinished");
    const now = clock.now();
    const records = (await userBoostRecords(context, userId)).filter((r) => r.pointsSystemKey === system.key);
    return {
      status: 200,
      body: records.map((r) => userBoostJson(system, r, now)).filter((b) => finished || b.status !== "finished"),
    };
  };
}

/** DELETE /admin/v1/points/{key}/boosts/{id}: ends an active boost now; cancels a scheduled one. */
export function endBoostHandler(tenants: Tenants, clock: Clock) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const context = tenants.authenticateAdmin(req.apiKey);
    const system = systemOf(context.tenant, req.params[0]!);
    const id = req.params[1]!;
    const record = (await userBoostRecords(context, null)).find((r) => r.id === id && r.pointsSystemKey === system.key);
    if (!record) fail("BOOST_NOT_FOUND", `Boost not found: ${quoted(id)}`);
    const now = clock.now();
    if (boostStatus(record.start, record.end, now) === "finished") return { status: 200, body: userBoostJson(system, record, now) };
    // A scheduled boost gets an empty window (it never runs); an active one ends now (1 ms after
    // its start when it started this millisecond: it ran, so its window is not empty).
    const ended: UserBoostRecord = { ...record, end: endedBoostEnd(record.start, now) };
    const result = await changeUserBoost(context.store, record.userId, "end", system.key, now, id, "", JSON.stringify(ended));
    if (result === "no-user") failUserNotFound(record.userId);
    return { status: 200, body: userBoostJson(system, ended, now) };
  };
}

/** GET /v1/points/{key}/boosts?includeFinished: the system's global boosts (from the tenant file). */
export function globalBoostsHandler(tenants: Tenants, clock: Clock) {
  return (req: ApiRequest): ApiReply => {
    const { tenant } = tenants.authenticate(req.apiKey);
    const system = systemOf(tenant, req.params[0]!);
    const finished = boolParam(req.query, "includeFinished");
    const now = clock.now();
    return {
      status: 200,
      body: system.boosts.map((b) => globalBoostJson(system, b, now)).filter((b) => finished || b.status !== "finished"),
    };
  };
}

/**
 * GET /v1/users/{id}/points/{key}/boosts?includeFinished: the boosts that apply to this user,
 * global ones whose cohort matches the user's attributes first, then the user's own.
 */
export function userBoostsHandler(tenants: Tenants, clock: Clock) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const context = tenants.authenticate(req.apiKey);
    const { tenant } = context;
    const userId = req.params[0]!;
    checkUserId(userId, "user id");
    const system = systemOf(tenant, req.params[1]!);
    const finished = boolParam(req.query, "includeFinished");
    // The user (their attributes pick the global boosts) and their own boosts: one round trip.
    const [found, records] = await Promise.all([readUser(context.store, userId), userBoostRecords(context, userId)]);
    if (!found) failUserNotFound(userId);
    const attributes = new Map<string, string>();
    for (const [field, value] of found.profile.fields) if (field.startsWith("ua:")) attributes.set(field.slice(3), value);
    const now = clock.now();
    const global = system.boosts.filter((b) => userFiltersMatch(b.userAttributes, attributes)).map((b) => globalBoostJson(system, b, now));
    const own = records.filter((r) => r.pointsSystemKey === system.key).map((r) => userBoostJson(system, r, now));
    return { status: 200, body: [...global, ...own].filter((b) => finished || b.status !== "finished") };
  };
}
