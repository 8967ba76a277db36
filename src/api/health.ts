import type { Redis } from "ioredis";
import type { Clock } from "../clock.js";
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
    let timer: NodeJS.Timeout | undefined;
    // Past the timeout, one more turn of the event loop before Redis is called down: a process
    // that did not run meanwhile (a loaded host, a long GC) finds its timer due before it reads
    // the answer Redis sent in time, and said 503 with the answer waiting on its socket.
    const timedOut = new Promise<false>((resolve) => (timer = setTimeout(() => setImmediate(() => resolve(false)), HEALTH_PING_TIMEOUT_MS)));
    const answered = redis.ping().then(
      () => true,
      () => false,
    );
    const ok = await Promise.race([answered, timedOut]);
    clearTimeout(timer);
    return ok ? { status: 200, body: { status: "ok", redis: "ok", now: new Date(clock.now()).toISOString() } } : DOWN;
  };
}
