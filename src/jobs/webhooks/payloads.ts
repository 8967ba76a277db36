import { globalBoostJson } from "../../api/boosts.js";
import type { CompiledBoost, CompiledLeaderboard, CompiledSystem, CompiledTenant, CompiledLevel } from "../../config/compiled.js";
import { boardJson } from "../../api/leaderboards.js";
import { userJson } from "../../api/users.js";
import { achievementJson, awardJson, iso, levelJson, systemHeadJson } from "../../api/wire.js";
import { fromMicro } from "../../domain/decimal.js";
import { boardMember, memberUser, pageRankNumbers, runDate, type BoardEntry } from "../../domain/leaderboards.js";
import { levelOf } from "../../domain/levels.js";
import { parseAwardRecord } from "../../domain/outcome.js";
import { localDayIndex, periodOfDay } from "../../domain/periods.js";
import { viewStreak } from "../../domain/streak.js";
import type { StreamRecord } from "../../domain/stream-record.js";
import { boardEntryKeys, boardKeys, boardRank, entryInRun, topEntries } from "../../store/leaderboard-store.js";
import type { TenantStore } from "../../store/tenant-store.js";
import { STREAK_START_DAY } from "../../store/state-slots.js";
import { readUser } from "../../store/user-store.js";
import { readStoreOf } from "../../store/read-store.js";
import type { BoardPart, RecordEvent } from "./kinds.js";

/**
 * Payloads of the outbound events (trophy-compat §3.12 and §5.8): every one has `id`, `type`
 * and `timestamp` (the service time of the change, ISO 8601), then the type's fields. Built by
 * the webhook consumer when it processes the stream record, so what is read besides the record
 * (the user's profile, freezes held, a streak's first period) is as of processing time, normally
 * milliseconds after the change.
 */
export type Payload = Record<string, unknown> & { id: string; type: string; timestamp: string };

export interface PayloadContext {
  tenant: CompiledTenant;
  store: TenantStore;
}

/** What the payloads of one record need from the user's hash, read once per record (`found`: as read, null for no user). */
interface UserView {
  user: Record<string, unknown>;
  state: Map<string, unknown>;
  found: Awaited<ReturnType<typeof readUser>>;
}

async function userView(ctx: PayloadContext, record: StreamRecord, boards: readonly string[]): Promise<UserView> {
  const found = await readUser(ctx.store, record.userId, ["ss", STREAK_START_DAY, "fz", ...boards.flatMap(boardEntryKeys)]);
  if (!found) return { user: { id: record.userId }, state: new Map(), found };
  return { user: userJson(ctx.tenant, record.userId, found.profile), state: found.state, found };
}

const levelOrNull = (level: CompiledLevel | undefined) => (level ? levelJson(level) : null);

/** Award records a points.changed event reads first, newest first (the rest only when the change is not among them). */
const AWARDS_READ = 20;

/**
 * The awards of one change: the newest awards of the system made at the record's instant whose
 * amounts add up to the change and that end at its total (the award list is written by the same
 * script as the record). Chronological. The newest AWARDS_READ are read first, the rest of the
 * list (100-120 kept, lua/includes/points.lua) only when the change is not wholly among them (a
 * consumer behind: it sent `awards: []` for a change more than 20 awards old). Empty when the
 * change has left the list.
 */
async function awardsOf(ctx: PayloadContext, system: CompiledSystem, record: StreamRecord, added: number, total: number, lastAward: number | null) {
  const shard = ctx.store.shard(record.userId);
  const key = ctx.store.keys.awards(shard, system.key, record.userId);
  let list = (await ctx.store.redis.lrange(key, 0, AWARDS_READ - 1)).map(parseAwardRecord);
  let picked = pickAwards(list, record.ms, added, total, lastAward);
  // Not found, or running off the end of what was read: the change may lie deeper.
  if ((picked === null || picked.cut) && list.length === AWARDS_READ) {
    list = list.concat((await ctx.store.redis.lrange(key, AWARDS_READ, -1)).map(parseAwardRecord));
    picked = pickAwards(list, record.ms, added, total, lastAward);
  }
  return (picked?.awards ?? []).reverse().map((a) => awardJson(ctx.tenant, system, record.userId, a));
}

/**
 * The awards of the change made at `ms` that ends at `total` and adds `added`, newest first, from
 * a list read newest first; null when the list does not reach the change's last award. That is
 * the award numbered `lastAward` (the last field of the record's "p:" part); in a record written before it, the
 * newest award of the instant at that total, which is another change's when a later change of
 * the same instant came back to the same total (up, down, up again: a batch, or a consumer behind).
 * `cut`: the list ended before the awards added up to `added`.
 */
function pickAwards<A extends { seq: number; ms: number; total: number; awarded: number }>(list: readonly A[], ms: number, added: number, total: number, lastAward: number | null): { awards: A[]; cut: boolean } | null {
  const end = list.findIndex((a) => a.ms === ms && a.total === total && (lastAward === null || a.seq === lastAward));
  if (end < 0) return null;
  const awards: A[] = [];
  let sum = 0;
  let i = end;
  for (; i < list.length && list[i]!.ms === ms && sum !== added; i++) {
    awards.push(list[i]!);
    sum += list[i]!.awarded;
  }
  return { awards, cut: sum !== added && i === list.length };
}

