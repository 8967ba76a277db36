import type { Clock } from "../clock.js";
import type { CompiledLeaderboard, CompiledTenant } from "../config/compiled.js";
import { fromMicro } from "../domain/decimal.js";
import { fail } from "../domain/errors.js";
import { activeRun, boardStatus, firstKeptRun, memberUser, pageRankNumbers, runDate, runOfDay, type BoardEntry } from "../domain/leaderboards.js";
import type { BoardChange } from "../domain/outcome.js";
import { formatDay, parseDay } from "../domain/periods.js";
import type { ApiReply, ApiRequest } from "../http/router.js";
import { openObject, RawJson, renderedOnce } from "../http/raw-json.js";
import { boardKeys, entryInRun, placeOnBoard, rankOf, readBoardUser, topEntries, userBoardRank, userEntry } from "../store/leaderboard-store.js";
import type { TenantStore } from "../store/tenant-store.js";
import { readStoreOf } from "../store/read-store.js";
import type { Tenants } from "../tenants.js";
import { attributeFilterParam, boolParam, intParam, userIdParam } from "./query.js";
import { checkUserId } from "./user-input.js";
import { iso } from "./wire.js";
import { isCleanText, quoted } from "./body.js";
import type { Query } from "../http/query.js";
import { failUserNotFound } from "./lookup.js";

/**
 * Leaderboards (trophy-compat §2.2 #17, #23, #24, §3.7, §5.6). Values on the wire are in the
 * board's unit: a metric board's total (micro-units inside), points, or streak periods.
 */
function wireValue(board: CompiledLeaderboard, value: number): number {
  return board.rankBy === "metric" ? fromMicro(value) : value;
}

/** LeaderboardResponse (trophy-compat §3.7). */
export function boardJson(tenant: CompiledTenant, board: CompiledLeaderboard) {
  const out: Record<string, unknown> = {
    id: board.id,
    key: board.key,
    name: board.name,
    description: board.description,
    rankBy: board.rankBy,
    breakdownAttribute: board.breakdownAttribute,
    start: formatDay(board.startDay),
    end: board.endDay === null ? null : formatDay(board.endDay),
    maxParticipants: board.maxParticipants,
    runUnit: board.runUnit,
    runInterval: board.runInterval,
    ranking: board.ranking,
  };
  if (board.metric !== null) Object.assign(out, { metricKey: board.metric, metricName: tenant.metricByKey.get(board.metric)!.name });
  if (board.points !== null) Object.assign(out, { pointsSystemKey: board.points, pointsSystemName: tenant.systemByKey.get(board.points)!.name });
  return out;
}

/** `"key":` and the board's static fields, without the closing brace: an entry's opening. */
const boardEntryText = renderedOnce((board: CompiledLeaderboard, tenant: CompiledTenant) => `${JSON.stringify(board.key)}:${openObject(boardJson(tenant, board))}`);

/**
 * The `leaderboards` map of an event response (MetricEventLeaderboardResponse): each board the
 * request moved, with the rank and threshold the script counted (lua/includes/leaderboards.lua)
 * and previousRank, the rank the user was given at their previous change in the run. Rendered
 * as text: the board's static fields once per config (src/http/raw-json.ts).
 */
export function eventLeaderboardsJson(tenant: CompiledTenant, changes: readonly BoardChange[]): RawJson {
  const entries: string[] = [];
  for (const change of changes) {
    const board = tenant.leaderboardByKey.get(change.boardKey)!;
    const breakdown = change.breakdown === "" ? "null" : JSON.stringify(change.breakdown);
    entries.push(
      `${boardEntryText(board, tenant)},"threshold":${wireValue(board, change.threshold)},"rank":${change.rank},` +
        `"previousRank":${change.previousRank},"breakdownAttributeValue":${breakdown},"run":"${runDate(board, change.run)}"}`,
    );
  }
  return new RawJson(`{${entries.join(",")}}`);
}

function boardOf(tenant: CompiledTenant, key: string): CompiledLeaderboard {
  return tenant.leaderboardByKey.get(key) ?? fail("LEADERBOARD_NOT_FOUND", `Leaderboard not found: ${quoted(key)}`);
}

/** The run a read names (`run=YYYY-MM-DD`, any day of the run), else the current or last one. */
function selectRun(store: TenantStore, board: CompiledLeaderboard, query: Query, now: number): number | null {
  const raw = query.get("run");
  if (raw !== null && raw !== "") {
    const day = parseDay(raw);
    if (day === null) fail("INVALID_QUERY", "run must be a date YYYY-MM-DD");
    const run = runOfDay(board, day);
    if (run === null) fail("OUT_OF_RANGE", `No run of ${board.key} contains ${raw}`);
    if (run < firstKeptRun(board, now)) {
      fail("RUN_NOT_KEPT", `The run of ${board.key} from ${runDate(board, run)} is no longer kept (keepFinishedRuns: ${board.keepFinishedRuns})`);
    }
    // Deleted under a lower keepFinishedRuns than the tenant file's now: gone all the same.
    if (run < (store.runsDeletedBefore.get(board.key) ?? 0)) {
      fail("RUN_NOT_KEPT", `The run of ${board.key} from ${runDate(board, run)} is no longer kept (deleted under an earlier keepFinishedRuns)`);
    }
    return run;
  }
  const status = boardStatus(board, now);
  if (status === "scheduled") return null;
  if (status === "active") return activeRun(board, now);
  return runOfDay(board, board.endDay! - 1);
}

