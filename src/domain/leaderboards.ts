import type { CompiledLeaderboard } from "../config/compiled.js";
import { dateToDay, dayToDate, formatDay } from "./periods.js";

/**
 * Leaderboard runs, statuses, the total order of participants and rank numbers
 * (trophy-compat §3.7, §5.6). Pure; the stores and the reference model share it.
 *
 * Runs are UTC windows (a documented choice: one window for everyone, no finalisation delay):
 * run k of a repeating board covers [start + k × interval, start + (k + 1) × interval) where the
 * interval is runInterval days, months or years; a perpetual board has the single run 0 from
 * start to end. A run is named by the date of its first day (the `run` query parameter).
 */
const DAY_MS = 86_400_000;

function addMonths(day: number, months: number): number {
  const { y, m, d } = dayToDate(day);
  const total = y * 12 + (m - 1) + months;
  const year = Math.floor(total / 12);
  const month = (total % 12) + 1;
  // A start on the 31st runs from the last day of shorter months.
  const last = dayToDate(dateToDay(year, month + 1, 1) - 1).d;
  return dateToDay(year, month, Math.min(d, last));
}

/** First day (UTC day index) of run k. */
export function runStartDay(board: CompiledLeaderboard, run: number): number {
  if (board.runUnit === null) return board.startDay;
  const n = run * board.runInterval!;
  if (board.runUnit === "day") return board.startDay + n;
  return addMonths(board.startDay, board.runUnit === "month" ? n : 12 * n);
}

/** First day after run k (exclusive), capped by the board's end. */
export function runEndDay(board: CompiledLeaderboard, run: number): number | null {
  const next = board.runUnit === null ? null : runStartDay(board, run + 1);
  if (board.endDay === null) return next;
  return next === null ? board.endDay : Math.min(next, board.endDay);
}

/** The run that contains a UTC day, or null before the start or from the end on. */
export function runOfDay(board: CompiledLeaderboard, day: number): number | null {
  if (day < board.startDay || (board.endDay !== null && day >= board.endDay)) return null;
  if (board.runUnit === null) return 0;
  if (board.runUnit === "day") return Math.floor((day - board.startDay) / board.runInterval!);
  // Months and years: estimate, then step to the run whose window holds the day.
  const monthsPer = board.runUnit === "month" ? board.runInterval! : 12 * board.runInterval!;
  const { y: sy, m: sm } = dayToDate(board.startDay);
  const { y, m } = dayToDate(day);
  let run = Math.max(0, Math.floor(((y - sy) * 12 + (m - sm)) / monthsPer));
  while (run > 0 && runStartDay(board, run) > day) run -= 1;
  while (runStartDay(board, run + 1) <= day) run += 1;
  return run;
}

export function activeRun(board: CompiledLeaderboard, now: number): number | null {
  return runOfDay(board, Math.floor(now / DAY_MS));
}

/** The first run that begins after `now` (0 before the start; one past the last once finished). */
export function firstRunAfter(board: CompiledLeaderboard, now: number): number {
  const day = Math.floor(now / DAY_MS);
  if (day < board.startDay) return 0;
  return runOfDay(board, board.endDay === null ? day : Math.min(day, board.endDay - 1))! + 1;
}

/** The value at position maxParticipants of a run in board order, null while the run has room. */
export function thresholdOfEntries(board: CompiledLeaderboard, sorted: readonly BoardEntry[]): number | null {
  return sorted.length >= board.maxParticipants ? sorted[board.maxParticipants - 1]!.value : null;
}

/**
 * The threshold an event response shows: the value at position maxParticipants of a full board,
 * else 0 (room on the board: -Infinity as the scripts get it; a breakdown board, whose groups'
 * thresholds are not kept: NaN). lua/includes/leaderboards.lua does the same.
 */
export function shownThreshold(threshold: number): number {
  return Number.isFinite(threshold) ? threshold : 0;
}

export type BoardStatus = "scheduled" | "active" | "finished";

export function boardStatus(board: CompiledLeaderboard, now: number): BoardStatus {
  const day = Math.floor(now / DAY_MS);
  if (day < board.startDay) return "scheduled";
  if (board.endDay !== null && day >= board.endDay) return "finished";
  return "active";
}

/**
 * The first run still kept (keepFinishedRuns: the newest finished runs, and the active one); runs
 * before it are deleted or due for deletion (src/jobs/run-retention.ts). 0 when all are kept.
 */
export function firstKeptRun(board: CompiledLeaderboard, now: number): number {
  if (board.keepFinishedRuns === null) return 0;
  const status = boardStatus(board, now);
  if (status === "scheduled") return 0;
  // The newest finished run: the one before the active run, or the last run of an ended board.
  const newestFinished = status === "active" ? activeRun(board, now)! - 1 : runOfDay(board, board.endDay! - 1)!;
  return Math.max(0, newestFinished - board.keepFinishedRuns + 1);
}

