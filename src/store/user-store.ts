import type { PointsChange } from "../domain/outcome.js";
import { fail } from "../domain/errors.js";
import { localDayIndex, periodOfDay, periodStartInstant, streakDeadline } from "../domain/periods.js";
import { PROFILE_FIELDS, userAttributeField } from "./fields.js";
import { runScript } from "./redis-script.js";
import { timeTriggerZset, userBoostField } from "./rules.js";
import { decodePoints, readUserScript, userBoostScript, ZONE_ATTEMPTS, type TenantStore } from "./tenant-store.js";
import { callOrderOf } from "./call-order.js";

/**
 * Every script call about one user other than the event and the metering read: identify,
 * update, preferences, API completions, user boosts, admin streak operations. KEYS and ARGV are
 * built here and only here (BullMQ's scripts.ts).
 */
export interface UserProfile {
  created: number;
  updated: number;
  /** Profile fields by state-hash name (tz, em, nm, se, dt, np, ua:<attr>); absent when unset. */
  fields: Map<string, string>;
}

export interface UpsertResult {
  status: "created" | "updated" | "missing";
  profile: UserProfile | null;
  points: PointsChange[];
}

export type UpsertMode = "upsert" | "update" | "prefs";

/** The zone a request sent for the user, UTC without one (the day of first identification is counted in it). */
function sentZone(profile: readonly (readonly [string, string])[]): string {
  return profile.find(([field]) => field === "tz")?.[1] ?? "UTC";
}

/**
 * The completion and the streak operations read their writer's record on every call, so a
 * re-send needs no flag; told of one all the same, runScript keeps the call's number for a retry
 * after NOSCRIPT (its first send may have run) and gives a first send's retry a new one.
 */
const KEEP_NUMBER_IF_RESENT = (): void => {};

/**
 * ARGV[5] of the user and complete scripts: the local day of now in the zone the request sends
 * (UTC without one), and with a zone sent to a tenant with a streak, that zone's streak calendar
 * ("day|period|lost-at if last covered in period|lost-at if in period - 1|start of period|start
 * of period - 1"): a zone change moves a live streak and its deadline to the new calendar
 * (lua/includes/state.lua moveCalendar, placeDeadline).
 */
function zoneCalendarArg(store: TenantStore, profile: readonly (readonly [string, string])[], now: number): number | string {
  const tz = sentZone(profile);
  const day = localDayIndex(now, tz);
  const rule = store.tenant.streak;
  if (!rule || !profile.some(([field]) => field === "tz")) return day;
  const period = periodOfDay(day, rule.frequency);
  const f = rule.frequency;
  return `${day}|${period}|${streakDeadline(period, f, tz)}|${streakDeadline(period - 1, f, tz)}|${periodStartInstant(period, f, tz)}|${periodStartInstant(period - 1, f, tz)}`;
}

/** The profile tail of the user and complete scripts: r, the r field names to read, n, the n sent field/value pairs. */
function profileArgs(names: readonly string[], profile: readonly (readonly [string, string])[]): (string | number)[] {
  return [names.length, ...names, profile.length, ...profile.flat()];
}

function profileFieldNames(store: TenantStore): string[] {
  return [...PROFILE_FIELDS, ...[...store.tenant.userAttributes].map(userAttributeField)];
}

function userKeys(store: TenantStore, userId: string): string[] {
  const shard = store.shard(userId);
  return [store.keys.user(shard, userId), store.keys.agg(shard), store.keys.stream(shard)];
}

export async function upsertUser(
  store: TenantStore,
  userId: string,
  mode: UpsertMode,
  profile: [string, string][],
  now: number,
  prefsPatch = "",
): Promise<UpsertResult> {
  const names = profileFieldNames(store);
  const reply = (await runScript(store.redis, store.tenantScripts.user, userKeys(store, userId), [
    store.keys.prefix(store.shard(userId)),
    userId,
    now,
    mode,
    zoneCalendarArg(store, profile, now),
    prefsPatch,
    store.boardsBlob(now),
    ...profileArgs(names, profile),
  ])) as unknown[];
  if (reply[0] === 0) return { status: "missing", profile: null, points: [] };
  const fields = new Map<string, string>();
  [...names, "np"].forEach((name, i) => {
    const value = reply[4 + i];
    if (typeof value === "string") fields.set(name, value);
  });
  // The stored zone, for the next event that omits `tz` (ZoneCache): guessed from before the
  // identify, its first call would miss.
  const tz = fields.get("tz");
  if (tz !== undefined) store.zones.remember(userId, tz);
  return {
    status: reply[0] === 1 ? "created" : "updated",
    profile: { created: reply[1] as number, updated: reply[2] as number, fields },
    points: decodePoints(reply[3] as unknown[][]),
  };
}

