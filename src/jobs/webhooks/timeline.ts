import { userBoostJson, type UserBoostRecord } from "../../api/boosts.js";
import { Queue, QueueEvents, Worker, type ConnectionOptions } from "bullmq";
import type { Logger } from "pino";
import type { Clock } from "../../clock.js";
import { iso } from "../../api/wire.js";
import type { BoostDetail } from "../../domain/stream-record.js";
import { boundaryKey, configBoundaries, editedBoundaries, movedEventSubject, type ConfigBoundary } from "./boundaries.js";
import type { Coalescer } from "./coalesce.js";
import type { DeliveryJob, DeliveryQueue } from "./deliveries.js";
import { boundaryEventId } from "./kinds.js";
import { runAndWait } from "../tenant-job-queue.js";
import { JOBS_PREFIX, timelineQueueName, WebhookKeys } from "./keys.js";
import { globalBoostPayloadJson, runPayloadJson, type PayloadContext } from "./payloads.js";
import { logQueueErrors } from "../../log-throttle.js";

/**
 * What happens at a moment of the service clock rather than at an event (issue 6, "time-driven
 * kinds"), for one tenant with webhook endpoints. One BullMQ job scheduler per tenant ticks
 * every `tickEveryMs` of wall time (queue `laurel-hooks-time-<tenant>`); each tick, by the
 * service clock:
 *
 *  1. Calendar boundaries in (cursor, now]: global boosts and leaderboard runs starting or
 *     finishing (boundaries.ts), then user boosts (the {t}:wh:due zset the webhook consumer
 *     fills from the "ub" records lua/userBoost-3.lua writes with each admin boost change). Each boundary's event id derives from the boost or the run, so it fires once
 *     however many ticks or processes see it.
 *     Boundaries an edit of the tenant file moved are announced once (boundaries.ts
 *     editedBoundaries): one moved to before the cursor when it was not announced yet, at the
 *     first tick that reads the edit; one announced and then moved later again at its new
 *     instant, under an id that derives from that instant too.
 *  2. Coalesced events whose window has closed (coalesce.ts).
 *
 * Streak expiry (streak.lost, streak.freeze_consumed) is not here: ../streak-expiry.ts settles
 * the users whose deadline passed, for every tenant, at the deadline, and the consumer derives
 * those events from the `sl:`/`fc:` parts of the records it writes, as for any change.
 *
 * With the system clock, a tick also queues a delayed job at the next known instant (a boundary,
 * a window's close) when it falls before the next regular tick, so events
 * fire at their instant rather than up to a tick later. With the manual clock, moving the clock
 * runs the tick at once (Webhooks.runDue) and POST /admin/v1/clock answers after it.
 */
const BOUNDARY_BATCH = 200;

interface BoostBoundary {
  /** user id, boost id, "started" | "finished", instant */
  u: string;
  b: string;
  k: "started" | "finished";
  t: number;
}


export interface TimelineOptions {
  connection: ConnectionOptions;
  clock: Clock;
  logger: Logger;
  /** @default 60000 */
  tickEveryMs: number;
}

export class Timeline {
  readonly queue: Queue;
  /** Created on first use (runNow, the manual clock): nothing reads the queue's events otherwise. */
  private events: QueueEvents | null = null;
  private worker: Worker | null = null;
  private readonly keys: WebhookKeys;

  constructor(
    private readonly ctx: PayloadContext,
    private readonly deliveries: DeliveryQueue,
    private readonly coalescer: Coalescer,
    private readonly opts: TimelineOptions,
  ) {
    const name = timelineQueueName(ctx.tenant.id);
    this.queue = new Queue(name, { connection: opts.connection, prefix: JOBS_PREFIX });
    logQueueErrors(this.queue, opts.logger, name);
    this.keys = new WebhookKeys(ctx.tenant.id);
  }

  async start(): Promise<void> {
    // The cursor starts at the first start: boundaries before it are history, not events.
    await this.ctx.store.redis.zadd(this.keys.cursor(), "NX", this.opts.clock.now(), "c");
    this.worker = new Worker(this.queue.name, async () => this.tick(this.opts.clock.now()), { connection: this.opts.connection, prefix: JOBS_PREFIX, concurrency: 1 });
    this.worker.on("failed", (_job, err) => this.opts.logger.error({ err, tenant: this.ctx.tenant.id }, "webhook timeline tick failed"));
    logQueueErrors(this.worker, this.opts.logger, this.queue.name);
    await this.worker.waitUntilReady();
    if (this.opts.clock.manual) await this.queueEvents();
    await this.queue.upsertJobScheduler("tick", { every: this.opts.tickEveryMs }, { name: "tick", opts: { removeOnComplete: true, removeOnFail: 100 } });
  }

