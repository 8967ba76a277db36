import { QueueEvents, type Queue } from "bullmq";
import { Redis } from "ioredis";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { JOB_OPTIONS, runAndWait, TenantJobQueue, WAITED_JOB_OPTIONS } from "../../src/jobs/tenant-job-queue.js";
import { JOBS_PREFIX } from "../../src/jobs/webhooks/keys.js";
import { queueConnection } from "../../src/store/redis-client.js";
import { uniqueTenantId } from "../helpers/app.js";

/**
 * The manual clock waits for the jobs a move makes due (runAndWait: TenantJobQueue.run, Timeline.runNow).
 * BullMQ's waitUntilFinished first asks whether the job is finished; a job already completed and
 * removed by then (another process's worker took it at once) failed the wait with "Missing key
 * for job", a 500 of POST /admin/v1/clock (found by an audit running three processes). Here the
 * wait starts after the job completed, every time: what that race does now and then.
 */
describe("a job waited for", () => {
  let redis: Redis;
  let jobs: TenantJobQueue<Record<string, never>>;
  let events: QueueEvents;
  beforeAll(async () => {
    redis = new Redis(inject("redisUrl"));
    const name = `laurel-test-wait-${uniqueTenantId("q")}`;
    const connection = queueConnection(redis);
    jobs = new TenantJobQueue(name, async () => "done", { connection, prefix: JOBS_PREFIX, logger: pino({ level: "silent" }), failure: "test job failed" });
    await jobs.ready();
    events = new QueueEvents(name, { connection, prefix: JOBS_PREFIX });
    await events.waitUntilReady();
  });
  afterAll(async () => {
    await events.close();
    await jobs.close();
    redis.disconnect();
  });

  async function waitAfterCompletion(options: typeof JOB_OPTIONS | typeof WAITED_JOB_OPTIONS): Promise<void> {
    // Listening before the job exists: its completion cannot pass unseen.
    const completed = new Set<string>();
    let wanted: string | undefined;
    let seen: () => void = () => undefined;
    const done = ({ jobId }: { jobId: string }) => {
      completed.add(jobId);
      if (jobId === wanted) seen();
    };
    events.on("completed", done);
    try {
      const job = await jobs.queue.add("tick", {}, options);
      wanted = job.id;
      if (!completed.has(job.id!)) await new Promise<void>((resolve) => (seen = resolve));
      await job.waitUntilFinished(events);
    } finally {
      events.off("completed", done);
    }
  }

  it("is still there to be waited for once it completed (removed at once, the wait failed)", async () => {
    await expect(waitAfterCompletion(JOB_OPTIONS)).rejects.toThrow(/Missing key for job/);
    await expect(waitAfterCompletion(WAITED_JOB_OPTIONS)).resolves.toBeUndefined();
  });

  it("ran on BullMQ clients that hold none of its scripts as their own properties (redis-client.ts QueueRedis)", async () => {
    // ~100 own script properties put a client in V8's dictionary mode, and ioredis' shared
    // methods went generic for every client of the process, the event path's too.
    const clients = await Promise.all([jobs.queue, events].map((owner) => (owner.getBackend() as unknown as { client: Promise<object> }).client));
    for (const client of clients) {
      const scripts = Object.keys(Object.getPrototypeOf(client)).filter((name) => name.startsWith("addStandardJob:"));
      expect(scripts.length).toBeGreaterThan(0);
      expect(Object.keys(client).filter((name) => name.includes(":"))).toEqual([]);
    }
  });
  it("is what runAndWait adds (TenantJobQueue.run and Timeline.runNow): its completed job stays", async () => {
    const before = (await jobs.queue.getJobCounts("completed")).completed!;
    await runAndWait(jobs.queue as Queue, events, "tick", {});
    expect((await jobs.queue.getJobCounts("completed")).completed).toBe(before + 1);
  });

  it("is what TenantJobQueue.run adds: its completed job stays", async () => {
    const before = (await jobs.queue.getJobCounts("completed")).completed!;
    await jobs.run("tick", {});
    expect((await jobs.queue.getJobCounts("completed")).completed).toBe(before + 1);
  });
});