/** The user's profile and the asked keys of the hot state, or null for an unknown user. */
export async function readUser(
  store: TenantStore,
  userId: string,
  stateKeys: string[] = [],
): Promise<{ profile: UserProfile; state: Map<string, number | string> } | null> {
  const names = [...profileFieldNames(store), "np"];
  const shard = store.shard(userId);
  const reply = (await runScript(store.redis, readUserScript, [store.keys.user(shard, userId)], [
    names.length,
    ...names,
    ...store.slots.readArgs(["ct", "up", ...stateKeys]),
  ])) as unknown[];
  if (reply[0] === 0) return null;
  const fields = new Map<string, string>();
  names.forEach((name, i) => {
    const value = reply[1 + i];
    if (typeof value === "string") fields.set(name, value);
  });
  const state = new Map<string, number | string>();
  stateKeys.forEach((key, i) => {
    const value = reply[1 + names.length + 2 + i];
    if (value !== null && value !== undefined) state.set(key, value as number | string);
  });
  return {
    profile: { created: reply[1 + names.length] as number, updated: reply[2 + names.length] as number, fields },
    state,
  };
}

export type CompletionResult =
  /** `resent`: this call's reply was lost with the connection and ioredis re-sent it; what it paid went with the lost reply. */
  | { status: "completed"; achievedAt: number; completed: string[]; points: PointsChange[]; resent?: true }
  /** `completed`, `points`: composites above it whose parts were all done, completed by this call (lua/complete-4.lua, status 5). */
  | { status: "already"; achievedAt: number; completed: string[]; points: PointsChange[] }
  | { status: "ineligible" };

export async function completeAchievement(
  store: TenantStore,
  userId: string,
  achievementKey: string,
  profile: [string, string][],
  now: number,
): Promise<CompletionResult> {
  // The zone, the declared attributes (filters) and whatever else the request sends.
  const names = [...store.tenantRules.profileFields];
  for (const [field] of profile) if (!names.includes(field)) names.push(field);
  const order = callOrderOf(store.redis);
  const keys = [...userKeys(store, userId), store.keys.writer(store.shard(userId), order.writer)];
  const args = [
    store.keys.prefix(store.shard(userId)),
    userId,
    now,
    achievementKey,
    zoneCalendarArg(store, profile, now),
    store.boardsBlob(now),
    ...profileArgs(names, profile),
    order.next(),
  ];
  const reply = (await runScript(store.redis, store.tenantScripts.complete, keys, args, KEEP_NUMBER_IF_RESENT, () => (args[args.length - 1] = order.next()))) as unknown[];
  // A first completion stored the profile sent, its zone too: remembered for the user's next
  // event without one (ZoneCache), as an identify's. Not remembered, that event went on the old
  // zone, was refused and sent again: in a batch, after another user's later event (a tie on a
  // board ranked out of the batch's order; found by the rules property's final board checks).
  if (reply[0] === 1 || (reply[0] === 4 && reply[1] === now)) {
    const tz = profile.find(([field]) => field === "tz")?.[1];
    if (tz !== undefined) store.zones.remember(userId, tz);
  }
  if (reply[0] === 2) return { status: "already", achievedAt: reply[1] as number, completed: [], points: [] };
  if (reply[0] === 5) return { status: "already", achievedAt: reply[1] as number, completed: reply[2] as string[], points: decodePoints(reply[3] as unknown[][]) };
  if (reply[0] === 4) {
    // Applied before its re-send (or numbered below a call applied since): the first completion
    // if it completed the achievement (at this call's `now`, which the re-send carries too),
    // else a repeat of one done already. A repeat in the very millisecond of another request's
    // first completion reads as the first (README, A reply lost with the Redis connection).
    const achievedAt = reply[1] as number;
    if (achievedAt !== now) return { status: "already", achievedAt, completed: [], points: [] };
    return { status: "completed", achievedAt, completed: [achievementKey], points: [], resent: true };
  }
  if (reply[0] === 3) return { status: "ineligible" };
  return { status: "completed", achievedAt: reply[1] as number, completed: reply[2] as string[], points: decodePoints(reply[3] as unknown[][]) };
}

