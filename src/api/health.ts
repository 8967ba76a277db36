import type { Redis } from "ioredis";
import type { Clock } from "../clock.js";
import type { ApiReply } from "../http/router.js";

/** GET /healthz: 200 when Redis answers PING, 503 otherwise. No key needed; reveals no data. */
export function healthHandler(redis: Redis, clock: Clock) {
  return async (): Promise<ApiReply> => {
    try {
      await redis.ping();
      return { status: 200, body: { status: "ok", redis: "ok", now: new Date(clock.now()).toISOString() } };
    } catch {
      return { status: 503, body: { error: "Redis is not reachable", status: "degraded", redis: "down" } };
    }
  };
}
