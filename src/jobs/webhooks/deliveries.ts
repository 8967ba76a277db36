import { Queue, QueueEvents, UnrecoverableError, WaitingError, Worker, type ConnectionOptions, type Job, type JobState } from "bullmq";
import type { Redis } from "ioredis";
import type { Logger } from "pino";
import type { CompiledTenant } from "../../config/compiled.js";
import { attemptDelivery, logLine, outcomeLine, type AttemptResult, type DeliveryJob, type Target } from "./attempt.js";
import { DEFAULT_FIRST_ATTEMPT, FirstAttempts, type FirstAttemptOptions } from "./first-attempt.js";
import { deliveryId, deliveryQueueName, JOBS_PREFIX } from "./keys.js";
import { logQueueErrors } from "../../log-throttle.js";

export type { DeliveryJob } from "./attempt.js";

/**
 * Delivery of outbound events: one BullMQ queue per tenant (`laurel-hooks-<tenant>`), one job
 * per (event, endpoint) with job id "<event id>.<endpoint key>". BullMQ ignores an add whose job
 * id exists, so a record processed twice (a redelivery, a crashed consumer) queues one delivery;
 * and even after the job is gone the receiver sees the same event id (webhook-id), never a new one.
 *
 * An attempt (attempt.ts) is one POST of the stored body with fresh signatures and a timeout; a
 * 2xx answer is a success, anything else (status, timeout, network error) a failure, retried
 * with exponential backoff and jitter (backoffDelay) until the attempts run out; the job then
 * stays in BullMQ's failed set: the dead letters, listed and replayed by the admin API.
 *
 * The first attempt of a fresh delivery is made by the webhook consumer in a process that sends
 * (first-attempt.ts), which writes the job as BullMQ would have left it; the rest are BullMQ
 * workers' (startWorker). None is ever made on the request path: a slow or dead receiver holds
 * at most a bounded number of sockets, each bounded by a timeout.
 */
export interface BackoffOptions {
  /** Delay before the first retry, ms. @default 30000 */
  firstMs: number;
  /** Each retry waits this many times longer than the one before. @default 2.5 */
  factor: number;
  /** ± share of each delay drawn at random, so failing receivers are not hit in lockstep. @default 0.2 */
  jitter: number;
  /** Upper bound of one delay, ms. @default 43200000 (12 h) */
  maxMs: number;
}

export interface DeliveryOptions {
  /** Attempts in all, the first included. @default 10 (about 20 hours from the first to the last) */
  attempts: number;
  backoff: BackoffOptions;
  /** Concurrent POSTs per tenant and process. @default 16 */
  concurrency: number;
  /** BullMQ lock of a job being delivered; a crashed worker's job is retried after it. @default 30000 */
  lockDurationMs: number;
  /** How often a worker looks for jobs whose worker died. @default 30000 */
  stalledIntervalMs: number;
  /** Delivered jobs kept (the admin API shows them, and their ids dedupe a late re-add). @default 7 days, 50 000 */
  keepDelivered: { age: number; count: number };
  /** Dead-lettered jobs kept. @default 30 days */
  keepDead: { age: number };
  /** The first attempt, made by the webhook consumer (first-attempt.ts). */
  firstAttempt: FirstAttemptOptions;
  /**
   * How long a stop (SIGTERM) lets the attempts in flight finish before it cuts them. An attempt
   * cut after its receiver answered is sent again (same id): without this, every deploy under load
   * re-sent a few deliveries (bench/chaos.mjs CHAOS_HOOKS=1). The first attempt's own bound.
   * @default 2000
   */
  stopGraceMs: number;
}

/** DeliveryOptions as callers give them: any part left out takes its default. */
export type DeliveryOptionsInput = Partial<Omit<DeliveryOptions, "firstAttempt">> & { firstAttempt?: Partial<FirstAttemptOptions> };

export const DEFAULT_BACKOFF: BackoffOptions = { firstMs: 30_000, factor: 2.5, jitter: 0.2, maxMs: 12 * 3_600_000 };

