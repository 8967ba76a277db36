import type { Redis } from "ioredis";
import type { CompiledLeaderboard, CompiledTenant } from "../config/compiled.js";
import { boardMember, compareEntries, firstInBoardOrder, firstRunAfter, lastInBoardOrder, memberUser, type BoardEntry } from "../domain/leaderboards.js";
import { TenantKeys } from "./keys.js";
import { boardStateNames, userAttributeField } from "./fields.js";
import { loadLua } from "./lua-loader.js";
import { runScript } from "./redis-script.js";
import { countEachShard, readAll, readEachShard, shardsInOneCall, type PlainRead } from "./cross-shard.js";
import { readUser } from "./user-store.js";
import { readsInBatch } from "./reads-in-batch.js";
import type { TenantStore } from "./tenant-store.js";

const boardPlacesScript = loadLua("boardPlaces-1");

/**
 * Cross-shard leaderboard reads. A run's participants live in one sorted set per shard
 * ({t:s}:lb:<board>:<run>[:<breakdown>]), written by the scripts that change a value; every read
 * here merges the shards, so each costs O(shards × log n) plus what it returns (a page, the values
 * above for dense ranks); a place among equal values costs a page of them, or O(log n × log ties)
 * where more than a page rank ahead (shardPlaces).
 */
export function boardKeys(store: TenantStore, board: CompiledLeaderboard, run: number, breakdown: string): string[] {
  return Array.from({ length: store.tenant.shards }, (_, shard) => store.keys.boardRun(shard, board.key, run, breakdown));
}

/**
 * Records, once per breakdown board, the first run whose groups the event scripts list in full
 * ({t:s}:lg:<board>:<run>, lua/includes/leaderboards.lua): the first run that begins after the
 * first start of a version that keeps the lists, since the run under way then may already hold
 * groups nobody listed. Run retention finds the groups of earlier runs by SCAN. Every start calls
 * it; only the first one writes (HSETNX).
 */
export async function markRunGroupLists(redis: Redis, tenant: CompiledTenant, now: number): Promise<void> {
  const boards = tenant.leaderboards.filter((b) => b.breakdownAttribute !== null);
  if (boards.length === 0) return;
  const key = new TenantKeys(tenant.id).runGroupsFrom();
  const pipeline = redis.pipeline();
  for (const board of boards) pipeline.hsetnx(key, board.key, firstRunAfter(board, now));
  await pipeline.exec();
}


/** Participants with a value strictly above `value`. */
async function countAbove(store: TenantStore, keys: string[], value: number): Promise<number> {
  const counts = await countEachShard(store.redis, "ZCOUNT", keys, [`(${value}`, "+inf"]);
  return counts.reduce((a, b) => a + b, 0);
}

export async function participants(store: TenantStore, keys: string[]): Promise<number> {
  const counts = await countEachShard(store.redis, "ZCARD", keys, []);
  return counts.reduce((a, b) => a + b, 0);
}

/** Distinct values strictly above `value`: O(participants above). */
async function distinctAbove(store: TenantStore, keys: string[], value: number): Promise<number> {
  const lists = await readEachShard<string[]>(store.redis, "zrangebyscore", keys, [`(${value}`, "+inf", "WITHSCORES"]);
  const values = new Set<string>();
  for (const list of lists) for (let i = 1; i < list.length; i += 2) values.add(list[i]!);
  return values.size;
}

/** Rank number of an entry (value, member) by the board's style; the entry itself need not be stored. */
export function rankOf(store: TenantStore, board: CompiledLeaderboard, keys: string[], value: number, member: string): Promise<number> {
  // Read once for every caller of one batch (ReadsInBatch: a page's first rank, asked for by every
  // request for that page, or for pages that begin on one value); only an ordinal rank depends
  // on the member.
  const tieBreak = board.ranking === "ordinal" ? `\n${member}` : "";
  return readsInBatch(store.redis).read(`rank\n${board.ranking}\n${keys.join("\n")}\n${value}${tieBreak}`, async () => {
    // No board size given: never off it (null).
    if (board.ranking === "ordinal") return (await entriesAround(store, keys, value, member, 0, 0))!.position;
    if (board.ranking === "dense") return (await distinctAbove(store, keys, value)) + 1;
    return (await countAbove(store, keys, value)) + 1;
  });
}

