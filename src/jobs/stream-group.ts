import type { Redis } from "ioredis";
import type { Logger } from "pino";
import type { CompiledTenant } from "../config/compiled.js";
import { PROCESS_NAME } from "../process-name.js";
import { loadLua } from "../store/lua-loader.js";
import { runScript } from "../store/redis-script.js";
import { GATHER_MS, pause, someBatchFull, StreamLoop, type ShardStream, type StreamKind } from "./stream-loop.js";
import { compareStreamIds } from "./stream-ops.js";

/**
 * A consumer group over a stream of every shard of the given tenants (the shard streams {t:s}:x,
 * or the hook streams {t:s}:xh): the reading, the blocking loop, the take-over of a crashed
 * consumer's entries and drain(). A subclass says what a batch does (process); the webhook
 * consumer (webhooks/consumer.ts, over the hook streams) is the one in use.
 *
 * At least once: process() acknowledges what it finished (acknowledge below, lua/ackStream-1.lua,
 * which also trims the stream below what every reader has finished); a crash before that leaves
 * the entries pending, and they are delivered again or taken over (XAUTOCLAIM) and processed
 * again, so the effects of process() must be idempotent.
 *
 * The loop blocks on ONE dedicated connection, so it costs nothing while idle: an XREADGROUP
 * BLOCK over all streams. Tests and tools call drain(), which processes everything currently in
 * the streams and returns, instead of waiting for the loop.
 *
 * Redis Cluster: one XREADGROUP cannot span slots; there the loop would read per node.
 */
const ackScript = loadLua("ackStream-1");

export { shardStreams, type ShardStream } from "./stream-loop.js";

export interface StreamGroupOptions {
  redis: Redis;
  tenants: readonly CompiledTenant[];
  logger: Logger;
  group: string;
  /**
   * Where a new group starts: "0" reads every record still in the streams, "$" only records
   * written after the group was created (outbound events, issue 6).
   * @default "0"
   */
  groupStart?: "0" | "$";
  /** Which stream of each shard: the shard streams or the hook streams. @default "records" */
  streams?: StreamKind;
  /** Unique per process. @default "<hostname>-<pid>" */
  consumer?: string;
  /** Entries per stream per read. @default 100 */
  batchSize?: number;
  /** How long one blocking read waits before the loop looks around again. @default 2000 */
  blockMs?: number;
  /** The wait after a read short of a full batch (GATHER_MS). @default 50 */
  gatherMs?: number;
  /** Pending entries of another consumer idle this long are taken over (a crashed worker). @default 30000 */
  claimIdleMs?: number;
  /** How often the loop retries its own pending entries and takes over idle ones. @default 10000 */
  recoverEveryMs?: number;
}

export type Entry = [id: string, fields: string[] | null];
type ReadReply = [key: string, entries: Entry[]][] | null;

export abstract class StreamGroupConsumer extends StreamLoop {
  readonly group: string;
  readonly consumer: string;
  protected readonly batchSize: number;
  private lastRecovery = 0;
  /**
   * The entries this process is processing now ("<stream> <id>"), with the call doing it. An
   * entry stays pending while process() runs (a webhook record until its first attempts end,
   * up to their timeout), and drain() takes over pending entries whatever their idle time: beside
   * the running loop (the manual clock's moves in a service) it took the loop's own entries and
   * sent their events a second time. A call meeting an entry already in hand waits for it instead.
   */
  private readonly inHand = new Map<string, Promise<unknown>>();

  constructor(protected readonly opts: StreamGroupOptions) {
    super({ redis: opts.redis, tenants: opts.tenants, logger: opts.logger, name: `stream consumer ${opts.group}`, group: opts.group, groupStart: opts.groupStart ?? "0", streams: opts.streams });
    this.group = opts.group;
    this.consumer = opts.consumer ?? PROCESS_NAME;
    this.batchSize = opts.batchSize ?? 100;
  }

  /**
   * Processes everything currently in the streams, then returns the number of entries applied.
   * It takes over every pending entry whatever its idle time (so it also finishes a crashed
   * worker's batch); this process's own loop keeps the entries it has in hand (drain waits for
   * them), but another process's are taken over while it may be sending them: meant for tests,
   * tools and the manual clock.
   */
  async drain(): Promise<number> {
    await this.ensureGroups();
    let applied = 0;
    for (;;) {
      let progress = 0;
      for (const s of this.streams) {
        const claimed = await this.claim(s, 0);
        if (claimed.length > 0) {
          const done = await this.processOnce(s, claimed, true);
          applied += done.applied;
          progress += done.acked;
        }
      }
      const fresh = await this.readNew(this.opts.redis, null);
      progress += fresh.read;
      // All at once, as a turn does: every entry read is in hand before any await. One shard after
      // another, a later shard's entries waited pending and out of hand, where the loop's recovery
      // (its own pending entries) could take them too, and both sent them.
      for (const done of await Promise.all(fresh.batches.map(([s, entries]) => this.processOnce(s, entries, false)))) applied += done.applied;
      if (progress === 0) return applied;
    }
  }

