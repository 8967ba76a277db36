import type { Redis } from "ioredis";
import type { CompiledTenant } from "../config/compiled.js";
import { ConfigError } from "../config/compile.js";
import { TenantKeys } from "./keys.js";

/**
 * Settings a tenant's stored data is laid out by, which a config must not change under it:
 * - `shards`: a user's keys live on shard hash(id) mod shards; with another count most users
 *   would be looked for on the wrong shard, found missing and created again (their totals,
 *   streaks and achievements started over beside the old ones).
 * - `streak.frequency`: stored streaks count periods of their frequency (day, week or month
 *   indexes), which another frequency would read as its own.
 * The first start of a tenant records them in {t}:fixed (a streak's frequency when the config
 * first has one); every start compares, and a different value stops the start, naming the field,
 * unless the tenant has no user yet (then the new values are recorded). A tenant whose data
 * predates this record gets it from the config of its first start with it.
 */
export async function checkFixedSettings(redis: Redis, tenant: CompiledTenant, index: number): Promise<void> {
  const key = new TenantKeys(tenant.id).fixed();
  const wanted: [field: string, path: string, value: string][] = [["shards", "shards", String(tenant.shards)]];
  if (tenant.streak) wanted.push(["streak.frequency", "streak.frequency", tenant.streak.frequency]);
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
  const { path, value, was } = changed[0]!;
  throw new ConfigError(
    `$input.tenants[${index}].${path}`,
    `is ${value}, but tenant ${tenant.id} has data stored with ${was}, which cannot be read with another value; keep ${was}, or start the tenant afresh under a new id`,
  );
}

/** Whether any shard counts a user ({t:s}:agg users). */
async function hasUsers(redis: Redis, keys: TenantKeys, shards: number): Promise<boolean> {
  const pipeline = redis.pipeline();
  for (let shard = 0; shard < shards; shard++) pipeline.hget(keys.agg(shard), "users");
  return ((await pipeline.exec()) ?? []).some(([, users]) => Number(users ?? 0) > 0);
}
