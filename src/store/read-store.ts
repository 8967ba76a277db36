import { Buffer } from "node:buffer"; // not the global, an accessor (see store/redis-script.ts)
import type { Redis } from "ioredis";
import type { CompiledTenant } from "../config/compiled.js";
import { shardOf, TenantKeys } from "./keys.js";
import { loadLua } from "./lua-loader.js";
import { ReadPlan } from "./read-plan.js";
import { runScript } from "./redis-script.js";
import { onEveryShard, readAll, readEachShard, shardsInOneCall } from "./cross-shard.js";
import type { StateSlots } from "./state-slots.js";
import { readsInBatch } from "./reads-in-batch.js";

const readUsersScript = loadLua("readUsers-1");
const histogramScript = loadLua("pointsHistogram-2");
const streakTopScript = loadLua("streakTop-2");
const streakRanksScript = loadLua("streakRanks-2");
const countRangesScript = loadLua("countRanges-1");

/**
 * Lost streaks awaiting settlement that one shard may hold before a streak read gives up on
 * exactness (rank null, rankings possibly short): the event script settles a user's streak at
 * the user's next event, so these are users who stopped coming back (lua/streakRanks-2.lua).
 */
export const LOST_STREAK_CAP = 1000;

/** A value of a script reply: Lua false and a missing hash field both arrive as null. */
export type Stored = number | string | null;

export interface UserFields {
  state: Stored[];
  fields: (string | null)[];
}

/** The points totals of a system's users (ReadStore.pointsHistogram). */
export interface PointsHistogram {
  users: number;
  withPoints: number;
  max: number;
  /** Users per range, in the ranges' order. */
  counts: number[];
}

export interface RankedStreak {
  userId: string;
  length: number;
}

/**
 * Every cross-user read of one tenant, and the user-scoped read plans: per-shard structures
 * read with one script (or one command) per shard, all in flight at once, merged here
 * (DESIGN: "Cross-user reads read S per-shard structures and merge"). Never a scan of users.
 */
export class ReadStore {
  readonly keys: TenantKeys;
  /**
   * LOST_STREAK_CAP for this tenant's streak reads. Tests lower it (the property tests' crowd
   * reaches a cap of a few lost streaks a shard, where reaching 1 000 would take thousands of users).
   */
  lostStreakCap = LOST_STREAK_CAP;

  constructor(readonly redis: Redis, readonly tenant: CompiledTenant, readonly slots: StateSlots) {
    this.keys = new TenantKeys(tenant.id);
  }

  shard(userId: string): number {
    return shardOf(userId, this.tenant.shards);
  }

  private shards(): number[] {
    return Array.from({ length: this.tenant.shards }, (_, s) => s);
  }

  /** Each shard's counters ({t:s}:agg): built once, read by every achievements read. */
  private aggKeysByShard: readonly string[] | null = null;
  private aggKeys(): readonly string[] {
    return (this.aggKeysByShard ??= this.shards().map((s) => this.keys.agg(s)));
  }

  /** Each shard's active streaks ({t:s}:sa) and their deadlines ({t:s}:sd): built once, read by every streak read. */
  private streakKeysByShard: readonly (readonly string[])[] | null = null;
  private allStreakKeys: readonly string[] | null = null;
  private streakKeys(): readonly (readonly string[])[] {
    return (this.streakKeysByShard ??= this.shards().map((s) => [this.keys.streakActive(s), this.keys.streakDeadline(s)]));
  }

  /** Runs a plan on the user's shard: null for an unknown user. */
  runPlan(userId: string, plan: ReadPlan): Promise<unknown[][] | null> {
    return plan.run(this.redis, this.keys.user(this.shard(userId), userId));
  }

  /**
   * Users at each level of a system, from the points totals ({t:s}:pz:<system>): level i holds the
   * totals in (threshold i, threshold i+1] (a level is reached by strictly exceeding its
   * threshold). Counted from the totals, not kept as counters, so a change of the levels in the
   * config is right at once. `thresholds` ascending; L ZCOUNT a shard (lua/countRanges-1.lua), O(log n) each.
   */
  usersAtLevels(systemKey: string, thresholds: readonly number[]): Promise<readonly number[]> {
    // Shared by the level summaries of one batch (ReadsInBatch).
    return readsInBatch(this.redis).read(`levels\n${this.keys.pointsZset(0, systemKey)}\n${thresholds.join("\n")}`, () => this.countAtLevels(systemKey, thresholds));
  }

