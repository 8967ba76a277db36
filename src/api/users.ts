import { createHash } from "node:crypto";
import typia, { type tags } from "typia";
import type { CompiledTenant } from "../config/compiled.js";
import type { ApiReply, ApiRequest } from "../http/router.js";
import type { Tenants } from "../tenants.js";
import { readUser, upsertUser, type UpsertMode, type UserProfile } from "../store/user-store.js";
import { parseJson, validated } from "./body.js";
import { checkUserId, userProfileFields, type UserInput } from "./user-input.js";
import { iso } from "./wire.js";
import { failUserNotFound } from "./lookup.js";

/**
 * Users (trophy-compat §2.2 #4-#9, §3.1, §3.10): create, identify (an upsert), get, update,
 * and notification preferences. Identify and create fire first identification like an event.
 */
type UpdatedUser = Omit<UserInput, "id">;
const validateUpserted = typia.createValidateEquals<UserInput>();
const validateUpdated = typia.createValidateEquals<UpdatedUser>();

export const NOTIFICATION_TYPES = ["achievement_completed", "recap", "reactivation", "streak_reminder"] as const;
/** The channel literals written inline: behind an alias of their own (`Channel`) typia named them by it, read as "an array of objects". */
type Channels = (("email" | "push")[] & tags.MaxItems<2>) | null;
interface PreferencesBody {
  notifications?: {
    achievement_completed?: Channels;
    recap?: Channels;
    reactivation?: Channels;
    streak_reminder?: Channels;
  } | null;
}
const validatePreferences = typia.createValidateEquals<PreferencesBody>();

/** Whether a user is in the experiment's control group: a stable hash of tenant and user id. */
export function inControlGroup(tenant: CompiledTenant, userId: string): boolean {
  if (tenant.controlPercent <= 0) return false;
  const bucket = createHash("sha1").update(`${tenant.id}:${userId}`).digest().readUInt32BE(0) % 10_000;
  return bucket < tenant.controlPercent * 100;
}

/** User (trophy-compat §3.1). subscribeToEmails defaults to true (trophy-compat §5.3). */
export function userJson(tenant: CompiledTenant, userId: string, profile: UserProfile) {
  const f = profile.fields;
  const attributes: Record<string, string> = {};
  for (const key of tenant.userAttributes) {
    const value = f.get(`ua:${key}`);
    if (value !== undefined) attributes[key] = value;
  }
  return {
    id: userId,
    // Empty: cleared by subscribeToEmails false. Hidden while unsubscribed: an email sent later
    // without the flag is kept but not shown (re-subscribing needs an email with it, user-input.ts).
    email: f.get("se") === "0" ? null : f.get("em") || null,
    name: f.get("nm") ?? null,
    tz: f.get("tz") ?? null,
    deviceTokens: f.has("dt") ? (JSON.parse(f.get("dt")!) as string[]) : null,
    subscribeToEmails: f.get("se") !== "0",
    attributes,
    control: inControlGroup(tenant, userId),
    created: iso(profile.created),
    updated: iso(profile.updated),
  };
}

/** Stored "type=email,push;recap=" → {notifications: {...}}; a type never set is absent. */
export function preferencesJson(profile: UserProfile) {
  const notifications: Record<string, string[]> = {};
  for (const part of (profile.fields.get("np") ?? "").split(";")) {
    if (part === "") continue;
    const [kind, channels] = part.split("=");
    notifications[kind!] = channels === "" ? [] : channels!.split(",");
  }
  return { notifications };
}

function upsertHandler(tenants: Tenants, clock: { now(): number }, mode: UpsertMode, idFrom: "body" | "path") {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant, store } = tenants.authenticate(req.apiKey);
    // The path's id is judged before the body, as the README orders a request's faults.
    if (idFrom === "path") checkUserId(req.params[0]!, "user id");
    const raw = parseJson(req.body);
    const user: UserInput = idFrom === "body" ? validated(raw, validateUpserted) : { ...validated(raw, validateUpdated), id: req.params[0]! };
    const profile = userProfileFields(user, tenant.userAttributes, "body");
    const result = await upsertUser(store, user.id, mode, profile, clock.now());
    if (result.status === "missing") failUserNotFound(user.id);
    const status = idFrom === "body" && result.status === "created" ? 201 : 200;
    return { status, body: userJson(tenant, user.id, result.profile!) };
  };
}

export const createUserHandler = (tenants: Tenants, clock: { now(): number }) => upsertHandler(tenants, clock, "upsert", "body");
export const identifyUserHandler = (tenants: Tenants, clock: { now(): number }) => upsertHandler(tenants, clock, "upsert", "path");
export const updateUserHandler = (tenants: Tenants, clock: { now(): number }) => upsertHandler(tenants, clock, "update", "path");

export function getUserHandler(tenants: Tenants) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant, store } = tenants.authenticate(req.apiKey);
    const userId = req.params[0]!;
    checkUserId(userId, "user id");
    const found = await readUser(store, userId);
    if (!found) failUserNotFound(userId);
    return { status: 200, body: userJson(tenant, userId, found.profile) };
  };
}

export function getPreferencesHandler(tenants: Tenants) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { store } = tenants.authenticate(req.apiKey);
    const userId = req.params[0]!;
    checkUserId(userId, "user id");
    const found = await readUser(store, userId);
    if (!found) failUserNotFound(userId);
    return { status: 200, body: preferencesJson(found.profile) };
  };
}

export function patchPreferencesHandler(tenants: Tenants, clock: { now(): number }) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { store } = tenants.authenticate(req.apiKey);
    const userId = req.params[0]!;
    checkUserId(userId, "user id");
    const body = validated(parseJson(req.body), validatePreferences);
    const patch = NOTIFICATION_TYPES.flatMap((kind) => {
      const channels = body.notifications?.[kind];
      return channels == null ? [] : [`${kind}=${[...new Set(channels)].join(",")}`];
    }).join(";");
    const result = await upsertUser(store, userId, "prefs", [], clock.now(), patch);
    if (result.status === "missing") failUserNotFound(userId);
    return { status: 200, body: preferencesJson(result.profile!) };
  };
}
