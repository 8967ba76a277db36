import { performance } from "node:perf_hooks"; // not the global, an accessor (see store/redis-script.ts)
import { LaurelError } from "../domain/errors.js";
import { everyAfterReads } from "../deadline.js";

/**
 * The longest a read (GET) waits for Redis before it is answered 503 (LAUREL_READ_TIMEOUT). A
 * metering gate sits in its callers' requests: when Redis stalls (stopped, a partition that sends
 * no reset, a fork or a disk holding it up), a read that waited for it held the caller's request
 * with it, for as long as the stall lasted or the caller's own timeout allowed, and every read
 * behind it piled up in the service. A read changes nothing, so answering it early is always safe;
 * writes still wait (Redis may yet apply them: an early 503 would let an event be counted twice
 * by a client that retries without an Idempotency-Key).
 *
 * Per read, one small node linked at the tail of a list (arrival order) and unlinked when the
 * read ends; one sweep every quarter of the bound answers the reads that have waited it, from the
 * head, and stops at the first read still within it. A timer per read would cost more. So did a
 * Map of the waiting reads (+10-14k instructions a metering read under `bench/read-cost.mjs`, all
 * of it in the young-generation collector): the Map's table is rebuilt as entries come and go, and
 * each discarded table that had reached the old generation kept the reads it had held alive until
 * a full collection (the mechanism v8-tuning.ts describes). An unlinked node is emptied, so a dead
 * node holds nothing.
 *
 * Once reads have waited the bound, Redis is known to be stalled: for one more bound (renewed by
 * every sweep that answers a read) a read still waiting at a sweep is answered then, however
 * young, until Redis answers a read again (its handler's answer, or Redis's refusal; not a read
 * whose client went away, nor one its handler refused on the request, before any call to Redis).
 * A caller then waits a quarter of the bound at most during a stall, not a whole bound per
 * attempt: the official SDK sends a 503'd call twice more at once, and each attempt waited the
 * whole bound again.
 */
export class ReadDeadline {
  /** The oldest waiting read, and the newest (arrival order). */
  private head: WaitingRead | null = null;
  private tail: WaitingRead | null = null;
  private readonly timer: { cancel(): void };
  /** The one error every expired read is answered with (a LaurelError: the router's 503 with its message). */
  private readonly error: LaurelError;
  /** Until when (performance.now()) Redis is taken for stalled: the last sweep that answered a read, plus the bound. */
  private stalledUntil = -Infinity;

  /**
   * @param boundMs  the bound, > 0
   * @param onExpired told how many reads one sweep answered (the router counts and logs them)
   */
  constructor(
    readonly boundMs: number,
    private readonly onExpired: (count: number) => void,
  ) {
    this.error = new LaurelError("REDIS_READ_TIMEOUT", `Redis did not answer within ${boundMs} ms; retry later`);
    // A quarter of the bound: a read is answered between the bound and 1.25 times it. Each sweep
    // runs once the process has read its sockets (everyAfterReads): a process that did not run
    // for a while (a loaded host, a long GC) swept at its timer reads whose answers had arrived
    // in time and waited on the socket.
    this.timer = everyAfterReads(Math.max(1, Math.min(boundMs / 4, 1000)), () => this.sweep());
  }

  /** A read began: `expire` answers it with the bound's 503. Give the node to untrack when the read ends. */
  track(expire: (err: unknown) => void, arrived: number): WaitingRead {
    const node = new WaitingRead(expire, arrived, this.tail);
    if (this.tail === null) this.head = node;
    else this.tail.next = node;
    this.tail = node;
    return node;
  }

  /**
   * The read ended: `answered` when Redis answered it (so it is not stalled); not when its client
   * went away, or its handler failed before calling Redis. Once per node, or again harmlessly.
   */
  untrack(node: WaitingRead, answered = false): void {
    if (node.expire === null) return;
    if (answered) this.stalledUntil = -Infinity;
    if (node.prev === null) this.head = node.next;
    else node.prev.next = node.next;
    if (node.next === null) this.tail = node.prev;
    else node.next.prev = node.prev;
    node.expire = node.prev = node.next = null;
  }

  /** Answers every read that has waited the bound, and while Redis is stalled every read waiting. */
  sweep(now = performance.now()): void {
    let expired = 0;
    const stalled = now < this.stalledUntil;
    while (this.head !== null && (stalled || now - this.head.arrived >= this.boundMs)) {
      const node = this.head;
      const expire = node.expire!;
      this.untrack(node);
      expire(this.error);
      expired++;
    }
    if (expired === 0) return;
    this.stalledUntil = now + this.boundMs;
    this.onExpired(expired);
  }

  stop(): void {
    this.timer.cancel();
  }
}

/** A waiting read in ReadDeadline's list: emptied (expire null) once unlinked. */
export class WaitingRead {
  next: WaitingRead | null = null;
  constructor(
    public expire: ((err: unknown) => void) | null,
    readonly arrived: number,
    public prev: WaitingRead | null,
  ) {}
}