  private async countAtLevels(systemKey: string, thresholds: readonly number[]): Promise<number[]> {
    const ranges = thresholds.flatMap((from, i) => [`(${from}`, i + 1 < thresholds.length ? thresholds[i + 1]! : "+inf"]);
    const perShard = await onEveryShard<number[]>(this.redis, countRangesScript, this.shards().map((s) => [this.keys.pointsZset(s, systemKey)]), ranges);
    const sums = thresholds.map(() => 0);
    for (const counts of perShard) counts.forEach((n, i) => (sums[i]! += n));
    return sums;
  }

  /**
   * Shard counters ({t:s}:agg: users, ac:<achievement>) summed over shards: S × HMGET
   * (readEachShard), sent once for every read that asks for the same fields in one batch
   * (ReadsInBatch: under load, one for dozens of achievements reads).
   */
  counters(fields: readonly string[]): Promise<readonly number[]> {
    const key = `counters\n${this.keys.agg(0)}\n${fields.join("\n")}`;
    return readsInBatch(this.redis).read(key, () => this.sumCounters(fields));
  }

  private async sumCounters(fields: readonly string[]): Promise<number[]> {
    const sums = fields.map(() => 0);
    if (fields.length === 0) return sums;
    const perShard = await readEachShard<(string | null)[]>(this.redis, "hmget", this.aggKeys(), fields);
    for (const values of perShard) values.forEach((v, i) => (sums[i]! += Number(v ?? 0)));
    return sums;
  }

  /**
   * lua/pointsHistogram-2.lua on every shard, summed: users, users with >= 1 point, the highest
   * total, counts per range; with `filter`, only users whose attributes match every pair.
   */
  pointsHistogram(systemKey: string, ranges: readonly [number, number][], filter: ReadonlyMap<string, string> | null = null): Promise<Readonly<PointsHistogram>> {
    const pairs = filter === null ? [] : [...filter].flat();
    // Shared by the points summaries of one batch (ReadsInBatch), keyed by the system, the filter and the ranges.
    const key = `histogram\n${this.keys.pointsZset(0, systemKey)}\n${pairs.join("\n")}\n\n${ranges.flat().join("\n")}`;
    return readsInBatch(this.redis).read(key, () => this.countHistogram(systemKey, ranges, pairs));
  }

  private async countHistogram(systemKey: string, ranges: readonly [number, number][], pairs: readonly string[]): Promise<PointsHistogram> {
    // Each shard's keys: its counters and points zset, then each filter pair's group (its users,
    // their totals): every key the script reads, declared (lua/pointsHistogram-2.lua).
    const keysByShard = this.shards().map((s) => {
      const keys = [this.keys.agg(s), this.keys.pointsZset(s, systemKey)];
      for (let i = 0; i < pairs.length; i += 2) keys.push(this.keys.attributeUsers(s, pairs[i]!, pairs[i + 1]!), this.keys.attributePoints(s, systemKey, pairs[i]!, pairs[i + 1]!));
      return keys;
    });
    const perShard = await onEveryShard<number[]>(this.redis, histogramScript, keysByShard, [pairs.length / 2, ...ranges.flat()]);
    const out = { users: 0, withPoints: 0, max: 0, counts: ranges.map(() => 0) };
    for (const [users, withPoints, max, ...counts] of perShard) {
      out.users += users!;
      out.withPoints += withPoints!;
      out.max = Math.max(out.max, max!);
      counts.forEach((c, i) => (out.counts[i]! += c));
    }
    return out;
  }

  /**
   * The `limit` longest active streaks of the tenant; `complete` is false when a shard hit
   * LOST_STREAK_CAP. The reads of one batch are one call (ReadsInBatch.gather): the most any of
   * them asks for, at the latest of their instants, each given its top (a shard scans more for a
   * larger limit, so a smaller one's top is as exact as its own read).
   */
  activeStreaks(limit: number, now: number): Promise<{ top: RankedStreak[]; complete: boolean }> {
    return readsInBatch(this.redis).gather(`streakTop\n${this.keys.prefix(0)}`, { limit, now }, async (asked) => {
      const most = Math.max(...asked.map((a) => a.limit));
      const perShard = await onEveryShard<(string | number)[]>(this.redis, streakTopScript, this.streakKeys(), [
        Math.max(...asked.map((a) => a.now)),
        most,
        most + this.lostStreakCap,
      ]);
      const all: RankedStreak[] = [];
      let complete = true;
      for (const [done, ...flat] of perShard) {
        if (done === 0) complete = false;
        for (let i = 0; i < flat.length; i += 2) all.push({ userId: flat[i] as string, length: flat[i + 1] as number });
      }
      const top = topStreaks(all, most);
      return asked.map((a) => ({ top: top.slice(0, a.limit), complete }));
    });
  }