export function runDate(board: CompiledLeaderboard, run: number): string {
  return formatDay(runStartDay(board, run));
}

/**
 * Zset members carry the tie-break: "<13 digits of (MAX - reachedAt ms)>|<userId>". Redis orders
 * equal scores by member, so ZREVRANGE lists, among equal values, the one who reached the value
 * first (largest MAX - ms) first; the user id settles a tie within the same millisecond.
 */
const MAX_MS = 9_999_999_999_999;

export function boardMember(reachedAt: number, userId: string): string {
  return `${String(MAX_MS - reachedAt).padStart(13, "0")}|${userId}`;
}

export function memberUser(member: string): string {
  return member.slice(14);
}


export interface BoardEntry {
  member: string;
  value: number;
}

/**
 * Rank numbers of a page of entries in board order whose first entry, at ordinal position `start`
 * (0-based), ranks `first`: each later entry shares the previous one's rank when their values are
 * equal, else starts a new one (ordinal and competition: its position; dense: one more). The
 * page's reads (GET /v1/leaderboards/{key}) and a finished run's webhook payload rank by it.
 */
export function pageRankNumbers(ranking: CompiledLeaderboard["ranking"], entries: readonly BoardEntry[], start: number, first: number): number[] {
  const ranks: number[] = [];
  for (let i = 0; i < entries.length; i++) {
    if (i === 0) ranks.push(first);
    else if (ranking === "ordinal") ranks.push(start + i + 1);
    else if (entries[i]!.value === entries[i - 1]!.value) ranks.push(ranks[i - 1]!);
    else ranks.push(ranking === "dense" ? ranks[i - 1]! + 1 : start + i + 1);
  }
  return ranks;
}

/** The board's total order: higher value first, then first to reach it (the member, descending). */
export function compareEntries(a: BoardEntry, b: BoardEntry): number {
  if (a.value !== b.value) return b.value - a.value;
  return compareCodePoints(b.member, a.member);
}

/**
 * The first `count` entries in board order of lists each already in board order, as shards give
 * them (ZREVRANGE ... WITHSCORES: member, score, member, score...): a merge that looks at each
 * list's next entry, O(count × lists) comparisons and an entry made for each one looked at, where
 * sorting them all made an entry of every string read and compared O(n log n) (the page around a
 * user reads 15 entries of each of 16 shards for 15 shown: a sixth of its service's CPU).
 */
export function firstInBoardOrder(lists: readonly (readonly string[])[], count: number): BoardEntry[] {
  return mergeBoardLists(lists, count, true);
}

/** The last `count` entries in board order of such lists, in board order. */
export function lastInBoardOrder(lists: readonly (readonly string[])[], count: number): BoardEntry[] {
  return mergeBoardLists(lists, count, false).reverse();
}

/** From the lists' starts (`first`) or their ends, the next entry each time: the earliest or the latest in board order of those not taken. */
function mergeBoardLists(lists: readonly (readonly string[])[], count: number, first: boolean): BoardEntry[] {
  const at = lists.map((list) => (first ? 0 : list.length - 2));
  const next = lists.map((list, l) => entryAt(list, at[l]!));
  const taken: BoardEntry[] = [];
  while (taken.length < count) {
    let best = -1;
    for (let l = 0; l < next.length; l++) {
      const entry = next[l];
      if (entry === null) continue;
      if (best < 0 || (first ? compareEntries(entry, next[best]!) < 0 : compareEntries(entry, next[best]!) > 0)) best = l;
    }
    if (best < 0) break;
    taken.push(next[best]!);
    at[best]! += first ? 2 : -2;
    next[best] = entryAt(lists[best]!, at[best]!);
  }
  return taken;
}

/** The entry at index i of a ZREVRANGE ... WITHSCORES list; null past either end. */
function entryAt(list: readonly string[], i: number): BoardEntry | null {
  return i >= 0 && i < list.length ? { member: list[i]!, value: Number(list[i + 1]) } : null;
}

/**
 * Two strings in code point order, which is the UTF-8 byte order Redis gives the members of equal
 * scores (memcmp). JavaScript's `<` compares UTF-16 units instead, and the two disagree where a
 * character above U+FFFF (a surrogate pair, units D800-DFFF) meets one of U+E000-U+FFFF.
 */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return x >= 0xd800 && y >= 0xd800 ? codePointRank(x) - codePointRank(y) : x - y;
  }
  return a.length - b.length;
}

/** A UTF-16 unit from D800 up, moved so that surrogates sort after U+E000-U+FFFF. */
const codePointRank = (unit: number): number => (unit >= 0xe000 ? unit - 0x800 : unit + 0x2000);

