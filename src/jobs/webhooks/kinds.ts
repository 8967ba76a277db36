import type { CompiledTenant } from "../../config/compiled.js";
import type { WebhookEventType } from "../../config/types.js";
import { uuidV5 } from "../../domain/ids.js";
import type { StreamRecord } from "../../domain/stream-record.js";

/**
 * Which outbound events one stream record stands for (trophy-compat §3.12, §5.8). Pure.
 *
 * The record a state-changing script appends to its shard stream, in the same atomic call as
 * the change (src/domain/stream-record.ts), is the single source of the events about users:
 *
 *   p:<sys>:<added>:<total>:<lvBefore>:<lvAfter>:<lastAward>  points.changed; points.level_changed when the levels differ
 *   a:<achievement>                               achievement.completed
 *   s:<length>                                    streak.extended; streak.started too when length is 1
 *   sl:<length>                                   streak.lost
 *   fc:<n>                                        streak.freeze_consumed
 *   fe:<n> (auto-earned), fa:<n> (admin grant)    streak.freeze_earned
 *   b:<board>:<run>:<old>:<new>:<pr>:<r>          leaderboard.rank_changed (when the rank moved)
 *
 * Each event's id is a UUIDv5 of the tenant, the shard, the record's entry id in the shard stream
 * (a hook stream's copy carries it as "x", lua/includes/hooks.lua), the type and the subject
 * (system, achievement, board...): a redelivery, a worker crash or a second worker derive the same
 * id, so a receiver may see an id twice (at least once) but never two ids for one change.
 */
export const WEBHOOK_EVENT_TYPES: readonly WebhookEventType[] = [
  "achievement.completed",
  "streak.started",
  "streak.extended",
  "streak.lost",
  "streak.freeze_consumed",
  "streak.freeze_earned",
  "points.changed",
  "points.level_changed",
  "points.boost_started",
  "points.boost_finished",
  "leaderboard.started",
  "leaderboard.finished",
  "leaderboard.rank_changed",
];

/**
 * The outcome parts a record needs for recordEvents to give it an event of each type, as
 * lua/includes/hooks.lua names them: the scripts that write the records also append to the
 * shard's hook stream, which is all the consumer reads, only the records that have a part wanted
 * by a subscribed type (and every "ub" record). null: events of the type come from the timeline
 * (boosts via the "ub" records, leaderboard runs from the config), not from outcome parts. A test
 * holds each type's parts against recordEvents (test/integration/webhook-select.test.ts).
 */
export const WANTED_PARTS: Readonly<Record<WebhookEventType, string | null>> = {
  "achievement.completed": "a",
  "points.changed": "p",
  "points.level_changed": "L",
  "streak.extended": "s",
  "streak.started": "S",
  "streak.lost": "sl",
  "streak.freeze_consumed": "fc",
  "streak.freeze_earned": "fe",
  "leaderboard.rank_changed": "b",
  "points.boost_started": null,
  "points.boost_finished": null,
  "leaderboard.started": null,
  "leaderboard.finished": null,
};

/** The wanted parts of a set of subscribed types, each once. */
export function wantedParts(types: Iterable<string>): string[] {
  const parts = new Set<string>();
  for (const type of types) {
    const part = WANTED_PARTS[type as WebhookEventType];
    if (part) parts.add(part);
  }
  return [...parts];
}

/**
 * What the record writers select for the hook stream (the rules' `wh`, lua/includes/hooks.lua):
 * false for a tenant without endpoints (nothing is selected), else the union of its endpoints'
 * wanted parts, each a key set to true (empty when they only want timeline types: then only the
 * "ub" records, which the user boost script selects on its own).
 */
export function tenantHookParts(tenant: Pick<CompiledTenant, "webhooks">): false | Record<string, true> {
  if (tenant.webhooks.length === 0) return false;
  return Object.fromEntries(tenantWantedParts(tenant).map((part) => [part, true]));
}

/** The record parts the tenant's endpoints, all together, want (wantedParts of every type subscribed). */
export function tenantWantedParts(tenant: Pick<CompiledTenant, "webhooks">): string[] {
  return wantedParts(tenant.webhooks.flatMap((w) => [...w.events]));
}