export const DEFAULT_DELIVERY: DeliveryOptions = {
  attempts: 10,
  backoff: DEFAULT_BACKOFF,
  concurrency: 16,
  lockDurationMs: 30_000,
  stalledIntervalMs: 30_000,
  keepDelivered: { age: 7 * 86_400, count: 50_000 },
  keepDead: { age: 30 * 86_400 },
  firstAttempt: DEFAULT_FIRST_ATTEMPT,
  stopGraceMs: DEFAULT_FIRST_ATTEMPT.timeoutMs,
};

export function deliveryOptions(input: DeliveryOptionsInput = {}): DeliveryOptions {
  return { ...DEFAULT_DELIVERY, ...input, firstAttempt: { ...DEFAULT_FIRST_ATTEMPT, ...input.firstAttempt } };
}

/**
 * The wait before retry n (n = 1 after the first failure): firstMs × factor^(n−1) times a random
 * factor in [1 − jitter, 1 + jitter], at most maxMs (capped after the jitter: the cap is the
 * longest wait, as the README says; capped before it, a wait reached 14.4 h). With the
 * defaults: 30 s, 75 s, 3.1 min, 7.8 min, 20 min, 49 min, 2 h, 5.1 h, 12 h (10.2-12 h): ten
 * attempts over about 20 hours (20.5 h without the jitter, 17 to 22 h with it).
 */
export function backoffDelay(retry: number, opts: BackoffOptions, random: () => number = Math.random): number {
  const base = opts.firstMs * opts.factor ** Math.max(0, retry - 1);
  return Math.max(0, Math.min(opts.maxMs, Math.round(base * (1 + opts.jitter * (2 * random() - 1)))));
}

/** The admin API's delivery states (BullMQ's in brackets). */
export type DeliveryStatus = "pending" | "delivering" | "retrying" | "delivered" | "dead";

const STATES: Record<DeliveryStatus, JobState[]> = {
  pending: ["waiting", "prioritized", "waiting-children"],
  delivering: ["active"],
  retrying: ["delayed"],
  delivered: ["completed"],
  dead: ["failed"],
};

export const DELIVERY_STATUSES = Object.keys(STATES) as DeliveryStatus[];

/** Deliveries per status, all zero (a tenant without a queue in this process). */
export const NO_DELIVERIES: Readonly<Record<DeliveryStatus, number>> = { pending: 0, delivering: 0, retrying: 0, delivered: 0, dead: 0 };

function statusOf(state: JobState | "unknown"): DeliveryStatus | "unknown" {
  for (const status of DELIVERY_STATUSES) if (STATES[status].includes(state as JobState)) return status;
  return "unknown";
}

export interface DeliveryFilter {
  status?: DeliveryStatus;
  endpoint?: string;
  type?: string;
  userId?: string;
  limit: number;
  offset: number;
}

/** Deliveries queued per MULTI. */
const ENQUEUE_CHUNK = 50;

/** Jobs scanned at most by one listing with a filter on endpoint, type or user. */
const LIST_SCAN = 10_000;
/** How many deliveries of a status a filtered bulk replay reads at most, oldest first (an admin call: ten times the listing's). */
const REPLAY_SCAN = 100_000;

/** A stopping process cut first attempts: their records must stay unacknowledged (dispatch). */
export class DeliveriesStopped extends Error {
  constructor(readonly cut: number) {
    super(`${cut} first attempt(s) cut by a stopping process; their records stay pending`);
  }
}

export class DeliveryQueue {
  readonly queue: Queue<DeliveryJob>;
  /** Created on first use (settled()): a QueueEvents reads every event of the queue, a cost for nothing in production. */
  private queueEvents: QueueEvents | null = null;
  private worker: Worker<DeliveryJob> | null = null;
  /** In-flight attempts, cut by kill() at once and by close() after stopGraceMs, so a stop never waits long for a slow receiver. */
  private readonly inFlight = new Set<AbortController>();
  /** Called when the last attempt in flight ends (a stop's grace waits for it). */
  private onIdle: (() => void) | null = null;
  /** Stopped by kill(): as a crash, attempts cut are left to their lock's expiry. */
  private killed = false;
  private stopping = false;
  /** The endpoints by key, each URL parsed once: every attempt reuses them. */
  private readonly targets: Map<string, Target>;
  private readonly firstAttempts: FirstAttempts;

