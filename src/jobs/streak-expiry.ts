import type { Redis } from "ioredis";
import { LaurelError } from "../domain/errors.js";
import { duplicateClient } from "../store/redis-client.js";
import type { TenantStore } from "../store/tenant-store.js";
import { streakAdmin, type StreakAdminResult } from "../store/user-store.js";
import { JOB_OPTIONS, jobsPrefix, removeStaleScheduler, TenantJobQueue, TenantJobsSet, type TenantJobs, type TenantJobsOptions } from "./tenant-job-queue.js";

/**
 * Streak expiry: a streak is settled when its deadline passes ({t:s}:sd, the instant it is lost),
 * not only at the user's next event. A user who stops coming then leaves the shard's active set
 * ({t:s}:sa) and the streak boards within a tick. Without it their lost streak stayed there until
 * they came back: every rank read and active ranking stepped over all of them, and the rank gave
 * up (null) once a shard held more than 1 000 (lua/streakRanks-2.lua). An app whose users churn
 * reaches that in weeks.
 *
 * Settling is what an event would do first (lua/streakAdmin-9.lua "settle": a freeze consumed, or
 * the streak lost), by the service clock in the user's stored zone; the `sl:`/`fc:` parts of the
 * records it writes are where the webhook consumer finds streak.lost and streak.freeze_consumed.
 * Every tenant with a streak rule gets one BullMQ job scheduler here (queue
 * `laurel-streaks-<tenant>`), ticking every `tickEveryMs` of
 * wall time; with the system clock each sweep also queues a delayed one at the next deadline when
 * it comes before the next tick (deadlines gather at each zone's midnight: many users of a shard
 * may lose theirs at one instant, and the rank is unknown while more than 1 000 of them wait).
 * With the manual clock, moving the clock sweeps at once (runAll).
 */
export const STREAK_QUEUE = "laurel-streaks";
const SCHEDULER = "sweep";
const BATCH = 200;
/**
 * Settlements in flight at once. Redis runs the calls pipelined on one connection back to back,
 * and a settlement is a script about an event script's size (50-120 µs on this box), so 200 at
 * once held every other client, events included, for 10-25 ms at a popular zone's midnight;
 * 16 hold it for 1-2 ms. (Calculated from the scripts' cost, not measured.)
 */
const IN_FLIGHT = 16;

/**
 * One user's settlement; null when the user's zone kept changing under it (ZONE_CHANGING: the
 * identifies of a user on the move): nothing was written, and the user, still due, is skipped
 * past and settled by the next sweep. Thrown on, it failed the whole sweep, for every user after.
 */
async function settleOrSkip(store: TenantStore, userId: string, now: number): Promise<StreakAdminResult | null> {
  try {
    return await streakAdmin(store, userId, "settle", now, () => 0);
  } catch (err) {
    if (err instanceof LaurelError && err.code === "ZONE_CHANGING") return null;
    throw err;
  }
}

/**
 * Settles every user of the tenant whose streak deadline has passed; returns how many changed.
 * Exported for its test, with `batch` (users read at a time) to make pages of a few users.
 */
export async function sweepExpiredStreaks(store: TenantStore, now: number, batch = BATCH): Promise<number> {
  let changed = 0;
  for (let shard = 0; shard < store.tenant.shards; shard++) changed += await sweepShard(store, shard, now, batch);
  return changed;
}

/**
 * One shard's due users, a page at a time. A settlement takes the user out of the due range
 * (lost, its deadline placed on the stored zone's calendar, or, for a user without state, the
 * index entries the lost state left removed); one it leaves there (a zone on the move, a deadline
 * moved but still past) is stepped over for the rest of the sweep. Such a user may have moved
 * within the range (its deadline re-placed), so each page is read from the range's start, past
 * the users left: an offset counting them skipped an unseen user whenever one of them moved
 * behind it. They are few (the exceptions), and each page reads them again. A user without state
 * was one of them until the settlement removed its entries: orphans piled up after a data loss
 * were read again by every page of every sweep.
 */
async function sweepShard(store: TenantStore, shard: number, now: number, batch: number): Promise<number> {
  let changed = 0;
  // Every user settled in this sweep, and how many of them it left in the range.
  const tried = new Set<string>();
  let left = 0;
  for (;;) {
    const limit = left + batch;
    const page = await store.redis.zrangebyscore(store.keys.streakDeadline(shard), "-inf", now, "LIMIT", 0, limit);
    const due = page.filter((userId) => !tried.has(userId));
    for (let i = 0; i < due.length; i += IN_FLIGHT) {
      const users = due.slice(i, i + IN_FLIGHT);
      const results = await Promise.all(users.map((userId) => settleOrSkip(store, userId, now)));
      results.forEach((r, k) => {
        tried.add(users[k]!);
        if (r !== null && r.status === "settled" && (r.consumed > 0 || r.lost > 0)) changed++;
        if (leftDue(r)) left++;
      });
    }
    // A page short of its limit held the whole range; a full one holds at least `batch` users not
    // seen before (at most `left` of it were left, and the others tried are out of the range),
    // so every page moves on. A page of none (a user tried but still there, against the script's
    // word) ends the sweep rather than read it forever: the next sweep goes on.
    if (page.length < limit || due.length === 0) return changed;
  }
}

