import type { Redis } from "ioredis";
import type { Logger } from "pino";
import { boostDetail, decodeStreamRecord } from "../../domain/stream-record.js";
import { StreamGroupConsumer, type Entry, type ShardStream } from "../stream-group.js";
import type { Coalescer, CoalescedChange } from "./coalesce.js";
import type { DeliveryJob, DeliveryQueue } from "./deliveries.js";
import { loadLua } from "../../store/lua-loader.js";
import { runScript } from "../../store/redis-script.js";
import { boardParts, recordEvents, streamEventId, wantedParts } from "./kinds.js";
import { WEBHOOK_GROUP } from "./keys.js";
import { recordPayloads, type PayloadContext } from "./payloads.js";
import type { Timeline } from "./timeline.js";

/**
 * The webhook consumer: its own consumer group (`webhooks`) over the shard streams of every
 * tenant with an endpoint, beside the stream worker's `buckets` group. The group's reading,
 * blocking loop, take-over of a crashed consumer's entries and drain() are stream-group.ts's;
 * what it does with a batch is process below.
 *
 * For each record: the events it stands for (kinds.ts), their payloads (payloads.ts), one
 * delivery job per subscribed endpoint queued with its deterministic id (deliveries.ts) or held
 * for coalescing; then XACK, and the stream is trimmed below what every group has finished
 * (lua/ackStream-1.lua reads every group's position). A crash before the XACK leaves the entries
 * pending: they are processed again and queue the same job ids, which BullMQ ignores.
 *
 * A "ub" record (a user boost added or ended by the admin API, lua/userBoost-3.lua) stands for
 * no event by itself: its boundaries go on the tenant's timeline (timeline.ts), which fires
 * points.boost_started / points.boost_finished at those instants, before the record is acked.
 *
 * The group starts at "$" when first created: an endpoint receives the changes made from the
 * moment its tenant's group first existed, not the history still in the streams.
 */
export interface TenantHooks {
  ctx: PayloadContext;
  deliveries: DeliveryQueue;
  coalescer: Coalescer;
  timeline: Timeline;
}

const selectScript = loadLua("hookSelect-1");

export class WebhookConsumer extends StreamGroupConsumer {
  /** Per tenant, the outcome parts its endpoints' types need (kinds.ts WANTED_PARTS). */
  private readonly wanted: Map<string, string[]>;

  constructor(
    redis: Redis,
    private readonly hooks: ReadonlyMap<string, TenantHooks>,
    logger: Logger,
    opts: { consumer?: string; blockMs?: number; claimIdleMs?: number } = {},
  ) {
    // Small batches: a batch's deliveries are queued in one BullMQ MULTI per chunk, and a long
    // MULTI would hold Redis (and so the event path) for its whole length.
    super({ redis, tenants: [...hooks.values()].map((h) => h.ctx.tenant), logger, group: WEBHOOK_GROUP, groupStart: "$", batchSize: 100, ...opts });
    this.wanted = new Map([...hooks].map(([tenantId, h]) => [tenantId, wantedParts(h.ctx.tenant.webhooks.flatMap((w) => [...w.events]))]));
  }

  /**
   * New records, filtered in Redis (lua/hookSelect-1.lua): the records that can stand for no
   * subscribed event are acknowledged there and never reach Node. Waiting is one XREAD BLOCK
   * (waitForRecords): it delivers nothing to the group and only says which streams moved; the
   * select script reads those.
   */
  protected override async readNew(redis: Redis, blockMs: number | null): Promise<{ batches: [ShardStream, Entry[]][]; read: number }> {
    // Draining reads every stream; the loop waits for the streams that moved, and the record that
    // woke it (the group is at or past it when the script reads nothing new).
    const moved = blockMs === null ? this.streams.map((stream) => ({ stream, id: this.seenOf(stream) })) : await this.waitForRecords(redis, blockMs);
    // All shards' calls at once: one round trip, not one per shard behind the service's traffic.
    const replies = await Promise.all(
      moved.map(({ stream }) => runScript(this.opts.redis, selectScript, [stream.key], [this.group, this.consumer, this.batchSize, ...this.wanted.get(stream.tenantId)!]) as Promise<[number, string | null, ...(string | string[])[]]>),
    );
    let read = 0;
    const batches: [ShardStream, Entry[]][] = [];
    replies.forEach(([count, last, ...flat], k) => {
      const { stream, id } = moved[k]!;
      read += count;
      this.markSeen(stream, last ?? id);
      const kept: Entry[] = [];
      for (let i = 0; i + 1 < flat.length; i += 2) kept.push([flat[i] as string, flat[i + 1] as string[]]);
      if (kept.length > 0) batches.push([stream, kept]);
    });
    return { batches, read };
  }

  override async process(s: ShardStream, entries: Entry[]): Promise<{ applied: number; acked: number }> {
    const hooks = this.hooks.get(s.tenantId)!;
    const { tenant } = hooks.ctx;
    const jobs: DeliveryJob[] = [];
    const held: CoalescedChange[] = [];
    await Promise.all(
      entries.map(async ([id, fields]) => {
        if (fields === null) return;
        const record = decodeStreamRecord(id, fields);
        if (record.kind === "ub") {
          await hooks.timeline.userBoostChanged(record.userId, boostDetail(record));
          return;
        }
        const events = recordEvents(record, boardParts(fields)).filter((e) => tenant.webhooks.some((w) => w.events.has(e.type)));
        if (events.length === 0) return;
        const payloads = await recordPayloads(hooks.ctx, record, events);
        events.forEach((event, i) => {
          const payload = payloads[i];
          if (!payload) return;
          const eventId = streamEventId(tenant.ns, tenant.id, s.shard, id, event.type, event.subject);
          let body: string | null = null;
          for (const endpoint of tenant.webhooks) {
            if (!endpoint.events.has(event.type)) continue;
            const windowMs = endpoint.coalesceMs.get(event.type);
            if (windowMs !== undefined) {
              held.push({ endpoint: endpoint.key, windowMs, streamId: id, ms: record.ms, userId: record.userId, subject: event.subject, payload });
              continue;
            }
            body ??= JSON.stringify({ id: eventId, ...payload });
            jobs.push({ endpoint: endpoint.key, eventId, type: event.type, userId: record.userId, body });
          }
        });
      }),
    );
    await hooks.deliveries.enqueue(jobs);
    await hooks.coalescer.put(held);
    const last = entries.at(-1)?.[0] ?? null;
    return { applied: entries.length, acked: await this.acknowledge(s, entries, last) };
  }
}