  /** Deliveries per status (the admin overview and GET /metrics): one BullMQ count per state. */
  async counts(): Promise<Record<DeliveryStatus, number>> {
    const raw = await this.queue.getJobCounts(...DELIVERY_STATUSES.flatMap((status) => STATES[status]));
    const sum = (status: DeliveryStatus) => STATES[status].reduce((n, state) => n + (raw[state] ?? 0), 0);
    return Object.fromEntries(DELIVERY_STATUSES.map((status) => [status, sum(status)])) as Record<DeliveryStatus, number>;
  }

  /**
   * `connection`: the options BullMQ makes its worker's and queue events' blocking connections
   * from. `redis`: a connection to the queue's Redis for the first attempts' one script per
   * batch. `queueClient`: the queue's own calls (the admin API's listings and replays, enqueues),
   * a client with the event path's bounds on waiting for a connection (Webhooks.start:
   * duplicateClient); without it (tools), BullMQ's own from `connection`, which has neither bound.
   */
  constructor(
    tenant: CompiledTenant,
    private readonly connection: ConnectionOptions,
    private readonly opts: DeliveryOptions,
    private readonly logger: Logger,
    redis: Redis,
    queueClient?: Redis,
  ) {
    this.targets = new Map(tenant.webhooks.map((w) => [w.key, { ...w, target: new URL(w.url) }]));
    const name = deliveryQueueName(tenant.id);
    this.queue = new Queue<DeliveryJob>(name, {
      connection: queueClient ?? connection,
      prefix: JOBS_PREFIX,
      defaultJobOptions: {
        attempts: opts.attempts,
        backoff: { type: "laurel" },
        removeOnComplete: opts.keepDelivered,
        removeOnFail: opts.keepDead,
      },
    });
    logQueueErrors(this.queue, logger, name);
    this.firstAttempts = new FirstAttempts(
      {
        queue: this.queue,
        redis,
        attempts: opts.attempts,
        keepDelivered: opts.keepDelivered,
        endpoint: (key) => this.endpointOf(key),
        retryDelay: (retry) => backoffDelay(retry, opts.backoff),
        track: (controller) => this.track(controller),
        deadLettered: (id, reason) => this.deadLettered(id, reason),
        stopping: () => this.stopping,
        recordWaits: (err) => this.recordWaits(err),
      },
      opts.firstAttempt,
    );
  }

  get name(): string {
    return this.queue.name;
  }

  /** Attempts this process has in flight (first attempts and its worker's). */
  get attemptsInFlight(): number {
    return this.inFlight.size;
  }

  /** Whether this process runs a worker on the queue (sends deliveries); false with LAUREL_DELIVERIES=off. */
  get sending(): boolean {
    return this.worker !== null;
  }

  /** Starts this process's worker on the queue. */
  async startWorker(): Promise<void> {
    if (this.worker) return;
    this.stopping = false;
    this.killed = false;
    this.worker = new Worker<DeliveryJob>(this.queue.name, (job, token) => this.attempt(job, token), {
      connection: this.connection,
      prefix: JOBS_PREFIX,
      concurrency: this.opts.concurrency,
      lockDuration: this.opts.lockDurationMs,
      stalledInterval: this.opts.stalledIntervalMs,
      // A job whose worker died is retried; it is not a failed attempt of the receiver.
      maxStalledCount: 100,
      settings: { backoffStrategy: (attemptsMade: number) => backoffDelay(attemptsMade, this.opts.backoff) },
    });
    this.worker.on("failed", (job, err) => {
      // Out of attempts, or dead at once (UnrecoverableError: its endpoint left the config).
      if (job && (job.attemptsMade >= (job.opts.attempts ?? 1) || err.name === "UnrecoverableError")) this.deadLettered(job.id!, err.message);
    });
    logQueueErrors(this.worker, this.logger, this.queue.name);
    await this.worker.waitUntilReady();
  }