/**
 * The rank of an entry on the board by its style, or null off it (placeOnBoard); with `without`,
 * as if that entry were not on the board. A user has one entry: an earlier change of theirs,
 * ranked on the board as it is now (the webhook consumer, far behind), must not count the user's
 * later entry among those ahead of it (rank 2 on a board of one).
 */
export async function boardRank(store: TenantStore, board: CompiledLeaderboard, keys: string[], value: number, member: string, without: BoardEntry | null = null): Promise<number | null> {
  // `without` ahead of the entry: one entry fewer ahead, so one place more before the board's end.
  const ahead = without !== null && compareEntries(without, { member, value }) < 0 ? 1 : 0;
  const place = await placeOnBoard(store, ahead ? { ...board, maxParticipants: board.maxParticipants + 1 } : board, keys, value, member);
  if (place === null || place.position - ahead > board.maxParticipants) return null;
  if (board.ranking === "ordinal") return place.position - ahead;
  const above = ahead && without!.value > value ? 1 : 0;
  if (board.ranking === "dense") {
    // Its value counts among the distinct values above unless another entry holds it too.
    const alone = above === 1 && (await countValue(store, keys, without!.value)) === 1;
    return (await distinctAbove(store, keys, value)) - (alone ? 1 : 0) + 1;
  }
  return place.above - above + 1;
}

async function countValue(store: TenantStore, keys: string[], value: number): Promise<number> {
  const counts = await countEachShard(store.redis, "ZCOUNT", keys, [value, value]);
  return counts.reduce((a, b) => a + b, 0);
}

/**
 * An entry's place on the board with up to `before` entries ahead and `after` at or behind it
 * (entriesAround), or null off the board. On the board means within the first maxParticipants
 * entries in board order (the entries a page lists): its ordinal position (the entries above
 * it, plus those of its value that reached it first, plus one) is at most maxParticipants. The
 * values above are counted first, in the same call on a standalone Redis (a round trip of their
 * own on a Cluster node): most entries of a large board are off it by them alone, and then
 * nothing more is read.
 */
export async function placeOnBoard(
  store: TenantStore,
  board: CompiledLeaderboard,
  keys: string[],
  value: number,
  member: string,
  before = 0,
  after = 0,
): Promise<EntryPlace | null> {
  // A standalone Redis counts the values above in the place's own call (shardPlaces); a Cluster
  // node, one shard a call, cannot add them up there.
  if (!shardsInOneCall(store.redis) && (await countAbove(store, keys, value)) >= board.maxParticipants) return null;
  const place = await entriesAround(store, keys, value, member, before, after, board.maxParticipants);
  return place === null || place.position > board.maxParticipants ? null : place;
}

/**
 * The first `count` entries of the board order, merged from every shard: read once for every
 * caller of one batch (ReadsInBatch: a page many users look at is 16 ZREVRANGEs, once a turn).
 * Callers must not change the entries.
 */
export function topEntries(store: TenantStore, keys: string[], count: number): Promise<readonly BoardEntry[]> {
  if (count <= 0) return Promise.resolve([]);
  return readsInBatch(store.redis).read(`top\n${keys.join("\n")}\n${count}`, async () => {
    const lists = await readEachShard<string[]>(store.redis, "zrevrange", keys, [0, count - 1, "WITHSCORES"]);
    return firstInBoardOrder(lists, count);
  });
}

/**
 * Per shard: the entries above `value`, and those of exactly `value` ranked ahead of `member` (a
 * greater member: they reached the value first): lua/boardPlaces-1.lua, one call over every
 * shard (one a shard on a Redis Cluster node) for every request of the batch that asks about the
 * same board (ReadsInBatch.gather; each distinct entry once). Counts only: a value shared by very
 * many costs O(log n × log ties) a shard, never O(ties), and no member is sent to the service;
 * entries of one value share its count above and its first equal values (a new board, where
 * every user is on one value). Null: off the board by the values above alone (`offAt`, on a
 * standalone Redis).
 */
