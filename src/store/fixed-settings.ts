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
  const wanted = fixedSettings(tenant);
  const pipeline = redis.pipeline();
  for (const [field, , value] of wanted) pipeline.hsetnx(key, field, value);
  pipeline.hmget(key, ...wanted.map(([field]) => field));
  const results = (await pipeline.exec()) ?? [];
  const [err, stored] = results[results.length - 1]!;
  if (err) throw err;
  const changed = changedSettings(wanted, stored as (string | null)[]);
  if (changed.length === 0) return;
  // A tenant with no user yet has nothing to misread: the config's values become the record.
  if (!(await hasUsers(redis, new TenantKeys(tenant.id), shardsBefore(tenant, changed)))) {
    await redis.hset(key, ...changed.flatMap((c) => [c.field, c.value]));
    return;
  }
  throw settingError(tenant, index, changed[0]!);
}

/**
 * What checkFixedSettings would say of `tenant` against the data in `redis`, without writing
 * anything (a config checked before a deploy: `node dist/check-config.js`): the error a start
 * would stop with, or null when a start would go on (nothing recorded yet, the same values, or
 * no user stored to misread).
 */
export async function fixedSettingsProblem(redis: Redis, tenant: CompiledTenant, index: number): Promise<ConfigError | null> {
  const wanted = fixedSettings(tenant);
  const stored = await redis.hmget(new TenantKeys(tenant.id).fixed(), ...wanted.map(([field]) => field));
  // A field not recorded yet is recorded by the start as the config has it: no change.
  const changed = changedSettings(wanted, stored).filter((c) => c.was !== null);
  if (changed.length === 0) return null;
  if (!(await hasUsers(redis, new TenantKeys(tenant.id), shardsBefore(tenant, changed)))) return null;
  return settingError(tenant, index, changed[0]!);
}

type Setting = [field: string, path: string, value: string];
interface Change {
  field: string;
  path: string;
  value: string;
  was: string | null;
}

/** The settings of `tenant` its stored data is laid out by, as {t}:fixed records them. */
function fixedSettings(tenant: CompiledTenant): Setting[] {
  const wanted: Setting[] = [["shards", "shards", String(tenant.shards)]];
  if (tenant.streak) wanted.push(["streak.frequency", "streak.frequency", tenant.streak.frequency]);
  tenant.leaderboards.forEach((board, i) => wanted.push([`leaderboards.${board.key}`, `leaderboards[${i}]`, boardLayout(board)]));
  return wanted;
}

function changedSettings(wanted: readonly Setting[], stored: readonly (string | null)[]): Change[] {
  return wanted.map(([field, path, value], i) => ({ field, path, value, was: stored[i] ?? null })).filter((c) => c.was !== c.value);
}

/** The shards to look for users on: the more of the config's and the recorded count. */
function shardsBefore(tenant: CompiledTenant, changed: readonly Change[]): number {
  return Math.max(tenant.shards, Number(changed.find((c) => c.field === "shards")?.was ?? tenant.shards));
}

function settingError(tenant: CompiledTenant, index: number, { path, value, was, field }: Change): ConfigError {
  const fresh = field.startsWith("leaderboards.") ? "give the board a new key" : "start the tenant afresh under a new id";
  return new ConfigError(
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
