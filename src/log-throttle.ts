import type { Logger } from "pino";

/**
 * At most one log line per `quietMs` for a failure that repeats: during a Redis outage every
 * loop turn, refresh and reconnect attempt fails, and a line (with a stack) for each buries the
 * log. The first failure is written at once; the next written line says how many were not.
 */
export class LogThrottle {
  private lastWritten = -Infinity;
  private unwritten = 0;

  /** `now`: the wall clock, in milliseconds (a test passes its own). */
  constructor(
    private readonly quietMs = 30_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Calls `write` with the count of calls not written since the last one, unless one was written less than quietMs ago. */
  run(write: (unlogged: number) => void): void {
    const now = this.now();
    if (now - this.lastWritten < this.quietMs) {
      this.unwritten++;
      return;
    }
    write(this.unwritten);
    this.lastWritten = now;
    this.unwritten = 0;
  }
}

/**
 * BullMQ's queues, workers and queue events each hold their own Redis connections and emit an
 * "error" for every failed reconnect attempt; with no listener BullMQ prints each to stderr. An
 * outage would write dozens of raw stack traces a second across a process's queues. Each gets
 * this listener instead: one warning per `quietMs`.
 */
export function logQueueErrors(emitter: { on(event: "error", listener: (err: Error) => void): unknown }, logger: Logger, name: string, quietMs = 30_000): void {
  const throttle = new LogThrottle(quietMs);
  emitter.on("error", (err: Error) => throttle.run((unlogged) => logger.warn({ err: err.message, queue: name, unlogged }, "job queue error (Redis connection?)")));
}