function shardPlaces(store: TenantStore, keys: string[], value: number, member: string, offAt: number): Promise<{ above: number[]; ahead: number[] } | null> {
  const oneCall = shardsInOneCall(store.redis);
  // The board's size only where one call sees every shard's count.
  const size = oneCall ? offAt : 0;
  return readsInBatch(store.redis).gather(`places\n${size}\n${keys.join("\n")}`, { value: String(value), member }, async (asked) => {
    // Each distinct entry once (keyed by value, a newline, member: a value holds no newline).
    const places = new Map<string, { above: number[]; ahead: number[]; off: boolean }>();
    const args: (string | number)[] = [size];
    for (const { value, member } of asked) {
      const entry = `${value}\n${member}`;
      if (places.has(entry)) continue;
      places.set(entry, { above: [], ahead: [], off: false });
      args.push(value, member);
    }
    const groups = oneCall ? [keys] : keys.map((key) => [key]);
    const replies = (await Promise.all(groups.map((group) => runScript(store.redis, boardPlacesScript, group, args)))) as number[][];
    replies.forEach((reply, g) => {
      // Entry after entry: -1 (off), or 0 then each of the group's shards' above and ahead.
      let i = 0;
      for (const place of places.values()) {
        if (reply[i++] === -1) {
          place.off = true;
          continue;
        }
        for (let s = 0; s < groups[g]!.length; s++, i += 2) {
          place.above.push(reply[i]!);
          place.ahead.push(reply[i + 1]!);
        }
      }
    });
    return asked.map(({ value, member }) => {
      const place = places.get(`${value}\n${member}`)!;
      return place.off ? null : { above: place.above, ahead: place.ahead };
    });
  });
}

/** An entry's place in board order, with its nearest entries (entriesAround). */
export interface EntryPlace {
  /** Entries with a higher value. */
  above: number;
  /** 1-based ordinal position: `above`, the equal values reached first, then the entry. */
  position: number;
  /** The nearest entries ahead of it, in board order (the nearest last). */
  ahead: BoardEntry[];
  /** The nearest entries at or behind it, in board order (itself first when stored). */
  behind: BoardEntry[];
}

/**
 * Where (value, member) falls in the board order of every shard's set (shardPlaces), and up to
 * `before` entries ahead of it and `after` at or behind it: each shard's nearest entries on
 * either side of its place, read by position (one more round trip, one ZREVRANGE a shard).
 * Every entry of the merged window is among them. With `offAt` (a board's size), null where at
 * least that many entries are above the value, as one call over every shard can tell
 * (shardPlaces; never on a Cluster node, where placeOnBoard counts first).
 */
export async function entriesAround(
  store: TenantStore,
  keys: string[],
  value: number,
  member: string,
  before: number,
  after: number,
  offAt = 0,
): Promise<EntryPlace | null> {
  // A window that starts below the user (positive offset) asks for a negative `before`: none ahead.
  before = Math.max(0, before);
  after = Math.max(0, after);
  const shards = await shardPlaces(store, keys, value, member, offAt);
  if (shards === null) return null;
  const at = shards.above.map((above, s) => above + shards.ahead[s]!);
  const place: EntryPlace = { above: sum(shards.above), position: sum(at) + 1, ahead: [], behind: [] };
  if (before === 0 && after === 0) return place;
  // One ZREVRANGE a shard from `before` ahead of its place to `after` at or behind it, split at
  // the place (two a shard before the fifty-sixth stop). A shard with nothing to list is not
  // asked: a stop below the start would read from the other end (-1 is the last entry).
  const reads: PlainRead[] = [];
  // Per read, how many of its entries are ahead of the place.
  const aheadCounts: number[] = [];
  keys.forEach((key, s) => {
    const start = Math.max(0, at[s]! - before);
    const stop = at[s]! + after - 1;
    if (stop < start) return;
    reads.push(["zrevrange", key, start, stop, "WITHSCORES"]);
    aheadCounts.push(at[s]! - start);
  });
  const windows = await readAll<string[]>(store.redis, reads);
  const aheadLists = windows.map((list, i) => list.slice(0, 2 * aheadCounts[i]!));
  const behindLists = windows.map((list, i) => list.slice(2 * aheadCounts[i]!));
  place.ahead = lastInBoardOrder(aheadLists, before);
  place.behind = firstInBoardOrder(behindLists, after);
  return place;
}

