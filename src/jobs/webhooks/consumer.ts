import type { Redis } from "ioredis";
import type { Logger } from "pino";
import { boostDetail, decodeStreamRecord } from "../../domain/stream-record.js";
import { StreamGroupConsumer, type Entry, type ShardStream } from "../stream-group.js";
import type { Coalescer, CoalescedChange } from "./coalesce.js";
import type { DeliveryJob, DeliveryQueue } from "./deliveries.js";
import { boardParts, recordEvents, streamEventId } from "./kinds.js";
import { WEBHOOK_GROUP } from "./keys.js";
import { recordPayloads, type PayloadContext } from "./payloads.js";
import type { Timeline } from "./timeline.js";

/**
 * The webhook consumer: its own consumer group (`webhooks`) over the hook streams ({t:s}:xh) of
 * every tenant with an endpoint. The scripts that change state write each record to the shard
 * stream and, in the same atomic call, to the shard's hook stream when one of the tenant's
 * endpoints wants it (lua/includes/hooks.lua), so this group reads only those records, with a
 * plain XREADGROUP. The group's reading, blocking loop, take-over of a crashed consumer's
 * entries and drain() are stream-group.ts's; what it does with a batch is process below.
 *
 * For each record: the events it stands for (kinds.ts), their payloads (payloads.ts), one
 * delivery job per subscribed endpoint queued with its deterministic id (deliveries.ts) or held
 * for coalescing; then XACK, and the hook stream is trimmed below what its group has finished
 * (lua/ackStream-1.lua). A crash before the XACK leaves the entries pending: they are processed
 * again and queue the same job ids, which BullMQ ignores. Event ids derive from the record's
 * entry id in the SHARD stream (the hook entry's "x" field), as when this group read the shard
 * streams themselves.
 *
 * A "ub" record (a user boost added or ended by the admin API, lua/userBoost-3.lua) stands for
 * no event by itself: its boundaries go on the tenant's timeline (timeline.ts), which fires
 * points.boost_started / points.boost_finished at those instants, before the record is acked.
 *
 * The group starts at "$" when first created: an endpoint receives the changes written from the
 * moment its tenant's group first existed (Webhooks.start creates it before the process writes).
 */
export interface TenantHooks {
  ctx: PayloadContext;
  deliveries: DeliveryQueue;
  coalescer: Coalescer;
  timeline: Timeline;
}

/**
 * The entry id a hook stream's record got in the shard stream: its "x" field, the last pair every
 * writer appends (lua/includes/hooks.lua, lua/hookUpgrade-3.lua). Event ids derive from it, so a
 * record without it fails loudly rather than getting ids from the hook stream's own entry id.
 */
function shardEntryId(hookId: string, fields: readonly string[]): string {
  const n = fields.length;
  if (n >= 2 && fields[n - 2] === "x") return fields[n - 1]!;
  throw new Error(`hook stream entry ${hookId} has no "x" field (its shard stream entry id)`);
}

/**
 * The records one turn of the consumer reads at most, across all its hook streams. A turn
 * processes its records at once, and in a service process their payload reads, first attempts,
 * signatures and JSON share the event loop with the HTTP requests. With every type subscribed
 * (~1.2 deliveries per event), 100 records per stream (1 600 a turn on 16 shards) held the loop
 * long enough to put the event endpoint's p99 at 370-460 ms; 8 per stream gave 39 ms and 4 gave
 * 25 ms, and the box's CPU per request fell as well (fewer objects alive at each collection):
 * bench/README.md, "The tenth stop". Past the box's capacity the records wait in the hook
 * streams (the consumer lags) instead of the requests waiting.
 */
export const TURN_RECORDS = 64;

/** Records per stream per read, so that a turn reads at most about TURN_RECORDS in all. */
export function perStreamBatch(streams: number): number {
  return Math.max(1, Math.ceil(TURN_RECORDS / Math.max(1, streams)));
}

export class WebhookConsumer extends StreamGroupConsumer {
  constructor(
    redis: Redis,
    private readonly hooks: ReadonlyMap<string, TenantHooks>,
    logger: Logger,
    opts: { consumer?: string; blockMs?: number; claimIdleMs?: number } = {},
  ) {
    const tenants = [...hooks.values()].map((h) => h.ctx.tenant);
    const batchSize = perStreamBatch(tenants.reduce((n, t) => n + t.shards, 0));
    super({ redis, tenants, logger, group: WEBHOOK_GROUP, groupStart: "$", streams: "hooks", batchSize, ...opts });
  }

  override async process(s: ShardStream, entries: Entry[], redelivered: boolean): Promise<{ applied: number; acked: number }> {
    const hooks = this.hooks.get(s.tenantId)!;
    const { tenant } = hooks.ctx;
    const jobs: DeliveryJob[] = [];
    const held: CoalescedChange[] = [];
    await Promise.all(
      entries.map(async ([hookId, fields]) => {
        if (fields === null) return;
        const id = shardEntryId(hookId, fields);
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
    await hooks.deliveries.dispatch(jobs, !redelivered);
    await hooks.coalescer.put(held);
    const last = entries.at(-1)?.[0] ?? null;
    return { applied: entries.length, acked: await this.acknowledge(s, entries, last) };
  }
}