/**
 * Adds or ends a user boost; false when the user (add) or the live boost (end) does not exist.
 * The script appends a "ub" record to the shard stream with the change (and to the hook stream
 * when the tenant has an endpoint): the webhook consumer schedules the boost's boundaries from it.
 */
export async function changeUserBoost(
  store: TenantStore,
  userId: string,
  op: "add" | "end",
  systemKey: string,
  now: number,
  boostId: string,
  entry: string,
  record: string,
): Promise<"done" | "no-user" | "not-live"> {
  const shard = store.shard(userId);
  // The system's time-trigger due sets: a finished boost stays while an unpaid interval may need it.
  const dueSets = store.tenant.systemByKey
    .get(systemKey)!
    .triggers.filter((t) => t.type === "time")
    .map((t) => store.keys.prefix(shard) + timeTriggerZset(t));
  const keys = [store.keys.user(shard, userId), store.keys.userBoosts(shard), store.keys.stream(shard), ...dueSets];
  const reply = (await runScript(store.redis, userBoostScript, keys, [
    op,
    userBoostField(systemKey),
    now,
    boostId,
    entry,
    record,
    userId,
    store.tenant.webhooks.length > 0 ? "1" : "",
    store.slots.index(userBoostField(systemKey)),
  ])) as unknown[];
  return reply[0] === 1 ? "done" : reply[0] === 0 ? "no-user" : "not-live";
}

export type StreakAdminResult =
  | { status: "missing" }
  | { status: "frozen"; granted: number; held: number }
  /** A freeze grant Redis had applied when ioredis re-sent it after a dropped connection (src/store/call-order.ts). */
  | { status: "already-applied" }
  | { status: "restored"; length: number }
  | { status: "nothing-to-restore" }
  | { status: "already-longest" }
  | { status: "settled"; consumed: number; lost: number; stillDue: boolean };

/**
 * Grants freezes or restores a streak. The script must know the user's calendar; the zone is
 * guessed (cache, else UTC), checked by the script, and the call repeated with the stored zone.
 */
export async function streakAdmin(
  store: TenantStore,
  userId: string,
  op: "freeze" | "restore" | "settle",
  now: number,
  amountOrWindow: (frequencyPeriod: number) => number,
): Promise<StreakAdminResult> {
  const rule = store.tenant.streak!;
  let tz = store.zones.get(userId) ?? "UTC";
  const order = callOrderOf(store.redis);
  const shard = store.shard(userId);
  // Every key lua/streakAdmin-9.lua touches, all of the user's slot (but a leaderboard's: see there).
  const keys = [
    ...userKeys(store, userId),
    store.keys.writer(shard, order.writer),
    store.keys.hookStream(shard),
    store.keys.streakActive(shard),
    store.keys.streakDeadline(shard),
    store.keys.streakBest(shard),
    store.keys.streakHistory(shard, userId),
  ];
  for (let attempt = 0; attempt < ZONE_ATTEMPTS; attempt++) {
    const nowDay = localDayIndex(now, tz);
    const nowPeriod = periodOfDay(nowDay, rule.frequency);
    const args = [
      store.keys.prefix(shard),
      userId,
      now,
      op,
      tz,
      nowDay,
      nowPeriod,
      streakDeadline(nowPeriod - 1, rule.frequency, tz),
      streakDeadline(nowPeriod, rule.frequency, tz),
      amountOrWindow(nowPeriod),
      store.boardsBlob(now),
      order.next(),
    ];
    const reply = (await runScript(store.redis, store.tenantScripts.streakAdmin, keys, args, KEEP_NUMBER_IF_RESENT, () => (args[args.length - 1] = order.next()))) as unknown[];
    if (reply[0] === -1) {
      tz = reply[1] as string;
      store.zones.set(userId, tz);
      continue;
    }
    if (reply[0] === 0) return { status: "missing" };
    if (reply[0] === 5) return { status: "already-applied" };
    if (op === "settle") return { status: "settled", consumed: reply[1] as number, lost: reply[2] as number, stillDue: reply[3] === 1 };
    if (op === "freeze") return { status: "frozen", granted: reply[1] as number, held: reply[2] as number };
    if (reply[0] === 3) return { status: "nothing-to-restore" };
    if (reply[0] === 4) return { status: "already-longest" };
    return { status: "restored", length: reply[1] as number };
  }
  fail("ZONE_CHANGING");
}
