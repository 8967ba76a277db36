import type { Redis } from "ioredis";
import type { CompiledLeaderboard, CompiledTenant } from "../config/compiled.js";
import { ConfigError } from "../config/compile.js";
import { TenantKeys } from "./keys.js";

/**
 * Settings a tenant's stored data is laid out by, which a config must not change under it:
 * - `shards`: a user's keys live on shard hash(id) mod shards; with another count most users
 *   would be looked for on the wrong shard, found missing and created again (their totals,
 *   streaks and achievements started over beside the old ones).
 * - `streak.frequency`: stored streaks count periods of their frequency (day, week or month
 *   indexes), which another frequency would read as its own.
 * - per leaderboard, what it ranks, its start, its runs' unit and interval, and its breakdown
 *   attribute: a run is stored under its index in the schedule, with values of what it ranks.
 * The first start of a tenant records them in {t}:fixed (a streak's frequency when the config
 * first has one); every start compares, and a different value stops the start, naming the field,
 * unless the tenant has no user yet (then the new values are recorded). A tenant whose data
 * predates this record gets it from the config of its first start with it.
 */
export async function checkFixedSettings(redis: Redis, tenant: CompiledTenant, index: number): Promise<void> {
  const key = new TenantKeys(tenant.id).fixed();
  const wanted: [field: string, path: string, value: string][] = [["shards", "shards", String(tenant.shards)]];
  if (tenant.streak) wanted.push(["streak.frequency", "streak.frequency", tenant.streak.frequency]);
  tenant.leaderboards.forEach((board, i) => wanted.push([`leaderboards.${board.key}`, `leaderboards[${i}]`, boardLayout(board)]));
  const pipeline = redis.pipeline();
  for (const [field, , value] of wanted) pipeline.hsetnx(key, field, value);
  pipeline.hmget(key, ...wanted.map(([field]) => field));
  const results = (await pipeline.exec()) ?? [];
  const [err, stored] = results[results.length - 1]!;
  if (err) throw err;
  const changed = wanted.map(([field, path, value], i) => ({ field, path, value, was: (stored as (string | null)[])[i]! })).filter((c) => c.was !== c.value);
  if (changed.length === 0) return;
  // A tenant with no user yet has nothing to misread: the config's values become the record.
  const shardsBefore = Math.max(tenant.shards, Number(changed.find((c) => c.field === "shards")?.was ?? tenant.shards));
  if (!(await hasUsers(redis, new TenantKeys(tenant.id), shardsBefore))) {
    await redis.hset(key, ...changed.flatMap((c) => [c.field, c.value]));
    return;
  }
  const { field, path, value, was } = changed[0]!;
  const fresh = field.startsWith("leaderboards.") ? "give the board a new key" : "start the tenant afresh under a new id";
  throw new ConfigError(
    `$input.tenants[${index}].${path}`,
    `is ${value}, but tenant ${tenant.id} has data stored with ${was}, which cannot be read with another value; keep ${was}, or ${fresh}`,
  );
}

/**
 * What a board's stored runs are laid out by: what it ranks (the values in its sets) and its
 * schedule (run k is the k-th window from the start) and groups. Its name, end, size, ranking
 * style and retention may change.
 */
function boardLayout(board: CompiledLeaderboard): string {
  const ranks = board.rankBy === "metric" ? `metric ${board.metric}` : board.rankBy === "points" ? `points ${board.points}` : "streak";
  const start = new Date(board.startDay * 86_400_000).toISOString().slice(0, 10);
  const runs = board.runUnit === null ? "one run" : `runs of ${board.runInterval} ${board.runUnit}`;
  return `"${ranks}, from ${start}, ${runs}, ${board.breakdownAttribute === null ? "no breakdown" : `breakdown by ${board.breakdownAttribute}`}"`;
}

/** Whether any shard counts a user ({t:s}:agg users). */
async function hasUsers(redis: Redis, keys: TenantKeys, shards: number): Promise<boolean> {
  const pipeline = redis.pipeline();
  for (let shard = 0; shard < shards; shard++) pipeline.hget(keys.agg(shard), "users");
  return ((await pipeline.exec()) ?? []).some(([, users]) => Number(users ?? 0) > 0);
}
