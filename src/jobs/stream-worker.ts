import type { Redis } from "ioredis";
import type { Logger } from "pino";
import type { CompiledTenant } from "../config/compiled.js";
import { loadLua } from "../store/lua-loader.js";
import { runScript } from "../store/redis-script.js";
import { GATHER_MS, pause, someBatchFull, StreamLoop, type ShardStream } from "./stream-loop.js";
import { recordDayArgs } from "./stream-ops.js";

export { shardStreams, type ShardStream } from "./stream-loop.js";

/**
 * The stream worker (DESIGN: Background work): materialises what the hot path does not keep,
 * the daily buckets of the event summaries and wrapped (each series' open month, its latest day
 * and the days of that month before it, in the shard hash {t:s}:bl, the days before them in
 * month members: src/domain/buckets.ts), from every shard stream ({t:s}:x) of every tenant.
 *
 * The work is in Redis: lua/applyStream-2.lua reads the records after the shard's watermark,
 * applies them and moves the watermark in one atomic call, so each record counts exactly once
 * whoever calls and however often, and no record is ever held by a crashed consumer. Node only
 * says when and where: it sends no record and parses none (that cost the service ~27 µs of CPU
 * per record when the records went through Node; bench/README.md, "Stream worker"). The one
 * thing Node adds is a record's local day when its writer could not put it in the record (Lua
 * has no zone data): the script stops there and names those records, and the worker calls
 * again with their days.
 *
 * The consumer group `buckets` is kept at the watermark by the script: the stream's trimming
 * (below what every group has finished) and GET /metrics see this worker as one group more.
 *
 * The loop blocks on ONE dedicated connection (XREAD BLOCK over all streams from each shard's
 * watermark, one entry each), so it costs nothing while idle. Tests and tools call drain(),
 * which applies everything currently in the streams and returns.
 *
 * Redis Cluster: the script is per shard and cluster-safe; one XREAD cannot span slots, so there
 * the loop would block per node.
 */
export const BUCKET_GROUP = "buckets";

const applyScript = loadLua("applyStream-2");

export interface StreamWorkerOptions {
  redis: Redis;
  tenants: readonly CompiledTenant[];
  logger: Logger;
  /**
   * Records per script call. 100 keep one call to a few ms (500 held Redis for tens of ms, and
   * the event path waited behind it). @default 100
   */
  batchSize?: number;
  /** How long one blocking read waits before the loop looks around again. @default 2000 */
  blockMs?: number;
  /** The wait after a turn in which no shard had a full batch (stream-loop.ts GATHER_MS). @default 50 */
  gatherMs?: number;
}

/** What one call of the apply script did on one shard. */
interface ShardApplied {
  applied: number;
  watermark: string | null;
  /** The call read a full batch: more records may follow. */
  full: boolean;
}

export class StreamWorker extends StreamLoop {
  private readonly batchSize: number;

  /**
   * The `buckets` group marks this worker's position for trimming and lag (the script moves it).
   * Created at 0, so that no record written before the worker first ran is trimmed unseen.
   */
  constructor(private readonly opts: StreamWorkerOptions) {
    super({ redis: opts.redis, tenants: opts.tenants, logger: opts.logger, name: "stream worker", group: BUCKET_GROUP, groupStart: "0" });
    this.batchSize = opts.batchSize ?? 100;
  }

  /** Applies everything currently in the streams, then returns the number of records applied. */
  async drain(): Promise<number> {
    await this.ensureGroups();
    let applied = 0;
    for (const s of this.streams) applied += (await this.catchUp(s)).applied;
    return applied;
  }

  /** Calls the script on one shard until it reads less than a full batch. */
  private async catchUp(s: ShardStream): Promise<{ applied: number; watermark: string | null }> {
    let applied = 0;
    for (;;) {
      const step = await this.applyShard(s);
      applied += step.applied;
      if (!step.full || step.applied === 0) return { applied, watermark: step.watermark };
    }
  }

  /**
   * One batch on one shard: lua/applyStream-2.lua. When it stops at records without their local
   * day, the worker computes their days and calls again (a few times at most: each call applies
   * at least up to the records it named, unless another worker moved the watermark meanwhile).
   */
  private async applyShard(s: ShardStream): Promise<ShardApplied> {
    let days: string[] = [];
    let applied = 0;
    for (let attempt = 0; ; attempt++) {
      const reply = (await runScript(this.opts.redis, applyScript, [s.key, s.watermarks], [s.prefix, BUCKET_GROUP, this.batchSize, ...days])) as [number, string | false, number, ...string[]];
      const [count, watermark, full, ...needDays] = reply;
      applied += count;
      if (needDays.length === 0 || attempt >= 5) {
        if (needDays.length > 0) this.opts.logger.warn({ stream: s.key }, "stream worker: records still without their day after 5 calls; retrying later");
        return { applied, watermark: watermark || null, full: full === 1 || needDays.length > 0 };
      }
      days = recordDayArgs(needDays);
    }
  }

  /**
   * One turn of the loop: waits for a record past any shard's watermark as last seen, catches
   * those shards up, then pauses to let records gather unless a shard had a full batch.
   */
  protected async turn(blocking: Redis): Promise<void> {
    let stuck = false;
    const appliedPerShard: number[] = [];
    // The moved shards one after another, not all at once: a call holds Redis for its whole batch
    // (~10 µs a record), and 16 calls sent together held it for ~7 ms at 14k events/s, every
    // event behind them waiting as long. One at a time, events get in between the calls:
    // alternated pairs put the demo's events at 1.02-1.09 of the worker off instead of 0.87-0.89
    // (bench/README.md, "The eighth stop"). The worker is background work; it yields.
    for (const { stream } of await this.waitForRecords(blocking, this.opts.blockMs ?? 2000)) {
      const { applied, watermark } = await this.catchUp(stream);
      appliedPerShard.push(applied);
      // No progress past a watermark already known: a record the script cannot apply yet;
      // pause instead of spinning on XREAD, which answers at once while it is there.
      if (applied === 0 && (watermark ?? "0-0") === this.seenOf(stream)) stuck = true;
      this.markSeen(stream, watermark ?? "0-0");
    }
    if (stuck) await pause(1000);
    else if (!someBatchFull(appliedPerShard, this.batchSize) && !this.stopping) await pause(this.opts.gatherMs ?? GATHER_MS);
  }

}
