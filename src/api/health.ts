import type { Redis } from "ioredis";
import type { Clock } from "../clock.js";
import { answeredWithin } from "../deadline.js";
import type { ApiReply } from "../http/router.js";

/**
 * How long /healthz waits for PING, and /metrics for its reads of Redis (prometheus.ts), unless
 * LAUREL_HEALTH_TIMEOUT says otherwise. A probe must get its answer within its own timeout (1 s
 * is Kubernetes' default): a stalled Redis (stopped, or a partition without a reset) never
 * answers, and the health check waited with it, then said "ok" when Redis came back.
 */
export const DEFAULT_HEALTH_TIMEOUT_MS = 1000;

/**
 * LAUREL_HEALTH_TIMEOUT's ceiling. An hour is already no health check; above 2^31 ms Node's timer
 * fires at once, so an unchecked large value would have answered "down" to every probe.
 */
export const MAX_HEALTH_TIMEOUT_MS = 3_600_000;

const DOWN: ApiReply = { status: 503, body: { error: "Redis is not reachable", status: "degraded", redis: "down" } };

/**
 * GET /healthz: 200 when Redis answers PING within `timeoutMs` (LAUREL_HEALTH_TIMEOUT), 503
 * otherwise; at once while the connection is down (ioredis would hold the PING through its
 * reconnection backoff). No key needed; reveals no data.
 */
export function healthHandler(redis: Redis, clock: Clock, timeoutMs: number) {
  return async (): Promise<ApiReply> => {
    if (redis.status !== "ready") return DOWN;
    // The PING's deadline lets the process read an answer that arrived in time (deadline.ts).
    const ok = await answeredWithin(redis.ping(), timeoutMs).then(
      () => true,
      () => false,
    );
    return ok ? { status: 200, body: { status: "ok", redis: "ok", now: new Date(clock.now()).toISOString() } } : DOWN;
  };
}
