import type { Redis } from "ioredis";
import type { Logger } from "pino";

/**
 * Laurel keeps its data in Redis only: a Redis that evicts keys under memory pressure silently
 * drops users, totals, awards and idempotency keys. Warns at start when the server's
 * maxmemory-policy is anything but noeviction (with noeviction a full Redis refuses writes, and
 * the events fail loudly instead). Read from INFO, which managed services allow where CONFIG is
 * disabled; a server that does not say is left alone.
 */
export async function warnIfRedisEvicts(redis: Redis, logger: Logger): Promise<string | null> {
  const info = await redis.info("memory");
  const policy = /^maxmemory_policy:(\S+)/m.exec(info)?.[1] ?? null;
  if (policy !== null && policy !== "noeviction") {
    logger.warn({ maxmemoryPolicy: policy }, `Redis maxmemory-policy is ${policy}: under memory pressure Redis deletes keys, and Laurel's data with them; set maxmemory-policy noeviction`);
  }
  return policy;
}
