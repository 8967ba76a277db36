import type { Redis } from "ioredis";

/**
 * A bound on how long a command that was on the wire when the Redis connection dropped waits to
 * be sent again (LAUREL_RESEND_WAIT, seconds; default 60, 0 without a bound).
 *
 * ioredis keeps the commands still unanswered at a drop apart from the others (its
 * `prevCommandQueue`) and sends them again once a connection is ready, which is what makes an
 * event whose reply was lost count once (redis-script.ts MayHaveRun, call-order.ts). It never
 * fails them: neither its maxRetriesPerRequest flush nor a refused password touch that queue. So
 * while no connection Redis accepts comes back (Redis down for good, credentials refused), their
 * requests waited for as long as that lasted, and only the client's own timeout ended them,
 * holding their HTTP connections and memory meanwhile.
 *
 * Past the bound, counted from the drop, each such command is failed with
 * ResendAbandonedError (answered 503: whether it took effect is unknown, since Redis may have run
 * it before the drop) and taken out of the queue, so that it is never sent afterwards: a request
 * answered 503 must not be applied behind its caller's back, who may retry it. A Redis that comes
 * back within the bound (a restart, a failover) gets the commands again, exactly once as before.
 */
export class ResendAbandonedError extends Error {
  override readonly name = "ResendAbandonedError";
  constructor(waitedMs: number) {
    super(`The Redis connection was lost with this command on its way and none came back within ${waitedMs / 1000} s (LAUREL_RESEND_WAIT)`);
  }
}

/** The event a client emits with the number of commands it failed, for the log (redis-client.ts logConnectionErrors). */
export const RESENDS_ABANDONED = "laurel:resends-abandoned";

/** Default bound: a restart of Redis with a modest data set, or a Sentinel failover, fits in it. */
const DEFAULT_RESEND_WAIT_MS = 60_000;

/** LAUREL_RESEND_WAIT in milliseconds (checked at start with the other seconds variables, boot.ts). */
export function resendWaitMs(env: NodeJS.ProcessEnv = process.env): number {
  return env.LAUREL_RESEND_WAIT ? Number(env.LAUREL_RESEND_WAIT) * 1000 : DEFAULT_RESEND_WAIT_MS;
}

/** The part of ioredis' client this reads: not in its types. */
interface QueuedCommand {
  command: { reject(err: Error): void };
}
interface ResendQueue {
  length: number;
  shift(): QueuedCommand | undefined;
}
type WithResendQueue = Redis & { prevCommandQueue: ResendQueue | null };

/** Bounds `redis`'s wait to re-send (see above); `waitMs` 0 leaves it unbounded. */
export function boundResendWait(redis: Redis, waitMs: number): Redis {
  if (waitMs <= 0) return redis;
  const client = redis as WithResendQueue;
  let timer: NodeJS.Timeout | null = null;
  // ioredis emits "close" on the next tick after it set prevCommandQueue (a drop from "ready").
  // A close while already waiting (a reconnect attempt refused) keeps the first drop's clock.
  redis.on("close", () => {
    if (timer !== null || !(client.prevCommandQueue && client.prevCommandQueue.length > 0)) return;
    timer = setTimeout(() => {
      timer = null;
      const queue = client.prevCommandQueue;
      // Sent again meanwhile: ioredis' ready handler empties the queue and sets it to null.
      if (redis.status === "ready" || !queue) return;
      client.prevCommandQueue = null;
      const error = new ResendAbandonedError(waitMs);
      let failed = 0;
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) {
        item.command.reject(error);
        failed++;
      }
      if (failed > 0) redis.emit(RESENDS_ABANDONED, failed, waitMs);
    }, waitMs);
    timer.unref();
  });
  redis.on("ready", () => {
    if (timer === null) return;
    clearTimeout(timer);
    timer = null;
  });
  return redis;
}