/** The streak as BaseStreakResponse at the record's period (trophy-compat §3.3). */
function streakAt(ctx: PayloadContext, record: StreamRecord, view: UserView, length: number) {
  const rule = ctx.tenant.streak!;
  const day = localDayIndex(record.ms, record.tz);
  const period = periodOfDay(day, rule.frequency);
  // The stored first period, unless the stored streak is a later one (it started after this change).
  const stored = view.state.get("ss");
  const earliest = period - length + 1;
  const storedIsThis = typeof stored === "number" && stored <= earliest;
  const startPeriod = storedIsThis ? stored : earliest;
  // The day it began: this record's when the record began it, else the stored one's if it is this streak.
  const storedDay = view.state.get(STREAK_START_DAY);
  const startDay = length === 1 ? day : storedIsThis && typeof storedDay === "number" ? storedDay : null;
  const freezes = view.state.get("fz");
  return viewStreak(rule, { length, startPeriod, startDay, lastPeriod: period, freezes: typeof freezes === "number" ? freezes : 0 }, day, period);
}

function boardValue(board: CompiledLeaderboard, value: number): number {
  return board.rankBy === "metric" ? fromMicro(value) : value;
}

interface HistoryEntry {
  t: number;
  pr: number | null;
  r: number | null;
  pv: number | null;
  v: number | null;
}

/** History entries a rank change reads first, newest first (the rest only when it is not among them). */
const HISTORY_READ = 20;
/** The entries a trim keeps (lua/includes/leaderboards.lua: past 120, LTRIM to the newest 100). */
const HISTORY_KEPT = 100;

/**
 * Rank and previous rank of a board change. The record's board part carries both, as the script
 * counted them ("b:<board>:<run>:<old>:<new>:<previous rank>:<rank>"). A record written by an
 * earlier build has only the values: its ranks are read from the history. The event script records both in the user's rank
 * history of the run ({t:s}:lh:<board>:<run>:<user>) in the same call as the stream record, so
 * they are the ranks of the change itself. It records every change that had or got a rank
 * (lua/includes/leaderboards.lua), and the history keeps at least its newest 100 entries. The
 * newest HISTORY_READ are read first; a change not among them (a consumer behind: forty events of
 * one user at once) is looked for in the rest. Not in the history though the history reaches back
 * to it (never trimmed, or its oldest entry is older), the change had no rank before or after (off
 * the board): both null, no event, no rank read. Only a change as old as a trimmed history or
 * older is ranked on the board as it is now, with the user's own
 * entry left out (boardRank's `without`). That costs two cross-shard rank reads (a ZCOUNT on
 * each shard's set, one call each on a standalone Redis: store/cross-shard.ts); it used to run for every change off the board, ~85% of the rank changes in the
 * webhooks bench with every type subscribed (bench/README.md, "The tenth stop").
 */
async function ranksOf(ctx: PayloadContext, board: CompiledLeaderboard, record: StreamRecord, run: number, change: BoardPart, breakdown: string, own: BoardEntry | null) {
  // Carried by the record (the script writes them into the board part with the history entry).
  if (change.ranks !== undefined) return change.ranks;
  // A record of an earlier build: the change's entry in the history.
  const key = ctx.store.keys.rankHistory(ctx.store.shard(record.userId), board.key, run, record.userId);
  const left = board.rankBy === "streak" && change.newValue === 0;
  let history = (await ctx.store.redis.lrange(key, 0, HISTORY_READ - 1)).map((text) => JSON.parse(text) as HistoryEntry);
  if (history.length === HISTORY_READ) history = history.concat((await ctx.store.redis.lrange(key, HISTORY_READ, -1)).map((text) => JSON.parse(text) as HistoryEntry));
  // The change's own entry: its instant, and the values before and after it. The value after
  // alone is not enough: a user who left the board and came back to the same value within the same
  // instant (a batch, or a consumer behind) would get the earlier change's ranks for a change
  // that had none (off the board before and after).
  const entry = history.find((h) => h.t === record.ms && h.v === (left ? null : change.newValue) && h.pv === change.oldValue);
  if (entry) return { rank: entry.r, previousRank: entry.pr };
  // Not there, in a history never trimmed (fewer entries than a trim keeps) or reaching back past
  // the change: it had no rank before or after. (An oldest entry of the change's own instant may
  // have had the change trimmed from beside it.)
  if (history.length < HISTORY_KEPT || history[history.length - 1]!.t < record.ms) return { rank: null, previousRank: null };
  const keys = boardKeys(ctx.store, board, run, breakdown);
  const member = boardMember(record.ms, record.userId);
  const onBoard = (value: number | null) => (value === null ? null : boardRank(ctx.store, board, keys, value, member, own));
  return { rank: left ? null : await onBoard(change.newValue), previousRank: await onBoard(change.oldValue) };
}

