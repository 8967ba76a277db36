import type { Redis } from "ioredis";
import type { Logger } from "pino";

/**
 * Laurel keeps its data in Redis only, so what Redis keeps is what Laurel keeps. Both checks read
 * INFO, which managed services allow where CONFIG is disabled; a server that does not say is left
 * alone. Run at start; each warns and never stops the start (a throwaway Redis is a fair choice
 * for a test or a demo).
 */

/**
 * A Redis that evicts keys under memory pressure silently drops users, totals, awards and
 * idempotency keys. Warns when the server's maxmemory-policy is anything but noeviction (with
 * noeviction a full Redis refuses writes, and the events fail loudly instead).
 */
export async function warnIfRedisEvicts(redis: Redis, logger: Logger): Promise<string | null> {
  const info = await redis.info("memory");
  const policy = /^maxmemory_policy:(\S+)/m.exec(info)?.[1] ?? null;
  if (policy !== null && policy !== "noeviction") {
    logger.warn({ maxmemoryPolicy: policy }, `Redis maxmemory-policy is ${policy}: under memory pressure Redis deletes keys, and Laurel's data with them; set maxmemory-policy noeviction`);
  }
  return policy;
}

/**
 * A Redis without its append-only file loses, when it stops, every event acknowledged since its
 * last snapshot (all of them, when it takes none: Debian's packaged server on some hosts, a cache
 * configured to keep nothing). Warns when INFO persistence says `aof_enabled:0`. Returns whether
 * AOF is on (null: not said).
 */
export async function warnIfRedisForgets(redis: Redis, logger: Logger): Promise<boolean | null> {
  const info = await redis.info("persistence");
  const enabled = /^aof_enabled:(\d)/m.exec(info)?.[1];
  if (enabled === undefined) return null;
  if (enabled === "0") {
    logger.warn(
      { aofEnabled: false },
      "Redis runs without its append-only file: events acknowledged since its last snapshot (all of them without snapshots) are lost when it stops; set appendonly yes (README, Operations, Persistence)",
    );
  }
  return enabled === "1";
}