/**
 * Whether a settlement left its user in the due range: a zone on the move (null), or a deadline
 * still past. A user without state ("missing") is out of it: lua/streakAdmin-9.lua removed the
 * entries its lost state left.
 */
function leftDue(r: StreakAdminResult | null): boolean {
  if (r === null) return true;
  if (r.status === "missing") return false;
  return r.status !== "settled" || r.stillDue;
}

/** The first streak deadline of the tenant after `now` (ms), or null when none is known. */
async function nextStreakDeadline(store: TenantStore, now: number): Promise<number | null> {
  const shards = Array.from({ length: store.tenant.shards }, (_, shard) => shard);
  // Strictly after now: a user the sweep left in place (its zone moved the deadline) is not next.
  const firsts = await Promise.all(shards.map((shard) => store.redis.zrangebyscore(store.keys.streakDeadline(shard), `(${now}`, "+inf", "WITHSCORES", "LIMIT", 0, 1)));
  const deadlines = firsts.filter((first) => first.length === 2).map((first) => Number(first[1]));
  return deadlines.length > 0 ? Math.min(...deadlines) : null;
}

/** A tenant is swept when it has a streak rule. */
function swept(store: TenantStore): boolean {
  return store.tenant.streak !== null;
}

/** One tenant's queue (tenant-job-queue.ts); its scheduler makes one job per tick. */
class TenantStreakQueue implements TenantJobs {
  private readonly jobs: TenantJobQueue<Record<string, never>>;

  constructor(private readonly store: TenantStore, private readonly opts: TenantJobsOptions, prefix: string) {
    this.jobs = new TenantJobQueue(queueName(store.tenant.id), () => this.sweep(), { connection: opts.connection, prefix, logger: opts.logger, failure: "streak expiry sweep failed" });
  }

  private get tickEveryMs(): number {
    return this.opts.tickEveryMs ?? 60_000;
  }

  async start(): Promise<void> {
    await this.jobs.ready();
    await this.jobs.queue.upsertJobScheduler(SCHEDULER, { every: this.tickEveryMs }, { name: SCHEDULER, opts: JOB_OPTIONS });
  }

  private async sweep(): Promise<number> {
    const now = this.opts.clock.now();
    const changed = await sweepExpiredStreaks(this.store, now);
    if (!this.opts.clock.manual) {
      const next = await nextStreakDeadline(this.store, now);
      // Not deduplicated: a wake that ran a little early must be able to ask for the same instant
      // again, and an extra sweep finds nothing to do.
      if (next !== null && next - now < this.tickEveryMs) await this.jobs.queue.add("wake", {}, { ...JOB_OPTIONS, delay: Math.max(0, next - this.opts.clock.now()) });
    }
    return changed;
  }

  /** One sweep now, through the queue and a worker (the manual clock). */
  async runNow(): Promise<void> {
    await this.jobs.run(SCHEDULER, {});
  }

  async close(): Promise<void> {
    await this.jobs.close();
  }
}

const queueName = (tenantId: string): string => `${STREAK_QUEUE}-${tenantId}`;

export class StreakExpiry extends TenantJobsSet {
  private constructor(parts: TenantStreakQueue[], private readonly own: Redis | null) {
    super(parts);
  }

  /**
   * Starts a worker and a scheduler per tenant with a streak rule, and removes the scheduler of a
   * tenant whose rule was removed.
   */
  static async start(opts: TenantJobsOptions): Promise<StreakExpiry> {
    const prefix = jobsPrefix(opts);
    const queues: TenantStreakQueue[] = [];
    // A connection of its own, as the webhook consumer's: a sweep's calls do not queue ahead of
    // the event calls on the service's connection.
    const own = opts.tenants.all.some(({ store }) => swept(store)) ? duplicateClient(opts.redis) : null;
    for (const { store } of opts.tenants.all) {
      if (own !== null && swept(store)) {
        queues.push(new TenantStreakQueue(store.onConnection(own), opts, prefix));
      } else {
        await removeStaleScheduler(opts.redis, opts.connection, prefix, queueName(store.tenant.id), SCHEDULER);
      }
    }
    await Promise.all(queues.map((q) => q.start()));
    return new StreakExpiry(queues, own);
  }

  override async close(): Promise<void> {
    await super.close();
    await this.own?.quit().catch(() => undefined);
  }

}