export interface BoardPart {
  boardKey: string;
  run: number;
  /** null: the user had no value in the run before. Metric boards in micro-units. */
  oldValue: number | null;
  newValue: number;
  /** The ranks before and after the change as the script counted them (null: off the board); undefined in records written before the part carried them. */
  ranks?: { previousRank: number | null; rank: number | null };
}

/** One event a record stands for, before its payload is built. */
export type RecordEvent =
  | { type: "points.changed" | "points.level_changed"; subject: string; points: StreamRecord["points"][number] }
  | { type: "achievement.completed"; subject: string }
  | { type: "streak.extended" | "streak.started"; subject: "streak"; length: number }
  | { type: "streak.lost"; subject: "streak"; length: number }
  | { type: "streak.freeze_consumed"; subject: "fc"; count: number }
  | { type: "streak.freeze_earned"; subject: "fe" | "fa"; count: number }
  | { type: "leaderboard.rank_changed"; subject: string; board: BoardPart };

/** The `b:` parts of a record's outcome field (decodeStreamRecord does not keep them). */
export function boardParts(flat: readonly string[]): BoardPart[] {
  let outcome = "";
  for (let i = 0; i + 1 < flat.length; i += 2) if (flat[i] === "o") outcome = flat[i + 1]!;
  const parts: BoardPart[] = [];
  for (const part of outcome.split(";")) {
    if (!part.startsWith("b:")) continue;
    // Board keys cannot contain ":" (config Key pattern).
    const [, boardKey, run, old, next, previousRank, rank] = part.split(":");
    const board: BoardPart = { boardKey: boardKey!, run: Number(run), oldValue: old === "" || old === undefined ? null : Number(old), newValue: Number(next) };
    // "b:<board>:<run>:<old>:<new>:<previous rank>:<rank>" ('' for none); without the ranks in records of earlier builds.
    if (rank !== undefined) board.ranks = { previousRank: previousRank === "" ? null : Number(previousRank), rank: rank === "" ? null : Number(rank) };
    parts.push(board);
  }
  return parts;
}

export function recordEvents(record: StreamRecord, boards: readonly BoardPart[]): RecordEvent[] {
  const out: RecordEvent[] = [];
  for (const key of record.achievements) out.push({ type: "achievement.completed", subject: key });
  for (const p of record.points) {
    if (p.added !== 0) out.push({ type: "points.changed", subject: p.systemKey, points: p });
    if (p.levelBefore !== p.levelAfter) out.push({ type: "points.level_changed", subject: p.systemKey, points: p });
  }
  if (record.streakLost !== null && record.streakLost > 0) out.push({ type: "streak.lost", subject: "streak", length: record.streakLost });
  if (record.freezesConsumed > 0) out.push({ type: "streak.freeze_consumed", subject: "fc", count: record.freezesConsumed });
  if (record.freezesEarned > 0) out.push({ type: "streak.freeze_earned", subject: "fe", count: record.freezesEarned });
  if (record.freezesGranted > 0) out.push({ type: "streak.freeze_earned", subject: "fa", count: record.freezesGranted });
  if (record.streakLength !== null) {
    if (record.streakLength === 1) out.push({ type: "streak.started", subject: "streak", length: 1 });
    out.push({ type: "streak.extended", subject: "streak", length: record.streakLength });
  }
  for (const b of boards) out.push({ type: "leaderboard.rank_changed", subject: `${b.boardKey}:${b.run}`, board: b });
  return out;
}

/** The id of an event derived from a record: `entryId` is its entry id in the shard stream ({t:s}:x). */
export function streamEventId(ns: string, tenantId: string, shard: number, entryId: string, type: string, subject: string): string {
  return uuidV5(`${tenantId}:${shard}:${entryId}:${type}:${subject}`, ns);
}

/** The id of a calendar event (a boost or a leaderboard run starting or finishing): one per boundary, ever. */
export function boundaryEventId(ns: string, tenantId: string, type: string, subject: string): string {
  return uuidV5(`${tenantId}:boundary:${type}:${subject}`, ns);
}

/** The id of a coalesced event: one per endpoint, type, user, subject and window. */
export function coalescedEventId(ns: string, tenantId: string, coalesceKey: string): string {
  return uuidV5(`${tenantId}:coalesced:${coalesceKey}`, ns);
}
