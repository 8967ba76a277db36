import { performance } from "node:perf_hooks"; // not the global, an accessor (see store/redis-script.ts)
import { LaurelError } from "../domain/errors.js";

/**
 * The longest a read (GET) waits for Redis before it is answered 503 (LAUREL_READ_TIMEOUT). A
 * metering gate sits in its callers' requests: when Redis stalls (stopped, a partition that sends
 * no reset, a fork or a disk holding it up), a read that waited for it held the caller's request
 * with it, for as long as the stall lasted or the caller's own timeout allowed, and every read
 * behind it piled up in the service. A read changes nothing, so answering it early is always safe;
 * writes still wait (Redis may yet apply them: an early 503 would let an event be counted twice
 * by a client that retries without an Idempotency-Key).
 *
 * Nothing per request but a Map entry: a timer per read would cost the metering read more than
 * the entry does. One sweep every quarter of the bound answers the reads that have waited the
 * bound; the Map keeps arrival order, so a sweep stops at the first read still within it.
 */
export class ReadDeadline {
  /** Each waiting read's `expire`, with its arrival (performance.now()), oldest first. */
  private readonly waiting = new Map<(err: unknown) => void, number>();
  private readonly timer: NodeJS.Timeout;
  /** The one error every expired read is answered with (a LaurelError: the router's 503 with its message). */
  private readonly error: LaurelError;

  /**
   * @param boundMs  the bound, > 0
   * @param onExpired told how many reads one sweep answered (the router counts and logs them)
   */
  constructor(
    readonly boundMs: number,
    private readonly onExpired: (count: number) => void,
  ) {
    this.error = new LaurelError("REDIS_READ_TIMEOUT", `Redis did not answer within ${boundMs} ms; retry later`);
    // A quarter of the bound: a read is answered between the bound and 1.25 times it.
    this.timer = setInterval(() => this.sweep(), Math.max(1, Math.min(boundMs / 4, 1000)));
    this.timer.unref();
  }

  /** A read began: `expire` answers it with the bound's 503 (it must end the read: untrack). */
  track(expire: (err: unknown) => void, arrived: number): void {
    this.waiting.set(expire, arrived);
  }

  /** The read ended (answered, or its client went away). */
  untrack(expire: (err: unknown) => void): void {
    this.waiting.delete(expire);
  }

  /** Answers every read that has waited the bound. */
  sweep(now = performance.now()): void {
    let expired = 0;
    for (const [expire, arrived] of this.waiting) {
      if (now - arrived < this.boundMs) break;
      this.waiting.delete(expire);
      expire(this.error);
      expired++;
    }
    if (expired > 0) this.onExpired(expired);
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