/**
 * `userAttributes=attr:value` picks the group of a breakdown board (required there; its pairs of
 * other attributes pick nothing). A board without a breakdown has no groups to pick, and ignores
 * it. Either way the whole filter is checked as every read that takes one checks it (query.ts
 * attributeFilterParam: 400 malformed, 422 an undeclared attribute), so that a misspelt filter is
 * not read as a filtered board.
 */
function selectBreakdown(tenant: CompiledTenant, board: CompiledLeaderboard, query: Query): string {
  const raw = query.get("userAttributes");
  if (board.breakdownAttribute === null) {
    attributeFilterParam(query, "userAttributes", tenant.userAttributes);
    return "";
  }
  if (raw === null || raw === "") fail("OUT_OF_RANGE", `Leaderboard ${board.key} is broken down by ${board.breakdownAttribute}: pass userAttributes=${board.breakdownAttribute}:<value>`);
  let group: string | null = null;
  for (const pair of raw.split(",")) {
    const at = pair.indexOf(":");
    if (at > 0 && pair.slice(0, at) === board.breakdownAttribute) {
      const value = pair.slice(at + 1);
      // As attributeFilterParam (query.ts): a second pair of the attribute is malformed, and no
      // stored attribute value holds a control character (user-input.ts checkAttributes).
      if (!isCleanText(value)) fail("INVALID_QUERY", `userAttributes must be ${board.breakdownAttribute}:<value> with a value without control characters`);
      // Well formed (the empty string elsewhere), but the board ranks only users with a value
      // (lua/includes/leaderboards.lua): an empty one is on no group, as a missing one.
      if (value === "") fail("OUT_OF_RANGE", `Leaderboard ${board.key} is broken down by ${board.breakdownAttribute}: users whose ${board.breakdownAttribute} is empty are on no group; pass a value`);
      if (group !== null) fail("INVALID_QUERY", `userAttributes names the attribute ${board.breakdownAttribute} more than once`);
      group = value;
    }
  }
  // The other pairs pick nothing here, but are checked as every read that takes the filter
  // checks them: `region:eu,colour` or `region:eu,colour:red` (undeclared) was read as a
  // well-formed filter of the group, where the same query on any other read is refused.
  attributeFilterParam(query, "userAttributes", tenant.userAttributes);
  return group ?? fail("OUT_OF_RANGE", `userAttributes must name ${board.breakdownAttribute}`);
}

/** GET /v1/leaderboards?includeFinished: every board with its status. From memory. */
export function listLeaderboardsHandler(tenants: Tenants, clock: Clock) {
  return (req: ApiRequest): ApiReply => {
    const { tenant } = tenants.authenticate(req.apiKey);
    const finished = boolParam(req.query, "includeFinished");
    const now = clock.now();
    return {
      status: 200,
      body: tenant.leaderboards
        .map((b) => ({ ...boardJson(tenant, b), status: boardStatus(b, now) }))
        .filter((b) => finished || b.status !== "finished"),
    };
  };
}

/**
 * The largest `limit` of a page: the board's size (trophy-compat §2.2 #24: "cannot exceed
 * leaderboard size"), so that a board of the default 1000 participants comes in one page, but at
 * most PAGE_LIMIT_CAP (a page costs one ZREVRANGE of offset + limit entries per shard and a name
 * read per entry; a board of millions is read in pages), and never below 100, which every board
 * accepted before (a page past the board's end is simply shorter).
 */
const PAGE_LIMIT_CAP = 1000;
function pageLimit(board: CompiledLeaderboard): number {
  return Math.max(100, Math.min(board.maxParticipants, PAGE_LIMIT_CAP));
}

/**
 * GET /v1/leaderboards/{key}?offset&limit&run&userId&userAttributes: a page of the run's
 * rankings (LeaderboardResponseWithRankings). Only the top maxParticipants are on the board. With
 * userId, offset counts from that user's position (negative offsets look above: "around me").
 */
