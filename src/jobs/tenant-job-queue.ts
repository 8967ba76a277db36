import { Queue, QueueEvents, Worker, type ConnectionOptions, type Job } from "bullmq";
import type { Redis } from "ioredis";
import type { Logger } from "pino";
import type { Clock } from "../clock.js";
import { logQueueErrors } from "../log-throttle.js";
import { JOBS_PREFIX } from "./webhooks/keys.js";
import type { Tenants } from "../tenants.js";

/** Finished jobs are removed; the last 100 failed ones are kept for inspection. */
export const JOB_OPTIONS = { removeOnComplete: true, removeOnFail: 100 };

/**
 * A job someone waits for (the manual clock's moves): kept a minute once completed. BullMQ's
 * waitUntilFinished first asks whether the job is finished, and a job already completed and
 * removed by then (another process's worker was quicker) fails it with "Missing key for job";
 * seen as a 500 of POST /admin/v1/clock with several processes.
 */
export const WAITED_JOB_OPTIONS = { removeOnComplete: { age: 60 }, removeOnFail: 100 };

/** Queues one job now and waits until a worker has finished it, kept long enough to be waited for. */
export async function runAndWait(queue: Queue, events: QueueEvents, name: string, data: unknown): Promise<void> {
  const job = await queue.add(name, data, WAITED_JOB_OPTIONS);
  await job.waitUntilFinished(events);
}

export interface TenantJobQueueOptions {
  connection: ConnectionOptions;
  /** BullMQ key prefix; braces keep each queue in one Cluster slot. */
  prefix: string;
  logger: Logger;
  /** Logged with the error when a job fails. */
  failure: string;
}

/**
 * One BullMQ queue of a tenant's background work (time triggers, streak expiry), with the worker
 * that runs it and the queue events that `run` waits on. Every process serving the tenant works
 * the queue, and a process never takes a job of a tenant it does not serve (several configs may
 * share one Redis). Jobs run one at a time per process.
 */
export class TenantJobQueue<T> {
  readonly queue: Queue<T>;
  private readonly worker: Worker<T>;
  private readonly events: QueueEvents;

  constructor(name: string, process: (job: Job<T>) => Promise<unknown>, opts: TenantJobQueueOptions) {
    const { connection, prefix, logger } = opts;
    this.queue = new Queue<T>(name, { connection, prefix });
    this.events = new QueueEvents(name, { connection, prefix });
    this.worker = new Worker<T>(name, process, { connection, prefix, concurrency: 1 });
    this.worker.on("failed", (job, err) => logger.error({ err, queue: name, job: job?.data }, opts.failure));
    for (const part of [this.queue, this.events, this.worker]) logQueueErrors(part, logger, name);
  }

  async ready(): Promise<void> {
    await this.worker.waitUntilReady();
    await this.events.waitUntilReady();
  }

  /** Queues one job now and waits until a worker has finished it (the manual clock's moves). */
  async run(name: string, data: T): Promise<void> {
    // BullMQ's generic name types are stricter than the queue's own job names need here.
    await runAndWait(this.queue as Queue, this.events, name, data);
  }

  async close(): Promise<void> {
    await this.worker.close();
    await this.events.close();
    await this.queue.close();
  }
}

/** The BullMQ key prefix of a kind of background work (the options' `prefix`, or the one every queue of Laurel shares). */
export function jobsPrefix(opts: TenantJobsOptions): string {
  return opts.prefix ?? JOBS_PREFIX;
}

/** What a kind of background work needs to start. */
export interface TenantJobsOptions {
  /** The service's client: the start's check of a scheduler an earlier config left (removeStaleScheduler). */
  redis: Redis;
  connection: ConnectionOptions;
  tenants: Tenants;
  clock: Clock;
  logger: Logger;
  /** Wall-clock period of each tenant's scheduler. @default 60000 */
  tickEveryMs?: number;
  /** BullMQ key prefix; braces keep each queue in one Cluster slot. @default "{laurel-jobs}" */
  prefix?: string;
}

/**
 * Removes the job scheduler `scheduler` of queue `name` if one exists: a tenant whose config no
 * longer wants the work (its scheduler would otherwise leave a job nobody takes). The check is one
 * EXISTS, so a start does not open a queue per tenant.
 */
export async function removeStaleScheduler(redis: Redis, connection: ConnectionOptions, prefix: string, name: string, scheduler: string): Promise<void> {
  if ((await redis.exists(`${prefix}:${name}:repeat`)) === 0) return;
  const queue = new Queue(name, { connection, prefix });
  await queue.removeJobScheduler(scheduler);
  await queue.close();
}

/** One tenant's part of a kind of background work: run it now (the manual clock), or stop. */
export interface TenantJobs {
  runNow(): Promise<void>;
  close(): Promise<void>;
}

/** Every tenant's part of one kind of background work (time triggers, streak expiry). */
export class TenantJobsSet {
  protected constructor(private readonly parts: readonly TenantJobs[]) {}

  /** Runs every tenant's part now, through the queues and the workers, and waits for all of them. */
  async runAll(): Promise<void> {
    await Promise.all(this.parts.map((p) => p.runNow()));
  }

  async close(): Promise<void> {
    await Promise.all(this.parts.map((p) => p.close()));
  }
}