  /** The `limit` longest streaks ever ({t:s}:sb): S × ZREVRANGE (readEachShard), the reads of one batch gathered as activeStreaks'. */
  longestStreaks(limit: number): Promise<RankedStreak[]> {
    return readsInBatch(this.redis).gather(`streakBest\n${this.keys.prefix(0)}`, limit, async (asked) => {
      const most = Math.max(...asked);
      const perShard = await readEachShard<string[]>(this.redis, "zrevrange", this.shards().map((s) => this.keys.streakBest(s)), [0, most - 1, "WITHSCORES"]);
      const all: RankedStreak[] = [];
      for (const flat of perShard) for (let i = 0; i < flat.length; i += 2) all.push({ userId: flat[i]!, length: Number(flat[i + 1]) });
      const top = topStreaks(all, most);
      return asked.map((a) => top.slice(0, a));
    });
  }

  /**
   * 1 + active streaks longer than `length`, over all shards; null when a shard cannot tell
   * (LOST_STREAK_CAP). The ranks asked for in one batch go out as one call (ReadsInBatch.gather:
   * under load a turn holds dozens of streak reads), each distinct length counted once, at the
   * latest of their instants (every caller's `now` is at or before it, and the call is sent after
   * all of them asked): lua/streakRanks-2.lua, on every shard in one call (one a Cluster node's
   * shard a call). With `userId` (the user whose streak was read at `length`), that user's own
   * entry is never among those counted: a streak extended between the read of its length and
   * this call is a longer active streak, and ranked the user behind themselves (rank 2 alone).
   */
  streakRank(length: number, now: number, userId: string | null = null): Promise<number | null> {
    return readsInBatch(this.redis).gather(`streakRank\n${this.keys.prefix(0)}`, { length, now, userId }, (asked) => this.streakRanks(asked));
  }

  /** streakRank for each of `asked`, in one read. */
  private async streakRanks(asked: readonly { length: number; now: number; userId: string | null }[]): Promise<(number | null)[]> {
    const lengths = [...new Set(asked.map((a) => a.length))];
    const lengthIndex = new Map(lengths.map((length, i) => [length, i + 1]));
    const now = Math.max(...asked.map((a) => a.now));
    const oneCall = shardsInOneCall(this.redis);
    const shards = this.shards();
    // Per call, its shards' keys and the asking users on them (a user's entry is on their shard).
    const calls = oneCall ? [{ keys: (this.allStreakKeys ??= this.streakKeys().flat()), shards }] : this.streakKeys().map((keys, s) => ({ keys, shards: [s] }));
    const owners = calls.map((call) => asked.flatMap((a, i) => (a.userId !== null && call.shards.includes(this.shard(a.userId)) ? [i] : [])));
    const replies = (await Promise.all(
      calls.map((call, c) =>
        runScript(this.redis, streakRanksScript, call.keys, [
          now,
          this.lostStreakCap,
          lengths.length,
          ...lengths,
          ownerPositions(owners[c]!.map((i) => [call.shards.indexOf(this.shard(asked[i]!.userId!)) + 1, lengthIndex.get(asked[i]!.length)!])),
          ...owners[c]!.map((i) => asked[i]!.userId!),
        ]),
      ),
    )) as number[][];
    if (replies.some((counts) => counts[0]! < 0)) return asked.map(() => null);
    const rankOfLength = new Map(lengths.map((length, i) => [length, replies.reduce((rank, counts) => rank + counts[i]!, 1)]));
    // The asking users' own entries counted above their lengths.
    const ownCounted = asked.map(() => 0);
    replies.forEach((counts, c) => owners[c]!.forEach((i, k) => (ownCounted[i]! += counts[lengths.length + k]!)));
    return asked.map((a, i) => rankOfLength.get(a.length)! - ownCounted[i]!);
  }

  /**
   * State keys and profile fields of several users (lua/readUsers-1.lua): one call for them all
   * on a standalone Redis, one per shard involved on a Cluster node (cross-shard.ts). Unknown
   * users map to null. The reads of one batch with the same keys and fields are one call for the
   * users they ask for, each user read once (ReadsInBatch.gather: a bulk streak read's users).
   */
  users(userIds: readonly string[], stateKeys: readonly string[], fields: readonly string[]): Promise<Map<string, UserFields | null>> {
    if (userIds.length === 0) return Promise.resolve(new Map());
    return readsInBatch(this.redis).gather(`users\n${this.keys.prefix(0)}\n${stateKeys.join("\n")}\n\n${fields.join("\n")}`, userIds, async (asked) => {
      const all = await this.usersInOneRead(unionOfIds(asked), stateKeys, fields);
      return eachCallersOwn(asked, all);
    });
  }

