import type { Logger } from "pino";

/**
 * BullMQ's queues, workers and queue events each hold their own Redis connections and emit an
 * "error" for every failed reconnect attempt; with no listener BullMQ prints each to stderr. An
 * outage would write dozens of raw stack traces a second across a process's queues. Each gets
 * this listener instead: one warning in the log, then silence for `quietMs` (the next warning
 * says how many errors it did not log).
 */
export function logQueueErrors(emitter: { on(event: "error", listener: (err: Error) => void): unknown }, logger: Logger, name: string, quietMs = 30_000): void {
  let lastLogged = -Infinity;
  let unlogged = 0;
  emitter.on("error", (err: Error) => {
    const now = Date.now();
    if (now - lastLogged < quietMs) {
      unlogged++;
      return;
    }
    logger.warn({ err: err.message, queue: name, unlogged }, "job queue error (Redis connection?)");
    lastLogged = now;
    unlogged = 0;
  });
}