const sum = (values: number[]): number => values.reduce((a, b) => a + b, 0);

/** The state keys of a user's entry in a board's latest run that a reader needs (all but the rank given). */
export const boardEntryKeys = (boardKey: string): string[] => boardStateNames(boardKey).slice(0, 4);

/**
 * That entry from the keys read: the run, the value, the zset member and the breakdown group;
 * null when the user has none. A state of an earlier version holds the table
 * {run, value, reachedAt, breakdown, rank} at lb:<board> instead.
 */
function boardEntryOf(state: ReadonlyMap<string, unknown>, boardKey: string, userId: string): { run: number; value: number; member: string; breakdown: string } | null {
  const [runName, valueName, memberName, breakdownName] = boardStateNames(boardKey);
  const stored = state.get(runName);
  if (Array.isArray(stored)) return { run: stored[0] as number, value: stored[1] as number, member: boardMember(stored[2] as number, userId), breakdown: (stored[3] as string | undefined) ?? "" };
  if (typeof stored !== "number") return null;
  return { run: stored, value: state.get(valueName) as number, member: state.get(memberName) as string, breakdown: (state.get(breakdownName) as string | undefined) ?? "" };
}

/**
 * A user's entry in a run: the one the scripts keep in the user's state next to the zset entry,
 * for the user's latest run (boardEntryOf). Null when the user has no value in that run. An
 * earlier run (the user has moved in a later one since) is found by the newest change of the
 * run's rank history instead, else among the run's first places on the user's shard (pastEntry).
 */
export async function userEntry(
  store: TenantStore,
  board: CompiledLeaderboard,
  run: number,
  userId: string,
): Promise<{ value: number; member: string; breakdown: string } | null> {
  return entryInRun(store, board, run, userId, await readBoardUser(store, board, userId));
}

/** Counts of a user's rank (userBoardRank) before it answers with an entry that may have moved. */
const RANK_ATTEMPTS = 4;

type OwnEntry = { value: number; member: string; breakdown: string };

/**
 * The rank of the user's entry `own` in `run` (read before, by entryInRun), with the entry it is
 * the rank of. The entry is read again behind the count of the entries ahead of it: when it moved
 * (an event of the user between the first read and the count), the user's new entry may have
 * been counted ahead of the old one (rank 2 on a board of one), and the rank is counted again
 * for the entry read last, up to RANK_ATTEMPTS counts (a user whose entry moves under every
 * count gets the last). Unmoved, the entry was the user's one on the board when it was counted.
 *
 * Where the count is one call sent with this turn's batch (a standalone Redis; not for a dense
 * ranking, which counts the distinct values above in a call after it), the entry's second read
 * goes right behind it on the connection, in the same round trip: Redis runs it after the count,
 * so an entry found unmoved was unmoved at the count. Otherwise it is read after the count's reply.
 */
export async function userBoardRank(
  store: TenantStore,
  board: CompiledLeaderboard,
  run: number,
  userId: string,
  own: OwnEntry | null,
): Promise<{ own: OwnEntry | null; rank: number | null }> {
  const behind = shardsInOneCall(store.redis) && board.ranking !== "dense";
  for (let attempt = 1; own !== null; attempt++) {
    const counted = boardRank(store, board, boardKeys(store, board, run, own.breakdown), own.value, own.member);
    if (attempt === RANK_ATTEMPTS) return { own, rank: await counted };
    const [rank, again] = behind
      ? await Promise.all([counted, readsInBatch(store.redis).behind(() => userEntry(store, board, run, userId))])
      : [await counted, await userEntry(store, board, run, userId)];
    if (again !== null && again.member === own.member && again.value === own.value && again.breakdown === own.breakdown) return { own, rank };
    own = again;
  }
  return { own: null, rank: null };
}

