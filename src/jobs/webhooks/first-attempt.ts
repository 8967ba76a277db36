import type { Queue } from "bullmq";
import type { Redis } from "ioredis";
import { loadLua } from "../../store/lua-loader.js";
import { runScript } from "../../store/redis-script.js";
import { isRedisUnreachable } from "../../store/redis-unreachable.js";
import { answeredWithin } from "../../deadline.js";
import { attemptDelivery, logLine, outcomeLine, type AttemptOutcome, type AttemptResult, type DeliveryJob, type Target } from "./attempt.js";
import { deliveryId } from "./keys.js";

/**
 * The first attempt of a delivery, made by the webhook consumer itself before it acknowledges the
 * record, instead of by a BullMQ worker after a trip through the queue.
 *
 * Why: through BullMQ a delivery costs the box ~280 µs (its add, its moves to active and to
 * completed, each a script with its own round trip, and the job's (de)serialisation), against
 * ~110 µs for the POST alone (`node bench/delivery-cost.mjs queue|direct`), and deliveries share
 * the two cores with the event path (issue 6: the event bench within 10% with an endpoint).
 * Most first attempts succeed, so most deliveries now cost a POST and their share of one script
 * per batch (lua/firstAttempts-5.lua), which writes each as the job BullMQ would have left:
 * delivered, or failed once and waiting for its retry (attempt 2 onwards by the queue's workers,
 * with the backoff from retry 1), or dead when the queue allows one attempt. The admin API,
 * GET /metrics and replays see one kind of job whoever made the attempt.
 *
 * Bounds, so a slow receiver never holds the consumer (and every other endpoint's deliveries)
 * for long: at most `concurrency` attempts at once, each waited for `timeoutMs` at most (or the
 * endpoint's own timeout when lower), and after a failed first attempt, or one that took
 * `slowMs` or more, the endpoint's deliveries go straight to the queue for `pauseMs`. An attempt
 * not answered within `timeoutMs` is not cut: it is recorded as waiting for its retry, due after
 * the endpoint's timeout and the first backoff, and its POST goes on until the endpoint's
 * timeout; a 2xx by then makes the job delivered. Cut at `timeoutMs`, a receiver that took the
 * delivery but answered in 3 s (a cold start) got it again at the first retry.
 *
 * Exactly one id per change still holds: only records read for the first time come here; a
 * record delivered again (a crashed consumer's, taken over) goes through BullMQ's add, which
 * ignores the job ids the first attempts wrote. A crash after a POST and before the record is
 * written sends that delivery again, with the same event id (at least once). So does a stop:
 * the attempts it cuts are not counted, and their records stay unacknowledged for the consumer
 * that takes them over.
 */
export interface FirstAttemptOptions {
  /** Whether the consumer makes first attempts (false: every delivery goes through the queue). @default true */
  enabled: boolean;
  /**
   * How long the consumer waits for a first attempt's answer, ms (the endpoint's timeout when
   * lower). Past it the attempt is recorded as waiting for its retry, and its POST goes on until
   * the endpoint's timeout: a 2xx by then makes the delivery delivered (FirstAttempts.awaitLate).
   * @default 2000
   */
  timeoutMs: number;
  /** After a failed or slow first attempt, the endpoint's deliveries go straight to the queue for this long, ms. @default 30000 */
  pauseMs: number;
  /** A first attempt that succeeds but takes at least this long (ms) pauses its endpoint too. @default 500 */
  slowMs: number;
  /** First attempts in flight at once, per tenant and process. @default 32 */
  concurrency: number;
}

export const DEFAULT_FIRST_ATTEMPT: FirstAttemptOptions = { enabled: true, timeoutMs: 2_000, pauseMs: 30_000, slowMs: 500, concurrency: 32 };

/** What the first attempts need of the delivery queue they feed. */
export interface FirstAttemptHost {
  readonly queue: Queue<DeliveryJob>;
  /** A connection to the queue's Redis. */
  readonly redis: Redis;
  /** Attempts in all, the first included. */
  readonly attempts: number;
  readonly keepDelivered: { age: number; count: number };
  endpoint(key: string): Target | undefined;
  /** The wait before retry n (backoffDelay with the queue's options). */
  retryDelay(retry: number): number;
  /** Whether the process is stopping: the outcome of attempts made then waits no more for Redis. */
  stopping(): boolean;
  /** The outcome of attempts made could not be written (Redis unreachable) and waits for Redis (said once a batch). */
  recordWaits(err: Error): void;
  /** Registers an attempt to cut when the process stops (aborted at once if it is stopping); returns its release. */
  track(controller: AbortController): () => void;
  /** Reports a delivery whose last attempt failed (logged as the queue's workers log theirs). */
  deadLettered(id: string, reason: string): void;
}

const script = loadLua("firstAttempts-5");