  /** One turn of the loop: recovery when due, then the new records, then a pause to gather more. */
  protected async turn(blocking: Redis): Promise<void> {
    if (Date.now() - this.lastRecovery >= (this.opts.recoverEveryMs ?? 10_000)) {
      await this.recover();
      this.lastRecovery = Date.now();
    }
    const { batches } = await this.readNew(blocking, this.opts.blockMs ?? 2000);
    // Shards at once: their round trips overlap instead of queueing behind the service's traffic.
    await Promise.all(batches.map(([s, entries]) => this.processOnce(s, entries, false)));
    const full = someBatchFull(batches.map(([, entries]) => entries.length), this.batchSize);
    if (!full && !this.stopping) await pause(this.opts.gatherMs ?? GATHER_MS);
  }

  /** Own pending entries (left by a gap or a failed call), then other consumers' idle ones. */
  private async recover(): Promise<void> {
    for (const [s, entries] of await this.read(this.opts.redis, "0", null)) await this.processOnce(s, entries, true);
    const idle = this.opts.claimIdleMs ?? 30_000;
    for (const s of this.streams) {
      const claimed = await this.claim(s, idle);
      if (claimed.length > 0) await this.processOnce(s, claimed, true);
    }
  }

  /** process() for the entries not in hand already; then waits for those that were (inHand). */
  private async processOnce(s: ShardStream, entries: Entry[], redelivered: boolean): Promise<{ applied: number; acked: number }> {
    const fresh: Entry[] = [];
    const elsewhere = new Set<Promise<unknown>>();
    for (const entry of entries) {
      const running = this.inHand.get(`${s.key} ${entry[0]}`);
      if (running) elsewhere.add(running);
      else fresh.push(entry);
    }
    let done = { applied: 0, acked: 0 };
    if (fresh.length > 0) {
      const call = this.process(s, fresh, redelivered);
      for (const [id] of fresh) this.inHand.set(`${s.key} ${id}`, call);
      try {
        done = await call;
      } finally {
        for (const [id] of fresh) this.inHand.delete(`${s.key} ${id}`);
      }
    }
    await Promise.allSettled(elsewhere);
    return done;
  }

  /** New records for this consumer: the batches process() gets, and how many records were read in all. */
  private async readNew(redis: Redis, blockMs: number | null): Promise<{ batches: [ShardStream, Entry[]][]; read: number }> {
    const batches = await this.read(redis, ">", blockMs);
    return { batches, read: batches.reduce((n, [, entries]) => n + entries.length, 0) };
  }

  /** XREADGROUP over every stream; `from` is ">" (new entries) or "0" (this consumer's pending ones). */
  protected async read(redis: Redis, from: ">" | "0", blockMs: number | null, count = this.batchSize): Promise<[ShardStream, Entry[]][]> {
    const block = blockMs === null ? [] : ["BLOCK", blockMs];
    const reply = (await (redis.xreadgroup as (...args: unknown[]) => Promise<unknown>)(
      "GROUP",
      this.group,
      this.consumer,
      "COUNT",
      count,
      ...block,
      "STREAMS",
      ...this.streams.map((s) => s.key),
      ...this.streams.map(() => from),
    )) as ReadReply;
    if (!reply) return [];
    const byKey = new Map(this.streams.map((s) => [s.key, s]));
    return reply.filter(([, entries]) => entries.length > 0).map(([key, entries]) => [byKey.get(key)!, entries]);
  }

  /** Takes over pending entries idle at least `minIdleMs`, oldest first (XAUTOCLAIM). */
  private async claim(s: ShardStream, minIdleMs: number): Promise<Entry[]> {
    const out: Entry[] = [];
    let cursor = "0-0";
    do {
      const [next, entries] = (await this.opts.redis.xautoclaim(s.key, this.group, this.consumer, minIdleMs, cursor, "COUNT", this.batchSize)) as [
        string,
        Entry[],
      ];
      out.push(...entries);
      cursor = next;
    } while (cursor !== "0-0" && out.length < this.batchSize);
    return out;
  }


  /**
   * Processes one shard's entries (ascending ids) and acknowledges what it finished.
   * `redelivered`: the entries were read before (this consumer's pending ones, or taken over from
   * another), so their effects may have happened already.
   */
  abstract process(s: ShardStream, entries: Entry[], redelivered: boolean): Promise<{ applied: number; acked: number }>;

  /**
   * lua/ackStream-1.lua: acknowledges the entries at or below `upTo` (and those deleted from the
   * stream while pending, which carry no fields), then trims the stream. Later entries stay
   * pending and are retried.
   */
  async acknowledge(s: ShardStream, entries: readonly Entry[], upTo: string | null): Promise<number> {
    const ackIds = entries.filter(([id, fields]) => fields === null || (upTo !== null && compareStreamIds(id, upTo) <= 0)).map(([id]) => id);
    if (ackIds.length > 0) await runScript(this.opts.redis, ackScript, [s.key], [this.group, ...ackIds]);
    return ackIds.length;
  }
}