  /** Queues deliveries; ids already queued (or kept) are ignored by BullMQ. Returns the delivery ids. */
  async enqueue(jobs: readonly DeliveryJob[]): Promise<string[]> {
    if (jobs.length === 0) return [];
    const ids = jobs.map((j) => deliveryId(j.eventId, j.endpoint));
    // addBulk is one MULTI: chunks keep each one short, so Redis never stalls the event path for long.
    for (let i = 0; i < jobs.length; i += ENQUEUE_CHUNK) {
      await this.queue.addBulk(jobs.slice(i, i + ENQUEUE_CHUNK).map((data, k) => ({ name: data.type, data, opts: { jobId: ids[i + k]! } })));
    }
    return ids;
  }

  /**
   * Sends deliveries of records read for the first time: in a process that sends, the consumer
   * makes their first attempt itself (first-attempt.ts) and queues what it left; otherwise, and
   * for records delivered again (`fresh` false), they are queued, and BullMQ ignores the ids it
   * holds, those of first attempts included.
   *
   * Throws DeliveriesStopped when this process stopped sending during the first attempts: the
   * cut deliveries are not queued here (this process's worker may be closing, and would take
   * them only to cut them again), so the consumer must not acknowledge the records; the
   * consumer that takes them over queues them.
   */
  async dispatch(jobs: readonly DeliveryJob[], fresh: boolean): Promise<void> {
    if (jobs.length === 0) return;
    if (!(fresh && this.sending && this.opts.firstAttempt.enabled)) {
      await this.enqueue(jobs);
      return;
    }
    const { left, cut } = await this.firstAttempts.run(jobs);
    await this.enqueue(left);
    if (cut > 0) throw new DeliveriesStopped(cut);
  }

  private endpointOf(key: string): Target | undefined {
    return this.targets.get(key);
  }

  /**
   * First attempts were made and answered, and Redis cannot be reached to record them: the
   * outcome waits for it (first-attempt.ts RECORD_WAIT_MS). Public for a test to act at that point.
   */
  recordWaits(err: Error): void {
    this.logger.warn({ err: err.message, queue: this.queue.name }, "webhook attempts made wait for Redis to record their outcome");
  }

  /** Whoever made the last attempt (a worker, or the consumer when the queue allows one attempt). */
  private deadLettered(id: string, reason: string): void {
    this.logger.warn({ delivery: id, err: reason }, "webhook delivery dead-lettered");
  }

  /** Registers an attempt to cut when this process stops; cut at once if it is stopping. */
  private track(controller: AbortController): () => void {
    this.inFlight.add(controller);
    if (this.stopping) controller.abort();
    return () => {
      this.inFlight.delete(controller);
      if (this.inFlight.size === 0) this.onIdle?.();
    };
  }

  /** A BullMQ worker's attempt: a failure throws (BullMQ retries), after its line is logged. */
  private async attempt(job: Job<DeliveryJob>, token: string | undefined): Promise<AttemptResult> {
    const endpoint = this.endpointOf(job.data.endpoint);
    if (!endpoint) {
      const reason = `endpoint ${job.data.endpoint} is no longer configured`;
      // An attempt like any other: its line in the log, then dead at once.
      await job.log(logLine(Date.now(), job.attemptsMade + 1, reason)).catch(() => undefined);
      throw new UnrecoverableError(reason);
    }
    const controller = new AbortController();
    const release = this.track(controller);
    const attempt = job.attemptsMade + 1;
    const outcome = await attemptDelivery(endpoint, job.data, endpoint.timeoutMs, controller).finally(release);
    // A success is recorded by BullMQ with the job (its return value): no extra write for it.
    if (outcome.ok) return { status: outcome.status!, ms: outcome.ms, attempt, at: outcome.at };
    if (outcome.stopped && !this.killed) {
      // Cut by this process stopping (a deploy's SIGTERM), not the receiver's failure: back to
      // the queue as it was, uncounted, for another process (or this one's next start) to send
      // at once. Thrown as an attempt, it cost the receiver one of its attempts and the next
      // retry's whole backoff. (kill() stops as a crash would: the job keeps its lock.)
      await job.moveToWait(token);
      throw new WaitingError();
    }
    await job.log(outcomeLine(outcome, attempt)).catch(() => undefined);
    throw new Error(outcome.error!);
  }

  // ---- admin API ----