export function getLeaderboardHandler(tenants: Tenants, clock: Clock) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant, store } = tenants.authenticate(req.apiKey);
    const board = boardOf(tenant, req.params[0]!);
    const now = clock.now();
    const userId = userIdParam(req.query, "userId");
    const offset = intParam(req.query, "offset", 0, userId === null ? 0 : -100_000_000, 100_000_000);
    const limit = intParam(req.query, "limit", 10, 0, pageLimit(board));
    const run = selectRun(store, board, req.query, now);
    const breakdown = selectBreakdown(tenant, board, req.query);
    const head = { ...boardJson(tenant, board), status: boardStatus(board, now), run: run === null ? null : runDate(board, run) };
    if (run === null || limit === 0) return { status: 200, body: { ...head, rankings: [] } };
    const keys = boardKeys(store, board, run, breakdown);

    let start: number;
    let entries: BoardEntry[];
    if (userId === null) {
      start = offset;
      entries = (await topEntries(store, keys, Math.min(offset + limit, board.maxParticipants))).slice(offset);
    } else {
      const own = await userEntry(store, board, run, userId);
      if (!own || own.breakdown !== breakdown) return { status: 200, body: { ...head, rankings: [] } };
      // The user's place and the window around it: at most -offset entries ahead of the user, and
      // the page's entries at or behind the user (past the offset's, which no page starting on
      // the board can skip more of than the board holds). Off the board: no rankings around the
      // user (trophy-compat §2.2 #24).
      const around = await placeOnBoard(store, board, keys, own.value, own.member, Math.min(-offset, board.maxParticipants), limit + Math.min(Math.max(0, offset), board.maxParticipants));
      if (around === null) return { status: 200, body: { ...head, rankings: [] } };
      const position = around.position - 1;
      start = Math.max(0, position + offset);
      const ahead = position - start;
      // `behind` starts at the user; a positive offset starts the window further down.
      entries = [...(ahead > 0 ? around.ahead.slice(-ahead) : []), ...around.behind.slice(Math.max(0, start - position))].slice(0, limit);
      entries = entries.filter((_, i) => start + i < board.maxParticipants);
    }
    // The names and the ranks need only the entries: one round trip for both.
    const [names, ranks] = await Promise.all([readStoreOf(store).names(entries.map((e) => memberUser(e.member))), pageRanks(store, board, keys, entries, start)]);
    return {
      status: 200,
      body: {
        ...head,
        rankings: entries.map((e, i) => ({
          userId: memberUser(e.member),
          userName: names.get(memberUser(e.member)) ?? null,
          rank: ranks[i],
          value: wireValue(board, e.value),
        })),
      },
    };
  };
}

/** Rank numbers for a page in board order starting at ordinal position `start`. */
async function pageRanks(store: TenantStore, board: CompiledLeaderboard, keys: string[], entries: BoardEntry[], start: number): Promise<number[]> {
  if (entries.length === 0) return [];
  // The first entry's rank is its position, or else needs the board; the later ones follow from it.
  const first = board.ranking === "ordinal" ? start + 1 : await rankOf(store, board, keys, entries[0]!.value, entries[0]!.member);
  return pageRankNumbers(board.ranking, entries, start, first);
}

/**
 * GET /v1/users/{id}/leaderboards/{key}?run&numEvents (UserLeaderboardResponseWithHistory): the
 * user's rank and value in the run (null when not on the board) and the history of the user's
 * rank changes, newest first.
 */
export function userLeaderboardHandler(tenants: Tenants, clock: Clock) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant, store } = tenants.authenticate(req.apiKey);
    const userId = req.params[0]!;
    checkUserId(userId, "user id");
    const board = boardOf(tenant, req.params[1]!);
    const numEvents = intParam(req.query, "numEvents", 10, 0, 100);
    const now = clock.now();
    const run = selectRun(store, board, req.query, now);
    const head = { ...boardJson(tenant, board), status: boardStatus(board, now), run: run === null ? null : runDate(board, run) };
    // The user (with their entry) and their history in one round trip: neither needs the other.
    const [found, raw] = await Promise.all([
      readBoardUser(store, board, userId),
      run === null || numEvents === 0 ? [] : store.redis.lrange(store.keys.rankHistory(store.shard(userId), board.key, run, userId), 0, numEvents - 1),
    ]);
    if (found === null) failUserNotFound(userId);
    // The same fields as with a run: breakdownAttributeValue too (it was absent before the board's start).
    if (run === null) return { status: 200, body: { ...head, rank: null, value: null, breakdownAttributeValue: null, history: [] } };
    // The rank of the entry read, checked against the user's entry after it was counted (an
    // event of the user between the two put the user ahead of themselves: userBoardRank).
    const { own, rank } = await userBoardRank(store, board, run, userId, await entryInRun(store, board, run, userId, found));
    const history = raw.map((text) => {
      const h = JSON.parse(text) as { t: number; pr: number | null; r: number | null; pv: number | null; v: number | null };
      return {
        timestamp: iso(h.t),
        previousRank: h.pr,
        rank: h.r,
        previousValue: h.pv === null ? null : wireValue(board, h.pv),
        value: h.v === null ? null : wireValue(board, h.v),
      };
    });
    return {
      status: 200,
      // rank and value are null off the board (trophy-compat §3.7 UserLeaderboardResponse).
      body: { ...head, rank, value: own && rank !== null ? wireValue(board, own.value) : null, breakdownAttributeValue: own?.breakdown || null, history },
    };
  };
}