/**
 * The payloads of a record's events (one per event, without `id`), in event order; null for an
 * event that does not apply any more (its system, achievement or board left the config, or a
 * board change that moved no rank).
 */
export async function recordPayloads(ctx: PayloadContext, record: StreamRecord, events: readonly RecordEvent[]): Promise<(Omit<Payload, "id"> | null)[]> {
  const boards = events.flatMap((e) => (e.type === "leaderboard.rank_changed" ? [e.board.boardKey] : []));
  const view = await userView(ctx, record, boards);
  const timestamp = iso(record.ms);
  return Promise.all(
    events.map(async (event): Promise<Omit<Payload, "id"> | null> => {
      const head = { type: event.type, timestamp, user: view.user };
      switch (event.type) {
        case "points.changed": {
          const system = ctx.tenant.systemByKey.get(event.subject);
          if (!system) return null;
          const p = event.points;
          return {
            ...head,
            points: {
              ...systemHeadJson(system),
              total: p.total,
              added: p.added,
              awards: await awardsOf(ctx, system, record, p.added, p.total, p.lastAward),
              level: levelOrNull(levelOf(system.levels, p.total) ?? undefined),
            },
          };
        }
        case "points.level_changed": {
          const system = ctx.tenant.systemByKey.get(event.subject);
          if (!system) return null;
          const p = event.points;
          return {
            ...head,
            points: { ...systemHeadJson(system), total: p.total },
            previousLevel: levelOrNull(system.levels[p.levelBefore - 1]),
            newLevel: levelOrNull(system.levels[p.levelAfter - 1]),
          };
        }
        case "achievement.completed": {
          const achievement = ctx.tenant.achievementByKey.get(event.subject);
          return achievement ? { ...head, achievement: achievementJson(ctx.tenant, achievement, record.ms) } : null;
        }
        case "streak.started":
        case "streak.extended":
          return ctx.tenant.streak ? { ...head, streak: streakAt(ctx, record, view, event.length) } : null;
        case "streak.lost":
          return { ...head, length: event.length };
        case "streak.freeze_consumed":
          return { ...head, consumed: event.count, freezes: Number(view.state.get("fz") ?? 0) };
        case "streak.freeze_earned":
          return { ...head, earned: event.count, freezes: Number(view.state.get("fz") ?? 0) };
        case "leaderboard.rank_changed": {
          const board = ctx.tenant.leaderboardByKey.get(event.board.boardKey);
          if (!board) return null;
          // The user's entry in the change's run now: the state's for their latest run; in an
          // earlier one (a change made after the manual clock went back into it), the run's.
          const current = await entryInRun(ctx.store, board, event.board.run, record.userId, view.found);
          const breakdown = current?.breakdown ?? "";
          const own = current === null ? null : { value: current.value, member: current.member };
          const { rank, previousRank } = await ranksOf(ctx, board, record, event.board.run, event.board, breakdown, own);
          if (rank === previousRank) return null;
          const left = board.rankBy === "streak" && event.board.newValue === 0;
          return {
            ...head,
            leaderboard: {
              ...boardJson(ctx.tenant, board),
              status: "active",
              run: runDate(board, event.board.run),
              rank,
              value: left ? null : boardValue(board, event.board.newValue),
              previousRank,
              previousValue: event.board.oldValue === null ? null : boardValue(board, event.board.oldValue),
              breakdownAttributeValue: breakdown === "" ? null : breakdown,
            },
          };
        }
      }
    }),
  );
}

/** PointsBoost (trophy-compat §5.8 points.boost_*), as of the boundary: active at its start, finished at its end. */
export function globalBoostPayloadJson(system: CompiledSystem, boost: CompiledBoost, status: "active" | "finished") {
  return globalBoostJson(system, boost, status === "active" ? boost.start : boost.end!);
}

/** LeaderboardResponseWithRankings of a run at a boundary: no rankings at the start, the top 10 at the finish. */
export async function runPayloadJson(ctx: PayloadContext, board: CompiledLeaderboard, run: number, status: "active" | "finished") {
  const head = { ...boardJson(ctx.tenant, board), status, run: runDate(board, run) };
  // A board broken down by an attribute ranks each group apart: no single top 10.
  if (status === "active" || board.breakdownAttribute !== null) return { ...head, rankings: [] };
  const entries = await topEntries(ctx.store, boardKeys(ctx.store, board, run, ""), Math.min(10, board.maxParticipants));
  const users = entries.map((e) => memberUser(e.member));
  const names = await readStoreOf(ctx.store).names(users);
  // The top entry ranks 1 in every style.
  const ranks = pageRankNumbers(board.ranking, entries, 0, 1);
  return {
    ...head,
    rankings: entries.map((e, i) => ({ userId: users[i]!, userName: names.get(users[i]!) ?? null, rank: ranks[i]!, value: boardValue(board, e.value) })),
  };
}