  /**
   * Deliveries by status (pending, delivering, retrying, delivered, dead, in that order when no
   * status is given), newest first within each. Filters on endpoint, type or user read the jobs
   * and keep the matching ones, scanning at most LIST_SCAN of them.
   */
  async list(filter: DeliveryFilter): Promise<{ deliveries: Record<string, unknown>[]; scanned: number }> {
    const statuses = filter.status ? [filter.status] : DELIVERY_STATUSES;
    const filtered = filter.endpoint !== undefined || filter.type !== undefined || filter.userId !== undefined;
    const matches = (job: Job<DeliveryJob>) =>
      (filter.endpoint === undefined || job.data.endpoint === filter.endpoint) &&
      (filter.type === undefined || job.data.type === filter.type) &&
      (filter.userId === undefined || job.data.userId === filter.userId);
    const out: [Job<DeliveryJob>, JobState][] = [];
    let toSkip = filter.offset;
    let scanned = 0;
    const page = 500;
    for (const state of statuses.flatMap((st) => STATES[st])) {
      if (out.length >= filter.limit) break;
      if (!filtered) {
        // Whole states are skipped by their count; then one read of the page.
        const count = (await this.queue.getJobCounts(state))[state] ?? 0;
        if (toSkip >= count) {
          toSkip -= count;
          continue;
        }
        const jobs = (await this.queue.getJobs([state], toSkip, toSkip + filter.limit - out.length - 1, false)) as Job<DeliveryJob>[];
        toSkip = 0;
        for (const job of jobs) if (job) out.push([job, state]);
        continue;
      }
      for (let from = 0; out.length < filter.limit && scanned < LIST_SCAN; from += page) {
        const jobs = (await this.queue.getJobs([state], from, from + page - 1, false)) as Job<DeliveryJob>[];
        scanned += jobs.length;
        for (const job of jobs) {
          if (!job || !matches(job)) continue;
          if (toSkip > 0) toSkip--;
          else if (out.length < filter.limit) out.push([job, state]);
        }
        if (jobs.length < page) break;
      }
    }
    return { deliveries: await Promise.all(out.map(([job, state]) => this.summary(job, state))), scanned };
  }

  private async summary(job: Job<DeliveryJob>, state?: JobState | "unknown"): Promise<Record<string, unknown>> {
    const s = state ?? (await job.getState());
    const status = statusOf(s);
    const iso = (ms: number | undefined | null) => (ms ? new Date(ms).toISOString() : null);
    return {
      id: job.id,
      eventId: job.data.eventId,
      type: job.data.type,
      endpoint: job.data.endpoint,
      url: this.endpointOf(job.data.endpoint)?.url ?? null,
      userId: job.data.userId,
      status,
      attempts: job.attemptsMade,
      maxAttempts: job.opts.attempts ?? 1,
      lastError: status === "delivered" ? null : job.failedReason || null,
      responseStatus: status === "delivered" ? ((job.returnvalue as { status?: number } | null)?.status ?? null) : null,
      created: iso(job.timestamp),
      lastAttempt: iso(job.processedOn),
      finished: iso(job.finishedOn),
    };
  }

  async inspect(id: string): Promise<Record<string, unknown> | null> {
    const job = (await this.queue.getJob(id)) as Job<DeliveryJob> | undefined;
    if (!job) return null;
    const { logs } = await this.queue.getJobLogs(id, 0, 99, true);
    // Failed attempts are logged as they happen; the success is the job's return value.
    const success = successLine(job);
    const log = success === null ? logs : [...logs, success];
    return { ...(await this.summary(job)), log, payload: JSON.parse(job.data.body) as unknown };
  }

  /**
   * Sends a delivery again: a dead or delivered one goes back to the queue with a fresh set of
   * attempts (same event id and body); one waiting for a retry is sent now. Pending or in-flight
   * ones are left alone.
   */
  async replay(id: string): Promise<"replayed" | "not-found" | "in-progress"> {
    const job = (await this.queue.getJob(id)) as Job<DeliveryJob> | undefined;
    if (!job) return "not-found";
    const state = await job.getState();
    if (state === "failed" || state === "completed") {
      // The retry clears the return value, where the success's line lives (inspect): logged now,
      // the log keeps it before the replay's attempts.
      const success = successLine(job);
      if (success !== null) await job.log(success);
      await job.retry(state, { resetAttemptsMade: true, resetAttemptsStarted: true });
      return "replayed";
    }
    if (state === "delayed") {
      await job.promote();
      return "replayed";
    }
    return "in-progress";
  }