/** The user (null: none) with what entryInRun needs of their state: their entry in the board's latest run. */
export function readBoardUser(store: TenantStore, board: CompiledLeaderboard, userId: string): ReturnType<typeof readUser> {
  return readUser(store, userId, boardEntryKeys(board.key));
}

/** userEntry from a user already read (readBoardUser): no read more for the latest run, the history's for a finished one. */
export async function entryInRun(
  store: TenantStore,
  board: CompiledLeaderboard,
  run: number,
  userId: string,
  found: Awaited<ReturnType<typeof readUser>>,
): Promise<{ value: number; member: string; breakdown: string } | null> {
  const entry = found ? boardEntryOf(found.state, board.key, userId) : null;
  if (!entry || entry.run < run) return null;
  if (entry.run === run) return { value: entry.value, member: entry.member, breakdown: entry.breakdown };
  // The group of a breakdown board is not in the history: the one of the latest run, the user's
  // attribute now, and the groups the run lists on the user's shard (pastEntry): the user's group
  // of that run may be neither (eu then, us in the latest run and now: looked for in us alone,
  // the entry read as none while eu's page of the run listed it).
  const groups = board.breakdownAttribute === null ? [""] : [entry.breakdown, found!.profile.fields.get(userAttributeField(board.breakdownAttribute)) ?? ""];
  return pastEntry(store, board, run, userId, groups);
}

/**
 * The user's entry in a finished run of theirs: the newest history change ({t, v}) names the
 * member (reachedAt = t), confirmed by ZSCORE in the run's set of one of `groups` on the user's
 * shard (`known`, and on a breakdown board the groups the run lists there, {t:s}:lg, read with
 * the history in the same round trip; a run stored before those lists has none: `known` alone).
 * A later change that stayed off the board is not in the history (lua updateBoards): then the
 * entry is looked for among the first maxParticipants of those sets (entryAmongTop), where
 * it is if others' falls since moved it onto the board (it read as no value in the run before,
 * though the run's page listed it); anywhere below, it is off the board, as no value reads.
 */
async function pastEntry(
  store: TenantStore,
  board: CompiledLeaderboard,
  run: number,
  userId: string,
  known: string[],
): Promise<{ value: number; member: string; breakdown: string } | null> {
  const shard = store.shard(userId);
  const [newest, listed] = await Promise.all([
    store.redis.lindex(store.keys.rankHistory(shard, board.key, run, userId), 0),
    board.breakdownAttribute === null ? [] : store.redis.smembers(store.keys.runGroups(shard, board.key, run)),
  ]);
  const groups = board.breakdownAttribute === null ? [""] : [...new Set([...known, ...listed.sort()])].filter((g) => g !== "");
  const keys = groups.map((g) => store.keys.boardRun(shard, board.key, run, g));
  // No history does not mean no entry: changes off the board before and after write none.
  const h = newest === null ? null : (JSON.parse(newest) as { t: number; v: number | null });
  if (h !== null && h.v !== null) {
    const member = boardMember(h.t, userId);
    const scores = await readAll<string | null>(store.redis, keys.map((key) => ["zscore", key, member]));
    const at = scores.findIndex((score) => score !== null && Number(score) === h.v);
    if (at >= 0) return { value: h.v, member, breakdown: groups[at]! };
  }
  return entryAmongTop(store, board, userId, keys, groups);
}

/**
 * The user's member among the first maxParticipants entries of each of `keys` (sets of one run on
 * the user's shard, one a group): a user within the board's first maxParticipants is within its
 * own shard's. One ZREVRANGE a group, O(log n + maxParticipants); only for a past run's entry the
 * history does not name.
 */
