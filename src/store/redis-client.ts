import { Redis, type RedisOptions } from "ioredis";
import { coalesceWrites } from "./write-coalescing.js";

/**
 * The Redis client of a Laurel process (service, worker, tests, the bench's baseline), so that
 * all of them talk to Redis the same way. Environment:
 *   LAUREL_COALESCE=off      one socket write per command (ioredis' default) instead of one per
 *                            turn of the event loop (write-coalescing.ts)
 *   LAUREL_AUTOPIPELINE=1    ioredis auto-pipelining (measured no better here: bench/README.md)
 */
export function createRedisClient(url: string, options: RedisOptions = {}, env: NodeJS.ProcessEnv = process.env): Redis {
  return withCoalescing(new Redis(url, { maxRetriesPerRequest: 3, enableAutoPipelining: env.LAUREL_AUTOPIPELINE === "1", ...options }), env);
}

/**
 * A second connection with the client's options and the same write coalescing, for work that
 * must not queue ahead of the event path's calls on one socket (the webhook consumer).
 */
export function duplicateClient(redis: Redis, env: NodeJS.ProcessEnv = process.env): Redis {
  return withCoalescing(redis.duplicate(), env);
}

function withCoalescing(redis: Redis, env: NodeJS.ProcessEnv): Redis {
  if (env.LAUREL_COALESCE !== "off") coalesceWrites(redis);
  return redis;
}
