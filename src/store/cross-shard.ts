import type { Redis } from "ioredis";
import { loadLua, type LuaSource } from "./lua-loader.js";
import { runScript, sendEncoded } from "./redis-script.js";

/**
 * Cross-shard reads: the same work on every shard of a tenant, one call on a standalone Redis.
 *
 * Each command the service sends costs it a command object, its encoding, a write and a reply
 * parse; a read over 16 shards with two plain counts a shard spent most of its CPU there
 * (bench/README, the forty-sixth stop). A script with an `--@each-shard` part (lua-loader.ts)
 * does a shard's work for every shard in one call, for about the Redis CPU of the plain counts
 * it replaces (the same with Redis busy, up to a tenth more one read at a time; strings are
 * another matter: readEachShard).
 *
 * A standalone Redis runs a script on keys of any slots; a Redis Cluster node refuses a call
 * whose keys hash to two slots (CROSSSLOT), whatever the script's flags, so there each shard is
 * its own call, as every cross-shard read was before. Which one this Redis is, each process asks
 * once, when it opens its tenants' stores (learnShardsPerCall); until then, and when it cannot
 * tell (INFO refused), calls are per shard: slower, right everywhere.
 */
const standalone = new WeakSet<Redis>();
const asked = new WeakSet<Redis>();

const countEachShardScript = loadLua("countEachShard-1");

/** Whether one call may take every shard's keys: the start found a standalone Redis. */
export function shardsInOneCall(redis: Redis): boolean {
  return standalone.has(redis);
}

/** Asks Redis (INFO cluster) once per client: a standalone server takes all shards in one call. */
export async function learnShardsPerCall(redis: Redis): Promise<void> {
  if (asked.has(redis)) return;
  asked.add(redis);
  const info = await redis.info("cluster").catch(() => "");
  if (/^cluster_enabled:0\r?$/m.test(info)) standalone.add(redis);
  else standalone.delete(redis);
}

/**
 * A script with an `--@each-shard` part on every shard: the reply of each, in the order of
 * `keysByShard` (each shard's keys, as the script's name counts them).
 */
export async function onEveryShard<T>(redis: Redis, script: LuaSource, keysByShard: readonly (readonly string[])[], args: (string | number)[]): Promise<T[]> {
  if (shardsInOneCall(redis)) {
    // A loop, not flat(): flat() was 3% of a streak read's CPU.
    const keys: string[] = [];
    for (const shardKeys of keysByShard) for (const key of shardKeys) keys.push(key);
    return (await runScript(redis, script, keys, args)) as T[];
  }
  const replies = await Promise.all(keysByShard.map((keys) => runScript(redis, script, keys, args)));
  return replies.map((reply) => (reply as T[])[0]!);
}

/**
 * A count (ZCOUNT, ZCARD) with the same arguments on each of `keys` (one a shard): the counts in
 * order (lua/countEachShard-1.lua; only counts, see there). On a Cluster node, plain commands.
 */
export async function countEachShard(redis: Redis, command: "ZCOUNT" | "ZCARD", keys: readonly string[], args: readonly (string | number)[]): Promise<number[]> {
  if (keys.length === 0) return [];
  if (shardsInOneCall(redis)) return (await runScript(redis, countEachShardScript, keys, [command, ...args])) as number[];
  return readEachShard<number>(redis, command, keys, args);
}

/**
 * A read whose replies are strings (HMGET, ZREVRANGE, ZRANGEBYSCORE) with the same arguments on
 * each of `keys` (one a shard): plain commands, since a script would make each string a Lua
 * string and cost Redis half again to twice as much (lua/countEachShard-1.lua), each encoded by
 * Laurel (sendEncoded: ioredis' own command object took ~8% of a 16-shard read's CPU). The
 * replies in order; on any Redis.
 */
export function readEachShard<T>(redis: Redis, command: string, keys: readonly string[], args: readonly (string | number)[]): Promise<T[]> {
  return Promise.all(keys.map((key) => sendEncoded(redis, command, [key, ...args]))) as Promise<T[]>;
}

/** A plain read: a command and its arguments (readAll). */
export type PlainRead = [command: string, ...args: (string | number)[]];

/**
 * Plain reads of any commands and keys sent together, each encoded by Laurel as readEachShard's
 * (the board reads' windows, extremes and pages): the replies in order; on any Redis.
 */
export function readAll<T>(redis: Redis, commands: readonly PlainRead[]): Promise<T[]> {
  return Promise.all(commands.map(([name, ...args]) => sendEncoded(redis, name, args))) as Promise<T[]>;
}