  /**
   * Ids of deliveries in a status, oldest first (bulk replay), at most `limit`. Unfiltered, the
   * first `limit`; filtered by endpoint or type, read a page at a time until `limit` match,
   * through at most REPLAY_SCAN. (Until 2026-12-05 it read the 10 000 oldest whole, for any
   * limit, and looked no further: the dead of an endpoint behind 10 000 older ones of another
   * were out of a filtered replay's reach.)
   */
  async idsIn(status: DeliveryStatus, limit: number, endpoint?: string, type?: string): Promise<string[]> {
    const filtered = endpoint !== undefined || type !== undefined;
    const page = filtered ? 500 : limit;
    const ids: string[] = [];
    for (let from = 0; ids.length < limit && from < REPLAY_SCAN; from += page) {
      const jobs = (await this.queue.getJobs(STATES[status], from, from + page - 1, true)) as Job<DeliveryJob>[];
      for (const job of jobs) {
        if (job && ids.length < limit && (endpoint === undefined || job.data.endpoint === endpoint) && (type === undefined || job.data.type === type)) ids.push(job.id!);
      }
      if (jobs.length < page) break;
    }
    return ids;
  }

  private async events(): Promise<QueueEvents> {
    if (!this.queueEvents) {
      this.queueEvents = new QueueEvents(this.queue.name, { connection: this.connection, prefix: JOBS_PREFIX });
      logQueueErrors(this.queueEvents, this.logger, this.queue.name);
      await this.queueEvents.waitUntilReady();
    }
    return this.queueEvents;
  }

  /** Resolves when nothing is waiting, in flight or waiting for a retry (tests, tools). */
  async settled(): Promise<void> {
    const events = await this.events();
    for (;;) {
      const counts = await this.queue.getJobCounts("waiting", "active", "delayed", "prioritized");
      if (Object.values(counts).every((n) => n === 0)) return;
      await new Promise<void>((resolve) => {
        const done = (): void => {
          events.off("completed", done);
          events.off("failed", done);
          clearTimeout(timer);
          resolve();
        };
        // Events only wake the check sooner; the loop re-reads the counts either way.
        const timer = setTimeout(done, 50);
        events.on("completed", done);
        events.on("failed", done);
      });
    }
  }

  /** Stops this process's worker as a crash would: in-flight POSTs are cut and their jobs keep their lock until it expires. */
  async kill(): Promise<void> {
    await this.stop(true);
  }

  /**
   * Stops sending (this process's worker, and first attempts): no attempt begins; those in flight
   * may finish until `graceUntil` (ms, default now + stopGraceMs), then are cut; the queue stays open.
   */
  async stopSending(graceUntil = Date.now() + this.opts.stopGraceMs): Promise<void> {
    await this.stop(false, graceUntil);
  }

  private async stop(force: boolean, graceUntil = 0): Promise<void> {
    this.stopping = true;
    this.killed = force;
    // Closing first stops the worker taking jobs (and track() refuses new first attempts); the
    // attempts in flight get their grace, then are cut.
    const closed = this.worker?.close(force);
    await this.inFlightEnded(graceUntil - Date.now());
    for (const controller of this.inFlight) controller.abort();
    await closed;
    this.worker = null;
  }

  /** Resolves when no attempt is in flight, or after `ms`. */
  private async inFlightEnded(ms: number): Promise<void> {
    if (ms <= 0 || this.inFlight.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      this.onIdle = resolve;
      timer = setTimeout(resolve, ms);
    });
    clearTimeout(timer);
    this.onIdle = null;
  }

  async close(): Promise<void> {
    await this.stop(false, Date.now() + this.opts.stopGraceMs);
    await this.queueEvents?.close();
    await this.queue.close();
  }
}

/** The log line of a delivered job's successful attempt (its return value), or null. */
function successLine(job: Job<DeliveryJob>): string | null {
  const success = job.returnvalue as AttemptResult | null;
  return success?.status ? logLine(success.at, success.attempt, `HTTP ${success.status} in ${success.ms} ms`) : null;
}