async function entryAmongTop(
  store: TenantStore,
  board: CompiledLeaderboard,
  userId: string,
  keys: string[],
  groups: string[],
): Promise<{ value: number; member: string; breakdown: string } | null> {
  const lists = await readAll<string[]>(store.redis, keys.map((key) => ["zrevrange", key, 0, board.maxParticipants - 1, "WITHSCORES"]));
  for (let i = 0; i < lists.length; i++) {
    const list = lists[i]!;
    for (let j = 0; j < list.length; j += 2) {
      if (memberUser(list[j]!) === userId) return { value: Number(list[j + 1]), member: list[j]!, breakdown: groups[i]! };
    }
  }
  return null;
}

/**
 * The value needed to enter a full board: the value of the participant at position
 * maxParticipants; null while the board has room (`count`: the participants over `keys`,
 * which the caller keeps too). O(shards × k) for k ≤ 2000, a value bisection of
 * O(shards × log n) per step beyond. Callers cache it (store/thresholds.ts).
 */
export async function threshold(store: TenantStore, board: CompiledLeaderboard, keys: string[], count: number): Promise<number | null> {
  const k = board.maxParticipants;
  if (count < k) return null;
  if (k <= 2000) return kthFromTops(store, keys, k);
  return kthValue(store, keys, k);
}

/**
 * The k-th highest value across shards from each shard's top: first ~2k/shards per shard (not k
 * per shard: 16 times fewer entries read, which the refresh does every second), then further
 * pages only from shards that may still hide a higher value. Exact: an unread value of a shard
 * is at most the lowest value read from it, so once no shard with entries left has read a value
 * lower than or equal to the candidate (the k-th of those read), nothing unread is above it.
 */
async function kthFromTops(store: TenantStore, keys: string[], k: number): Promise<number | null> {
  const page = Math.ceil((2 * k) / keys.length);
  const read: number[][] = keys.map(() => []);
  const exhausted: boolean[] = keys.map(() => false);
  let pending = keys.map((_, i) => i);
  for (;;) {
    const lists = await readAll<string[]>(
      store.redis,
      pending.map((i) => ["zrevrange", keys[i]!, read[i]!.length, read[i]!.length + page - 1, "WITHSCORES"]),
    );
    pending.forEach((i, j) => {
      const list = lists[j]!;
      for (let v = 1; v < list.length; v += 2) read[i]!.push(Number(list[v]));
      if (list.length < 2 * page) exhausted[i] = true;
    });
    const all = read.flat().sort((a, b) => b - a);
    if (all.length < k) {
      pending = keys.map((_, i) => i).filter((i) => !exhausted[i]);
      // Fewer than k after all (entries left between the count and the reads): room.
      if (pending.length === 0) return null;
      continue;
    }
    const candidate = all[k - 1]!;
    pending = keys.map((_, i) => i).filter((i) => !exhausted[i] && read[i]![read[i]!.length - 1]! > candidate);
    if (pending.length === 0) return candidate;
  }
}

/** The k-th highest value across shards, by bisection on the value (integers). */
async function kthValue(store: TenantStore, keys: string[], k: number): Promise<number | null> {
  const extremes = await readAll<string[]>(
    store.redis,
    keys.flatMap((key): PlainRead[] => [
      ["zrange", key, 0, 0, "WITHSCORES"],
      ["zrevrange", key, 0, 0, "WITHSCORES"],
    ]),
  );
  const values = extremes.filter((l) => l.length === 2).map((l) => Number(l[1]));
  // Every shard emptied between the count and these reads (a run's retention): room.
  if (values.length === 0) return null;
  let lo = Math.min(...values);
  let hi = Math.max(...values);
  // Largest v with count(>= v) >= k.
  while (lo < hi) {
    const mid = Math.floor((lo + hi + 1) / 2);
    const counts = await countEachShard(store.redis, "ZCOUNT", keys, [mid, "+inf"]);
    if (counts.reduce((a, b) => a + b, 0) >= k) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