  private async queueEvents(): Promise<QueueEvents> {
    if (!this.events) {
      this.events = new QueueEvents(this.queue.name, { connection: this.opts.connection, prefix: JOBS_PREFIX });
      logQueueErrors(this.events, this.opts.logger, this.queue.name);
      await this.events.waitUntilReady();
    }
    return this.events;
  }

  /** Runs one tick through the queue and a worker, and waits for it (the manual clock). */
  async runNow(): Promise<void> {
    await runAndWait(this.queue, await this.queueEvents(), "tick", {});
  }

  async tick(now: number): Promise<{ boundaries: number; coalesced: number }> {
    const boundaries = (await this.configBoundaries(now)) + (await this.userBoostBoundaries(now));
    const coalesced = await this.coalescer.flush(now, (jobs) => this.deliveries.enqueue(jobs));
    if (!this.opts.clock.manual) await this.scheduleWake(now);
    return { boundaries, coalesced };
  }

  private async emit(type: string, subject: string, at: number, fields: Record<string, unknown>, userId: string | null, idSubject = subject): Promise<void> {
    const endpoints = this.ctx.tenant.webhooks.filter((w) => w.events.has(type));
    if (endpoints.length === 0) return;
    const eventId = boundaryEventId(this.ctx.tenant.ns, this.ctx.tenant.id, type, idSubject);
    const body = JSON.stringify({ id: eventId, type, timestamp: iso(at), ...fields });
    const jobs: DeliveryJob[] = endpoints.map((w) => ({ endpoint: w.key, eventId, type, userId, body }));
    await this.deliveries.enqueue(jobs);
  }

  private async emitConfig(b: ConfigBoundary, idSubject: string): Promise<void> {
    if ("boost" in b) {
      const status = b.type === "points.boost_started" ? "active" : "finished";
      await this.emit(b.type, b.subject, b.at, { boost: globalBoostPayloadJson(b.system, b.boost, status) }, null, idSubject);
      return;
    }
    // A run's payload reads the board (the finish's top 10): only when someone subscribes.
    if (!this.ctx.tenant.webhooks.some((w) => w.events.has(b.type))) return;
    const status = b.type === "leaderboard.started" ? "active" : "finished";
    await this.emit(b.type, b.subject, b.at, { leaderboard: await runPayloadJson(this.ctx, b.board, b.run, status) }, null, idSubject);
  }

  /**
   * The calendar boundaries due: those in (cursor, now], and those an edit of the tenant file
   * moved to before the cursor without their being announced (boundaries.ts editedBoundaries,
   * against the snapshot in {t}:wh:bounds). A boundary announced and then moved has its
   * announced instant recorded ("s:<type>|<subject>"): it is announced again only at a later
   * instant, under an id derived from that instant too; every other boundary keeps the id of
   * its boost or run alone.
   */
  private async configBoundaries(now: number): Promise<number> {
    const redis = this.ctx.store.redis;
    const key = this.keys.bounds();
    const cursor = Number((await redis.zscore(this.keys.cursor(), "c")) ?? now);
    const stored = await redis.hgetall(key);
    const previous = stored.v === undefined ? null : new Map(Object.entries(stored));
    const edited = editedBoundaries(this.ctx.tenant, previous, cursor);
    if (edited.moved.size > 0) await redis.hset(key, ...[...edited.moved].flatMap(([k, at]) => [`s:${k}`, String(at)]));
    const due = [...edited.late, ...configBoundaries(this.ctx.tenant, cursor, now)];
    let fired = 0;
    if (due.length > 0) {
      const sent = await redis.hmget(key, ...due.map((b) => `s:${boundaryKey(b.type, b.subject)}`));
      for (let i = 0; i < due.length; i++) {
        const b = due[i]!;
        const announced = sent[i] === null || sent[i] === undefined ? null : Number(sent[i]);
        if (announced === null) await this.emitConfig(b, b.subject);
        else if (b.at > announced) {
          await this.emitConfig(b, movedEventSubject(b.subject, b.at));
          await redis.hset(key, `s:${boundaryKey(b.type, b.subject)}`, String(b.at));
        } else continue;
        fired++;
      }
    }
    const changed = previous === null || [...edited.snapshot].some(([f, v]) => stored[f] !== v);
    if (changed) await redis.hset(key, "v", "1", ...[...edited.snapshot].flat());
    // Only forward (GT): a clock set back, or a slower process, never moves it back.
    await redis.zadd(this.keys.cursor(), "GT", now, "c");
    return fired;
  }

