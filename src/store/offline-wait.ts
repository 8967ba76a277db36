import type { Redis } from "ioredis";

/**
 * A bound on how long a command waits in ioredis' offline queue (sent while the client has no
 * connection) once the client has been connected: OFFLINE_WAIT_MS, then it fails and its request
 * is answered 503 like a command ioredis gives up on.
 *
 * ioredis fails its offline commands after maxRetriesPerRequest reconnect attempts, counted on
 * each "close". Through Sentinel nothing is counted while no sentinel answers (or every one
 * refuses the password): its connector asks them again and again inside one connect attempt,
 * which never closes, so every request that needed Redis waited for as long as the sentinels
 * stayed out of reach, and the queue grew with each one. The same held for a connect attempt to
 * a host that drops packets, until connectTimeout (10 s) and three of them.
 *
 * A command in the offline queue was never written, so failing it records nothing and nothing
 * can apply it later. Commands already written when the connection dropped are resend-wait.ts's.
 * Before the first connection the start waits for Redis on its own terms (boot.ts
 * waitForRedisOrExit, LAUREL_REDIS_WAIT), so commands queued then are left to ioredis.
 */
const OFFLINE_WAIT_MS = 2_000;

export class OfflineWaitExpiredError extends Error {
  override readonly name = "OfflineWaitExpiredError";
  constructor(waitedMs: number) {
    super(`No connection to Redis within ${waitedMs} ms to send this command on`);
  }
}

/** The part of ioredis' client this reads: not in its types. */
interface OfflineItem {
  command: { reject(err: Error): void };
  /** When a sweep first saw it waiting (set here). */
  seenAt?: number;
}
interface OfflineQueue {
  length: number;
  shift(): OfflineItem | undefined;
  push(item: OfflineItem): void;
}
// Not an intersection with Redis: its typings declare offlineQueue private, which would make it never.
type WithOfflineQueue = { offlineQueue: OfflineQueue };

/** Bounds `redis`'s offline queue (see above): swept every half bound while the client is not ready. */
export function boundOfflineWait(redis: Redis, waitMs = OFFLINE_WAIT_MS): Redis {
  const client = redis as unknown as WithOfflineQueue;
  let everReady = false;
  let sweeper: NodeJS.Timeout | null = null;
  const sweep = (): void => {
    if (redis.status === "ready" || redis.status === "end") {
      clearInterval(sweeper!);
      sweeper = null;
      return;
    }
    const queue = client.offlineQueue;
    const now = Date.now();
    let expired: Error | null = null;
    // In queue order: the young ones go back in the order they came.
    for (let n = queue.length; n > 0; n--) {
      const item = queue.shift()!;
      item.seenAt ??= now;
      if (now - item.seenAt < waitMs) queue.push(item);
      else item.command.reject((expired ??= new OfflineWaitExpiredError(waitMs)));
    }
  };
  redis.on("ready", () => {
    everReady = true;
  });
  // A drop from "ready" ("close") and each attempt after it ("reconnecting", "connecting").
  for (const status of ["close", "reconnecting", "connecting"]) {
    redis.on(status, () => {
      if (!everReady || sweeper !== null || redis.status === "ready") return;
      sweeper = setInterval(sweep, waitMs / 2);
      sweeper.unref();
    });
  }
  return redis;
}
