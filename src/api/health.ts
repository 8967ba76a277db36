import type { Redis } from "ioredis";
import type { Clock } from "../clock.js";
import { answeredWithin } from "../deadline.js";
import type { ApiReply } from "../http/router.js";

/**
 * How long /healthz waits for PING. A probe must get its answer within its own timeout (1 s is
 * Kubernetes' default): a stalled Redis (stopped, or a partition without a reset) never answers,
 * and the health check waited with it, then said "ok" when Redis came back.
 */
export const HEALTH_PING_TIMEOUT_MS = 1000;

const DOWN: ApiReply = { status: 503, body: { error: "Redis is not reachable", status: "degraded", redis: "down" } };

/**
 * GET /healthz: 200 when Redis answers PING within HEALTH_PING_TIMEOUT_MS, 503 otherwise; at once
 * while the connection is down (ioredis would hold the PING through its reconnection backoff).
 * No key needed; reveals no data.
 */
export function healthHandler(redis: Redis, clock: Clock) {
  return async (): Promise<ApiReply> => {
    if (redis.status !== "ready") return DOWN;
    // The PING's deadline lets the process read an answer that arrived in time (deadline.ts).
    const ok = await answeredWithin(redis.ping(), HEALTH_PING_TIMEOUT_MS).then(
      () => true,
      () => false,
    );
    return ok ? { status: 200, body: { status: "ok", redis: "ok", now: new Date(clock.now()).toISOString() } } : DOWN;
  };
}