  /**
   * Records a user boost's boundaries from its "ub" stream record (the webhook consumer; the
   * record is written by lua/userBoost-3.lua in the same call as the change). An added boost
   * gets its start and its end (if any); an ended one its new end, unless the window is empty
   * (a cancelled scheduled boost fires nothing: its start member, from the add, then matches
   * nothing). Each member is the same JSON for the same boundary, so a redelivered record adds
   * nothing new, and a boundary's event id derives from the boost and the type.
   */
  async userBoostChanged(userId: string, boost: BoostDetail): Promise<void> {
    const members: (string | number)[] = [];
    const boundary = (k: BoostBoundary["k"], t: number) => members.push(t, JSON.stringify({ u: userId, b: boost.boostId, k, t } satisfies BoostBoundary));
    if (boost.op === "add") boundary("started", boost.start);
    if (boost.end !== null && boost.end > boost.start) boundary("finished", boost.end);
    if (members.length === 0) return;
    await this.ctx.store.redis.zadd(this.keys.boostDue(), ...members);
    const next = Math.min(...members.filter((m): m is number => typeof m === "number"));
    const now = this.opts.clock.now();
    if (next <= now) {
      // Due already (a boost that starts at once, or one ended now): fire without waiting for a tick.
      if (this.opts.clock.manual) await this.runNow();
      else await this.wake(now);
    } else if (!this.opts.clock.manual) await this.scheduleWake(now);
  }

  /**
   * User boost boundaries that are due. Each is checked against the boost's stored record (the
   * {t:s}:ub index) at the boundary: a boost ended early or cancelled keeps its stale boundary
   * members, which then match nothing; a cancelled scheduled boost (empty window) fires neither.
   */
  private async userBoostBoundaries(now: number): Promise<number> {
    const { store, tenant } = this.ctx;
    const redis = store.redis;
    let fired = 0;
    for (;;) {
      const due = await redis.zrangebyscore(this.keys.boostDue(), "-inf", now, "LIMIT", 0, BOUNDARY_BATCH);
      if (due.length === 0) return fired;
      for (const member of due) {
        const b = JSON.parse(member) as BoostBoundary;
        const raw = await redis.hget(store.keys.userBoosts(store.shard(b.u)), b.b);
        const record = raw ? (JSON.parse(raw) as UserBoostRecord) : null;
        const system = record ? tenant.systemByKey.get(record.pointsSystemKey) : undefined;
        const live = record && system && (record.end === null || record.end > record.start);
        const matches = live && (b.k === "started" ? record.start === b.t : record.end === b.t);
        if (matches) {
          const type = b.k === "started" ? "points.boost_started" : "points.boost_finished";
          // At its start the boost is active, at its end finished: its status at the boundary.
          const boost = userBoostJson(system, record, b.t);
          await this.emit(type, record.id, b.t, { boost }, record.userId);
          fired++;
        }
      }
      await redis.zrem(this.keys.boostDue(), ...due);
      if (due.length < BOUNDARY_BATCH) return fired;
    }
  }

  /** The next instant something is due, if any is known. */
  private async nextDue(now: number): Promise<number | null> {
    const candidates: number[] = [];
    const next = configBoundaries(this.ctx.tenant, now, now + this.opts.tickEveryMs)[0];
    if (next) candidates.push(next.at);
    const firstBoost = await this.ctx.store.redis.zrange(this.keys.boostDue(), 0, 0, "WITHSCORES");
    if (firstBoost.length === 2) candidates.push(Number(firstBoost[1]));
    const close = await this.coalescer.nextClose();
    if (close !== null) candidates.push(close);
    const after = candidates.filter((t) => t > now);
    return after.length > 0 ? Math.min(...after) : null;
  }

  /** A delayed tick at the next due instant, when it comes before the next regular tick. */
  private async scheduleWake(now: number): Promise<void> {
    const at = await this.nextDue(now);
    if (at !== null && at - now < this.opts.tickEveryMs) await this.wake(at);
  }

  private async wake(at: number): Promise<void> {
    const delay = Math.max(0, at - this.opts.clock.now());
    // Not deduplicated by instant: a wake-up that ran a little early (Node's and Redis's clocks)
    // must be able to ask for the same instant again. An extra tick is harmless (every effect of
    // a tick is idempotent).
    await this.queue.add("wake", {}, { delay, removeOnComplete: true, removeOnFail: 100 });
  }

  async close(): Promise<void> {
    await this.worker?.close();
    await this.events?.close();
    await this.queue.close();
  }
}