/** A first attempt made: its outcome, or (late) the consumer stopped waiting while the POST goes on. */
type Attempted = { job: DeliveryJob; outcome: AttemptOutcome } | { job: DeliveryJob; late: { attempt: Promise<AttemptOutcome>; at: number; waitedMs: number; timeoutMs: number } };

/** The kinds of lua/firstAttempts-5.lua's writes of a late attempt's outcome to its delayed job. */
const ANSWERED = "answered";
const LATE_FAILURE = "late-failure";

/** What run() takes when the consumer stops waiting for an attempt. */
const LATE = Symbol("late");

/**
 * How long the outcome of attempts already made waits for an unreachable Redis, tried again every
 * RECORD_RETRY_MS, before it is given up. Given up (or thrown at once), its records stay
 * unacknowledged and another turn or process delivers them again, to receivers that have answered:
 * a Redis restart longer than a command's 2 s wait for a connection (store/offline-wait.ts) sent
 * every delivery of its batches twice (bench/chaos.mjs, bench/README.md "The fifty-eighth stop").
 * No client waits for this write, so it waits as long as LAUREL_RESEND_WAIT's default.
 */
export const RECORD_WAIT_MS = 60_000;
const RECORD_RETRY_MS = 250;

export class FirstAttempts {
  /** Endpoint key → until when (ms, wall clock) its deliveries skip the first attempt. */
  private readonly pausedUntil = new Map<string, number>();
  /** The jobs' opts as BullMQ stores them: the queue's defaults. */
  private readonly optsJson: string;
  /** First attempts holding a slot, and those waiting for one (acquire). */
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    private readonly host: FirstAttemptHost,
    private readonly opts: FirstAttemptOptions,
  ) {
    this.optsJson = JSON.stringify(host.queue.defaultJobOptions);
  }

  /** Whether an endpoint's deliveries skip the first attempt now (after a failed or slow one). */
  private paused(endpointKey: string): boolean {
    return (this.pausedUntil.get(endpointKey) ?? 0) > Date.now();
  }

  /**
   * Makes the first attempt of each job whose endpoint is not paused and records them; returns the
   * jobs it left for the queue as they are (paused endpoints), and how many attempts a stopping
   * process cut (those are neither recorded nor left: see DeliveryQueue.dispatch).
   */
  async run(jobs: readonly DeliveryJob[]): Promise<{ left: DeliveryJob[]; cut: number }> {
    const left: DeliveryJob[] = [];
    let cut = 0;
    const done: Attempted[] = [];
    await Promise.all(
      jobs.map(async (job) => {
        await this.acquire();
        try {
          // Checked once the slot is ours: a failure earlier in the batch pauses the endpoint for the rest.
          const endpoint = this.host.endpoint(job.endpoint);
          if (!endpoint || this.paused(job.endpoint)) {
            left.push(job);
            return;
          }
          const controller = new AbortController();
          const release = this.host.track(controller);
          // The POST has the endpoint's whole timeout; the consumer waits for it `timeoutMs` at
          // most (awaitLate). A queue that allows one attempt has no retry to hand a late one to.
          const awaitsLate = endpoint.timeoutMs > this.opts.timeoutMs && this.host.attempts > 1;
          const startedAt = Date.now();
          const attempt = attemptDelivery(endpoint, job, awaitsLate ? endpoint.timeoutMs : Math.min(endpoint.timeoutMs, this.opts.timeoutMs), controller).finally(release);
          // An attempt never rejects (attemptDelivery): a rejection here is the wait's end, which
          // reads an answer that arrived in time first, however late this process runs (deadline.ts).
          const outcome = awaitsLate ? await answeredWithin(attempt, this.opts.timeoutMs).catch((): typeof LATE => LATE) : await attempt;
          if (outcome === LATE) {
            // Slow: the endpoint's next deliveries go through the queue for a while, as below.
            this.pausedUntil.set(job.endpoint, Date.now() + this.opts.pauseMs);
            done.push({ job, late: { attempt, at: startedAt, waitedMs: this.opts.timeoutMs, timeoutMs: endpoint.timeoutMs } });
            return;
          }
          if (outcome.stopped) {
            cut++;
            return;
          }
          // A slow receiver would hold the consumer batch after batch: the queue's workers wait for it instead.
          if (!outcome.ok || outcome.ms >= this.opts.slowMs) this.pausedUntil.set(job.endpoint, Date.now() + this.opts.pauseMs);
          done.push({ job, outcome });
        } finally {
          this.release();
        }
      }),
    );
    await this.record(done);
    // Recorded as waiting for their retry: an answer that comes in the endpoint's time now makes
    // the job delivered (one write each, in the background: the consumer goes on).
    for (const a of done) if ("late" in a) void this.awaitLate(a.job, a.late.attempt);
    return { left, cut };
  }

  /**
   * A first attempt the consumer stopped waiting for (`timeoutMs`) goes on for the endpoint's own
   * timeout. Its job waits in the delayed set meanwhile (recorded by run); a 2xx in time makes it
   * the delivered job, as if the consumer had waited: a receiver slow to answer (a cold start)
   * got the delivery again at the first retry, though it had taken it. Any other outcome leaves
   * the retry as it is, with the failure's reason and log line; a stop that cuts the POST leaves
   * it untouched (the queue sends it later, same id).
   */
  private async awaitLate(job: DeliveryJob, attempt: Promise<AttemptOutcome>): Promise<void> {
    const outcome = await attempt;
    if (outcome.stopped) return;
    try {
      // A failure told as the queue's attempts tell theirs: its reason and its log line.
      await this.write(this.jobValues(job, outcome, ANSWERED, LATE_FAILURE));
    } catch {
      // Not written (Redis away past the wait, or the process stopping): the retry stays, and
      // sends the delivery again (same id), as before this answer.
    }
  }

  /**
   * A slot among `concurrency`, shared by every batch in flight: the consumer processes its
   * shards' batches at once, and the bound is per tenant and process, not per batch.
   */
  private acquire(): Promise<void> {
    if (this.active < this.opts.concurrency) {
      this.active++;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** Hands the slot to the next waiting attempt, or frees it. */
  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.active--;
  }

  /** One script call: each attempt as the BullMQ job it leaves (lua/firstAttempts-5.lua). */
  private async record(done: readonly Attempted[]): Promise<void> {
    if (done.length === 0) return;
    const jobs: (string | number)[] = [];
    for (const attempted of done) {
      const { job } = attempted;
      if ("outcome" in attempted) {
        jobs.push(...this.jobValues(job, attempted.outcome, "delivered", this.host.attempts <= 1 ? "dead" : "retry"));
        continue;
      }
      const { at, waitedMs, timeoutMs } = attempted.late;
      // Due once the POST's own timeout has passed and then the first retry's wait: the retry
      // never overlaps the attempt it follows.
      const error = `no answer within ${waitedMs} ms`;
      const line = logLine(at, 1, `${error}; its answer awaited until the endpoint's timeout (${timeoutMs} ms)`);
      jobs.push("retry", deliveryId(job.eventId, job.endpoint), job.type, JSON.stringify(job), at, error, timeoutMs - waitedMs + this.host.retryDelay(1), line);
    }
    await this.write(jobs);
    if (this.host.attempts <= 1) for (const a of done) if ("outcome" in a && !a.outcome.ok) this.host.deadLettered(deliveryId(a.job.eventId, a.job.endpoint), a.outcome.error!);
  }

  /**
   * A first attempt's outcome as lua/firstAttempts-5.lua's 8 values of a job: an answer (kind
   * `answered`) with its result and the instant it came (finished then, not when the batch is
   * written, up to a slow attempt later); a failure (kind `failed`) with its reason, the first
   * retry's delay and its log line.
   */
  private jobValues(job: DeliveryJob, outcome: AttemptOutcome, answered: string, failed: string): (string | number)[] {
    const head = [deliveryId(job.eventId, job.endpoint), job.type, JSON.stringify(job), outcome.at];
    if (!outcome.ok) return [failed, ...head, outcome.error!, this.host.retryDelay(1), outcomeLine(outcome, 1)];
    const result: AttemptResult = { status: outcome.status!, ms: outcome.ms, attempt: 1, at: outcome.at, by: "consumer" };
    return [answered, ...head, JSON.stringify(result), outcome.at + outcome.ms, ""];
  }

  /** lua/firstAttempts-5.lua with the jobs' values (8 a job), waiting for an unreachable Redis (RECORD_WAIT_MS). */
  private async write(jobs: readonly (string | number)[]): Promise<void> {
    const { queue, keepDelivered } = this.host;
    const args: (string | number)[] = [queue.toKey(""), Date.now(), keepDelivered.age, keepDelivered.count, this.optsJson, ...jobs];
    const k = queue.keys;
    const keys = [k.completed!, k.delayed!, k.wait!, k.marker!, k.failed!];
    // The script writes a job only where its id is not held yet (and completes one only while it
    // waits in the delayed set), so a try that ran though its reply was lost is harmless to
    // repeat. Not while the process stops: its records stay pending for another process, as
    // those of the attempts a stop cuts do.
    const giveUpAt = Date.now() + RECORD_WAIT_MS;
    for (let tried = 0; ; tried++) {
      try {
        await runScript(this.host.redis, script, keys, args);
        return;
      } catch (err) {
        if (!isRedisUnreachable(err) || this.host.stopping() || Date.now() >= giveUpAt) throw err;
        if (tried === 0) this.host.recordWaits(err as Error);
        await new Promise((resolve) => setTimeout(resolve, RECORD_RETRY_MS));
      }
    }
  }
}