  /**
   * The names of users (null: none set, or no such user), by id: the one way Laurel reads a list
   * of names (a board page, a streak ranking, a webhook's top 10). An HGET a user, plain commands
   * in the turn's batch: a name is a string, which Redis serves cheaper as a command of its own
   * than from a script (a script's reply of many values costs more than the reads: bench/README.md,
   * the fiftieth stop). The requests of one turn read each user once (ReadsInBatch.gather: every
   * request for one page or one ranking, whatever users each asks for).
   */
  names(userIds: readonly string[]): Promise<Map<string, string | null>> {
    if (userIds.length === 0) return Promise.resolve(new Map());
    return readsInBatch(this.redis).gather(`names\n${this.keys.prefix(0)}`, userIds, async (asked) => {
      const ids = unionOfIds(asked);
      const names = await readAll<string | null>(this.redis, ids.map((id) => ["hget", this.keys.user(this.shard(id), id), "nm"]));
      return eachCallersOwn(asked, new Map(ids.map((id, i) => [id, names[i] ?? null])));
    });
  }

  private async usersInOneRead(userIds: readonly string[], stateKeys: readonly string[], fields: readonly string[]): Promise<Map<string, UserFields | null>> {
    const out = new Map<string, UserFields | null>();
    const groups = shardsInOneCall(this.redis) ? [[...userIds]] : [...groupByShard(userIds, (id) => this.shard(id)).values()];
    await Promise.all(
      groups.map(async (ids) => {
        // The users' hashes are the call's KEYS (every key it reads, declared: Redis Cluster routes
        // the call by them, to one shard's); a standalone Redis reads any slots in one call.
        const reply = (await runScript(
          this.redis,
          readUsersScript,
          ids.map((id) => this.keys.user(this.shard(id), id)),
          [stateKeys.length, ...this.slots.readArgs(stateKeys), fields.length, ...fields],
        )) as Stored[];
        // User after user: 0 (unknown), or 1 then the state values and the field values.
        let i = 0;
        for (const id of ids) {
          if (reply[i++] === 0) {
            out.set(id, null);
            continue;
          }
          out.set(id, { state: reply.slice(i, i + stateKeys.length), fields: reply.slice(i + stateKeys.length, i + stateKeys.length + fields.length) as (string | null)[] });
          i += stateKeys.length + fields.length;
        }
      }),
    );
    return out;
  }
}

/** The users a turn's callers of a gathered read asked for, each once (a single caller's list as it is). */
/**
 * lua/streakRanks-2.lua's positions of the asking users: [shard's position, length's position]
 * each, as two little-endian uint16 (a shard count is at most 1 024; the distinct lengths of a
 * batch fit as well, a batch being far fewer reads).
 */
function ownerPositions(pairs: readonly (readonly [number, number])[]): Buffer {
  const out = Buffer.allocUnsafe(4 * pairs.length);
  pairs.forEach(([shardAt, lengthAt], k) => {
    out.writeUInt16LE(shardAt, 4 * k);
    out.writeUInt16LE(lengthAt, 4 * k + 2);
  });
  return out;
}

function unionOfIds(asked: readonly (readonly string[])[]): readonly string[] {
  return asked.length === 1 ? asked[0]! : [...new Set(asked.flat())];
}

/** Each caller's users out of the union's read, in the caller's order (a single caller gets the read itself). */
function eachCallersOwn<T>(asked: readonly (readonly string[])[], all: Map<string, T>): Map<string, T>[] {
  return asked.length === 1 ? [all] : asked.map((ids) => new Map(ids.map((id) => [id, all.get(id)!])));
}

function groupByShard(userIds: readonly string[], shardOfUser: (id: string) => number): Map<number, string[]> {
  const byShard = new Map<number, string[]>();
  for (const id of userIds) {
    const shard = shardOfUser(id);
    const list = byShard.get(shard) ?? [];
    list.push(id);
    byShard.set(shard, list);
  }
  return byShard;
}

/**
 * Merges per-shard tops: longest first, ties by user id descending in bytes, which is the
 * order ZREVRANGE gives equal scores, so each shard's top `limit` is exactly its share of the
 * merged top `limit` (a total order, as nakama's rank cache keeps).
 */
export function topStreaks(all: RankedStreak[], limit: number): RankedStreak[] {
  return all.sort((a, b) => b.length - a.length || Buffer.compare(Buffer.from(b.userId), Buffer.from(a.userId))).slice(0, limit);
}

const readStores = new WeakMap<object, ReadStore>();

/** The tenant's ReadStore, built once per TenantStore (whose Redis connection it shares). */
export function readStoreOf(store: { redis: Redis; tenant: CompiledTenant; slots: StateSlots }): ReadStore {
  let read = readStores.get(store);
  if (!read) {
    read = new ReadStore(store.redis, store.tenant, store.slots);
    readStores.set(store, read);
  }
  return read;
}
