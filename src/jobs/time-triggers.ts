import { runScript } from "../store/redis-script.js";
import { forgetRemovedTriggers, scheduleExistingUsers } from "./time-trigger-backfill.js";
import type { TenantStore } from "../store/tenant-store.js";
import { jobsPrefix, TenantJobQueue, TenantJobsSet, type TenantJobs, type TenantJobsOptions } from "./tenant-job-queue.js";

/**
 * Time triggers (trophy-compat §5.5: "every N hours/days"). One BullMQ job scheduler per
 * (tenant, trigger), not one job per user: each tick pays the users who are due, found in the
 * per-shard sorted sets {t:s}:tt:<sys>.<trig> (score = next due instant), in batches of
 * BATCH users per script call (lua/timeTick-4.lua has the catch-up rule).
 *
 * The scheduler ticks every `tickEveryMs` of wall time and pays by the service clock. With the
 * manual clock, moving the clock runs every trigger at once (runAll), and POST /admin/v1/clock
 * answers after they finished, so tests and simulations never wait for wall time.
 */
export const TIME_QUEUE = "laurel-time";
const BATCH = 200;

interface TickJob {
  tenant: string;
  /** 1-based index into the tenant rules' time triggers (R.tt). */
  index: number;
}

/** Pays one trigger on every shard of a tenant; returns the number of users paid. */
export async function runTimeTrigger(store: TenantStore, index: number, now: number): Promise<number> {
  const profileFields = store.tenantRules.profileFields;
  const { rules } = store.tenantRules;
  const trigger = rules.tt[index - 1]!;
  const systemKey = rules.sys[trigger.s - 1]!.key;
  let paid = 0;
  for (let shard = 0; shard < store.tenant.shards; shard++) {
    // The keys lua/timeTick-4.lua can be given (its due users' keys it learns from the due set).
    const keys = [store.keys.stream(shard), store.keys.hookStream(shard), store.keys.timeDue(shard, systemKey, trigger.k), store.keys.pointsZset(shard, systemKey)];
    for (let more = true; more; ) {
      const reply = (await runScript(store.redis, store.tenantScripts.timeTick, keys, [
        store.keys.prefix(shard),
        now,
        index,
        BATCH,
        store.boardsBlob(now),
        profileFields.length,
        ...profileFields,
      ])) as number[];
      paid += reply[0]!;
      more = reply[1] === 1;
    }
  }
  return paid;
}

export type TimeTriggerOptions = TenantJobsOptions;

/** One queue per tenant (tenant-job-queue.ts), one scheduler per trigger. */
class TenantTimeQueue implements TenantJobs {
  private readonly jobs: TenantJobQueue<TickJob>;
  /** The pass that puts users who existed before a trigger on it (time-trigger-backfill.ts), under way or done. */
  private backfill: Promise<void> = Promise.resolve();
  private closing = false;

  constructor(readonly store: TenantStore, private readonly opts: TimeTriggerOptions) {
    this.jobs = new TenantJobQueue<TickJob>(`${TIME_QUEUE}-${store.tenant.id}`, (job) => this.process(job.data), {
      connection: opts.connection,
      prefix: jobsPrefix(opts),
      logger: opts.logger,
      failure: "time trigger tick failed",
    });
  }

  get triggers(): number {
    return this.store.tenantRules.rules.tt.length;
  }

  /** Scheduler ids name the trigger, so renaming a trigger key replaces its scheduler. */
  schedulerId(index: number): string {
    return this.store.tenantRules.rules.tt[index - 1]!.z;
  }

  async start(): Promise<void> {
    await this.jobs.ready();
    const queue = this.jobs.queue;
    const wanted = new Set<string>();
    for (let index = 1; index <= this.triggers; index++) {
      wanted.add(this.schedulerId(index));
      await queue.upsertJobScheduler(this.schedulerId(index), { every: this.opts.tickEveryMs ?? 60_000 }, {
        name: "tick",
        data: { tenant: this.store.tenant.id, index },
      });
    }
    for (const scheduler of await queue.getJobSchedulers()) {
      if (!wanted.has(scheduler.key)) await queue.removeJobScheduler(scheduler.key);
    }
    // In the background: a SCAN of the keyspace, once per trigger; ticks meanwhile pay whoever is on the sets.
    this.backfill = scheduleExistingUsers(this.store, this.opts.clock.now(), () => this.closing).then(
      (added) => {
        if (added > 0) this.opts.logger.info({ tenant: this.store.tenant.id, users: added }, "users who existed before a time trigger put on it");
      },
      (err: unknown) => this.opts.logger.error({ err, tenant: this.store.tenant.id }, "putting existing users on a new time trigger failed; the next start tries again"),
    );
  }

  private async process(job: TickJob): Promise<number> {
    // A job queued before a config change may name a trigger that no longer exists.
    if (job.index > this.triggers) return 0;
    return runTimeTrigger(this.store, job.index, this.opts.clock.now());
  }

  async runNow(): Promise<void> {
    // The manual clock's moves pay users the pass adds: a simulation sees them from the start.
    await this.backfill;
    await Promise.all(Array.from({ length: this.triggers }, (_, i) => this.jobs.run("tick", { tenant: this.store.tenant.id, index: i + 1 })));
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.backfill;
    await this.jobs.close();
  }
}

export class TimeTriggers extends TenantJobsSet {
  /** Starts a worker per tenant with time triggers and makes the schedulers match the config. */
  static async start(opts: TimeTriggerOptions): Promise<TimeTriggers> {
    const queues = opts.tenants.all
      .filter((c) => c.store.tenantRules.rules.tt.length > 0)
      .map((c) => new TenantTimeQueue(c.store, opts));
    // A tenant with no time trigger left forgets which had their pass (the others, in their pass).
    for (const c of opts.tenants.all) if (c.store.tenantRules.rules.tt.length === 0) await forgetRemovedTriggers(c.store);
    await Promise.all(queues.map((q) => q.start()));
    return new TimeTriggers(queues);
  }

}
