import { Queue, type ConnectionOptions } from "bullmq";
import type { Redis } from "ioredis";
import type { Logger } from "pino";
import type { Clock } from "../../clock.js";
import { TenantKeys } from "../../store/keys.js";
import { duplicateClient } from "../../store/redis-client.js";
import { Coalescer } from "./coalesce.js";
import { WebhookConsumer, type TenantHooks } from "./consumer.js";
import { DeliveryQueue, deliveryOptions, type DeliveryOptions, type DeliveryOptionsInput } from "./deliveries.js";
import { JOBS_PREFIX, timelineQueueName, WEBHOOK_GROUP, WebhookKeys } from "./keys.js";
import type { PayloadContext } from "./payloads.js";
import { Timeline } from "./timeline.js";
import { HOOK_CUTOVER_FIELD, moveShardStreamGroup } from "./upgrade.js";

/**
 * Outbound events (issue 6; README: Webhooks): the consumer that turns stream records into
 * deliveries (consumer.ts), the per-tenant delivery queues (deliveries.ts) and the per-tenant
 * timelines for what is due by the clock (timeline.ts). Tenants without endpoints get nothing,
 * and their `webhooks` consumer group and hook streams are removed.
 */
export interface WebhookOptions {
  delivery: DeliveryOptions;
  /** Wall-clock period of each tenant's timeline scheduler. @default 60000 */
  tickEveryMs: number;
  /** Consumer name, unique per process. @default "<hostname>-<pid>" */
  consumer?: string;
  /** Pending records of a consumer idle this long are taken over. @default 30000 */
  claimIdleMs?: number;
  /**
   * Whether this process POSTs deliveries (runs the queues' BullMQ workers). Off
   * (LAUREL_DELIVERIES=off) keeps the sending out of a service process: it still queues, and
   * answers the admin API; `node dist/worker.js` processes send. @default true
   */
  deliveryWorkers?: boolean;
}

export interface WebhookStartOptions {
  redis: Redis;
  connection: ConnectionOptions;
  contexts: readonly PayloadContext[];
  clock: Clock;
  logger: Logger;
  options?: Partial<Omit<WebhookOptions, "delivery">> & { delivery?: DeliveryOptionsInput };
}


export class Webhooks {
  private constructor(
    private readonly tenants: ReadonlyMap<string, TenantHooks>,
    readonly consumer: WebhookConsumer | null,
    private readonly logger: Logger,
    /** The connection the consumer, its payload reads and its first attempts' records use (null without endpoints). */
    private readonly own: Redis | null,
    /** The delivery queues' client (null without endpoints). */
    private readonly queueClient: Redis | null,
    /** DeliveryOptions.stopGraceMs: how long close() lets the attempts in flight finish. */
    private readonly deliveryGraceMs: number,
  ) {}

  static async start(opts: WebhookStartOptions): Promise<Webhooks> {
    const delivery = deliveryOptions(opts.options?.delivery);
    const tickEveryMs = opts.options?.tickEveryMs ?? 60_000;
    const tenants = new Map<string, TenantHooks>();
    // A connection of its own: a consumer turn sends thousands of reads at once (payloads, first
    // attempts' records), and on the caller's connection (the service's event path) every event
    // call would wait behind them. Redis serves its clients in turn.
    const own = opts.contexts.some((ctx) => ctx.tenant.webhooks.length > 0) ? duplicateClient(opts.redis) : null;
    // The delivery queues' calls on a client of the event path's kind, one for every tenant:
    // BullMQ's own client, made from options, waited minutes for a connection (its offline queue
    // through twenty reconnect attempts) or without end (a command on the wire at a drop), and
    // an admin replay with it. Not `own`: the consumer's turns would hold the admin API's calls.
    const queueClient = own === null ? null : duplicateClient(opts.redis);
    for (const shared of opts.contexts) {
      if (shared.tenant.webhooks.length === 0 || own === null || queueClient === null) {
        await forget(opts.redis, opts.connection, shared);
        continue;
      }
      const ctx: PayloadContext = { ...shared, store: shared.store.onConnection(own) };
      const deliveries = new DeliveryQueue(ctx.tenant, opts.connection, delivery, opts.logger, own, queueClient);
      const coalescer = new Coalescer(ctx);
      const timeline = new Timeline(ctx, deliveries, coalescer, { connection: opts.connection, clock: opts.clock, logger: opts.logger, tickEveryMs });
      tenants.set(ctx.tenant.id, { ctx, deliveries, coalescer, timeline });
    }
    if (own === null) return new Webhooks(tenants, null, opts.logger, null, null, delivery.stopGraceMs);
    const consumer = new WebhookConsumer(own, tenants, opts.logger, { consumer: opts.options?.consumer, claimIdleMs: opts.options?.claimIdleMs });
    // The group exists from now on, before this process writes: every later change reaches the endpoints.
    await consumer.ensureGroups();
    // From the version whose group read the shard streams: what it had not finished, into the hook streams.
    for (const t of tenants.values()) {
      const moved = await moveShardStreamGroup(opts.redis, t.ctx.tenant);
      if (moved > 0) opts.logger.info({ tenant: t.ctx.tenant.id, records: moved }, "webhooks: moved the records the shard streams' webhooks group had not finished to the hook streams");
    }
    for (const t of tenants.values()) {
      if (opts.options?.deliveryWorkers !== false) await t.deliveries.startWorker();
      await t.timeline.start();
    }
    return new Webhooks(tenants, consumer, opts.logger, own, queueClient, delivery.stopGraceMs);
  }

  /** Another consumer of the same group on the same queues (tests: a second worker; tools). */
  createConsumer(redis: Redis, name: string): WebhookConsumer {
    return new WebhookConsumer(redis, this.tenants, this.logger, { consumer: name });
  }

  /** Starts the consumer's blocking loop (the service unless LAUREL_WORKER=off, and node dist/worker.js). */
  startConsumer(): void {
    this.consumer?.start();
  }

  /** Processes every record now in the streams into deliveries (tests, tools, the manual clock). */
  async drain(): Promise<number> {
    return (await this.consumer?.drain()) ?? 0;
  }

  /**
   * Fires what the service clock made due (the manual clock's hook, after the time triggers):
   * records written so far, then each tenant's tick (streak expiry, boundaries, closed
   * coalescing windows), then the records the tick wrote.
   */
  async runDue(): Promise<void> {
    if (!this.consumer) return;
    await this.drain();
    for (const t of this.tenants.values()) await t.timeline.runNow();
    await this.drain();
  }

  deliveries(tenantId: string): DeliveryQueue | undefined {
    return this.tenants.get(tenantId)?.deliveries;
  }

  timeline(tenantId: string): Timeline | undefined {
    return this.tenants.get(tenantId)?.timeline;
  }

  /** Resolves when no delivery of the tenant (of every tenant) is waiting, in flight or waiting for a retry. */
  async settled(tenantId?: string): Promise<void> {
    for (const [id, t] of this.tenants) if (tenantId === undefined || id === tenantId) await t.deliveries.settled();
  }

  async close(): Promise<void> {
    // The consumer is told to stop first (its loop ends after the current turn), then sending
    // stops: no attempt begins, those in flight get stopGraceMs to finish (a receiver that has
    // answered is recorded, not sent again by the next process), then are cut, the consumer's
    // first attempts among them, whose records it leaves unacknowledged for the consumer that
    // takes them over (DeliveryQueue.dispatch). So a stop waits at most the grace for a slow
    // receiver, and a cut attempt is neither counted nor lost. One grace for every tenant.
    const consumerStopped = this.consumer?.stop();
    const graceUntil = Date.now() + this.deliveryGraceMs;
    await Promise.all([...this.tenants.values()].map((t) => t.deliveries.stopSending(graceUntil)));
    await consumerStopped;
    for (const t of this.tenants.values()) {
      await t.timeline.close();
      await t.deliveries.close();
    }
    await this.own?.quit().catch(() => undefined);
    await this.queueClient?.quit().catch(() => undefined);
  }
}

/**
 * A tenant without endpoints: its hook streams and their webhooks group are removed (nothing
 * writes them any more, and a later endpoint starts from its own records), the webhooks group of
 * an earlier version on the shard streams too (so they trim as if it never existed), and, if it
 * had endpoints before, its timeline's scheduler and state. Deliveries already queued stay in
 * their queue for the admin API of a later config.
 */
async function forget(redis: Redis, connection: ConnectionOptions, ctx: PayloadContext): Promise<void> {
  const keys = new TenantKeys(ctx.tenant.id);
  for (let shard = 0; shard < ctx.tenant.shards; shard++) {
    await redis.xgroup("DESTROY", keys.stream(shard), WEBHOOK_GROUP).catch(() => undefined);
    await redis.del(keys.hookStream(shard));
    await redis.hdel(keys.watermarks(shard), HOOK_CUTOVER_FIELD);
  }
  const hooks = new WebhookKeys(ctx.tenant.id);
  if ((await redis.exists(hooks.cursor())) === 0) return;
  const queue = new Queue(timelineQueueName(ctx.tenant.id), { connection, prefix: JOBS_PREFIX });
  await queue.removeJobScheduler("tick");
  await queue.close();
  await redis.del(hooks.cursor(), hooks.bounds(), hooks.boostDue(), hooks.coalesced(), hooks.coalesceDue());
}
