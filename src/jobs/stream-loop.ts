import type { Redis } from "ioredis";
import type { Logger } from "pino";
import type { CompiledTenant } from "../config/compiled.js";
import { TenantKeys } from "../store/keys.js";
import { quietDuplicate } from "../store/redis-client.js";
import { LogThrottle } from "../log-throttle.js";

/**
 * One shard stream of a tenant, with the keys its consumers use beside it: the shard stream
 * ({t:s}:x, every record: the stream worker) or the shard's hook stream ({t:s}:xh, the records the
 * tenant's endpoints want: the webhook consumer).
 */
export interface ShardStream {
  tenantId: string;
  shard: number;
  key: string;
  watermarks: string;
  prefix: string;
}

export type StreamKind = "records" | "hooks";

export function shardStreams(tenants: readonly CompiledTenant[], kind: StreamKind = "records"): ShardStream[] {
  return tenants.flatMap((tenant) => {
    const keys = new TenantKeys(tenant.id);
    return Array.from({ length: tenant.shards }, (_, shard) => ({
      tenantId: tenant.id,
      shard,
      key: kind === "hooks" ? keys.hookStream(shard) : keys.stream(shard),
      watermarks: keys.watermarks(shard),
      prefix: keys.prefix(shard),
    }));
  });
}

/**
 * After a read that found less than a full batch, a loop waits this long before it reads again,
 * so that records gather into batches. Without it, under load a loop spun on a few records at a
 * time: each turn's fixed costs (the wait, a script call per moved shard, the trim) were paid for
 * a handful of records (with the wait, the stream worker's script calls fell from 0.118 to 0.038
 * per event under the webhooks bench; bench/README.md, "The stream worker in Redis"). The price
 * is up to this much more delay before a record reaches its buckets or its endpoints.
 */
export const GATHER_MS = 50;

/**
 * Whether a turn should go on at once rather than gather: only when some stream filled its batch
 * (more may be waiting there). Judged per stream, not by the turn's total: with small per-stream
 * batches (the webhook consumer's 4), a total of a record or two per stream across shards passed
 * for a full batch, and the loop spun at a few hundred records a second, paying a read and a
 * shard's scripts for each (758a8aa).
 */
export function someBatchFull(perStream: Iterable<number>, batchSize: number): boolean {
  for (const count of perStream) if (count >= batchSize) return true;
  return false;
}

export const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export interface StreamLoopOptions {
  redis: Redis;
  tenants: readonly CompiledTenant[];
  logger: Logger;
  /** Logged with an error. */
  name: string;
  /** The consumer group on every stream: the stream worker's position marker, or a real consumer group. */
  group: string;
  /** Where the group starts when created: "0" every record still in the streams, "$" only later ones. */
  groupStart: "0" | "$";
  /** Which stream of each shard. @default "records" */
  streams?: StreamKind;
}

/**
 * After a blocking read that waited its whole BLOCK for nothing: when the server this connection
 * reaches has become a replica (a failover behind REDIS_URL's address, the connection opened
 * before it), reconnect, so that the next read goes where the address leads now. Why: XREAD is
 * a read, which a replica serves, so nothing else moves this connection (a write refused
 * READONLY moves the others: redis-client.ts reconnectWhenReadOnly), and a demoted server whose
 * replication of the new primary is not running (its first sync under way, or its link down)
 * never sees the new records: the stream worker waited there for ever while the events went to
 * the new primary (test/integration/redis-failover.test.ts). One ROLE per idle BLOCK; a user
 * whose ACL forbids ROLE keeps its connection as before.
 */
async function leaveReplica(blocking: Redis): Promise<void> {
  const role = (await blocking.call("ROLE").catch(() => null)) as [string, ...unknown[]] | null;
  if (role?.[0] === "slave") blocking.disconnect(true);
}

/**
 * What the stream worker and the stream group consumers share: their shard streams and group,
 * and a background loop of turns on its own Redis connection. A turn may block on that
 * connection (XREAD / XREADGROUP BLOCK), so stop() closes it, which ends a blocked read at once,
 * and waits for the turn to return. A turn that throws is logged and retried a second later (a
 * Redis away, a lost group), with the groups checked again first.
 */
export abstract class StreamLoop {
  protected readonly streams: ShardStream[];
  private groupsReady = false;
  /** Per stream key, where waitForRecords waits from (the caller's last known position). */
  private readonly seen: Map<string, string>;
  private connection: Redis | null = null;
  private loop: Promise<void> | null = null;
  private stopped = false;

  constructor(private readonly loopOpts: StreamLoopOptions) {
    this.streams = shardStreams(loopOpts.tenants, loopOpts.streams);
    this.seen = new Map(this.streams.map((s) => [s.key, "0-0"]));
  }

  /** Creates the group on every stream where it is missing (and the stream with it). */
  async ensureGroups(): Promise<void> {
    if (this.groupsReady) return;
    for (const s of this.streams) {
      try {
        await this.loopOpts.redis.xgroup("CREATE", s.key, this.loopOpts.group, this.loopOpts.groupStart, "MKSTREAM");
      } catch (err) {
        if (!(err instanceof Error) || !err.message.startsWith("BUSYGROUP")) throw err;
      }
    }
    this.groupsReady = true;
  }

  /** Starts the blocking loop in the background; stop() ends it. */
  start(): void {
    if (this.loop) return;
    this.stopped = false;
    const blocking = quietDuplicate(this.loopOpts.redis);
    this.connection = blocking;
    this.loop = this.run(blocking);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.connection?.disconnect();
    await this.loop;
    this.loop = null;
    this.connection = null;
  }

  protected get stopping(): boolean {
    return this.stopped;
  }

  /** One turn of the loop: wait for records (blocking on `blocking`), work, maybe pause. */
  protected abstract turn(blocking: Redis): Promise<void>;

  /**
   * XREAD BLOCK over every stream from its last known position, COUNT 1: which streams have a
   * record past it, and that record's id. It delivers nothing to any group; the caller reads
   * the moved streams itself and then records its new position with markSeen.
   */
  protected async waitForRecords(blocking: Redis, blockMs: number): Promise<{ stream: ShardStream; id: string }[]> {
    const reply = (await blocking.xread("COUNT", 1, "BLOCK", blockMs, "STREAMS", ...this.seen.keys(), ...this.seen.values())) as [string, [string, unknown][]][] | null;
    if (reply === null) await leaveReplica(blocking);
    return (reply ?? []).map(([key, entries]) => ({ stream: this.streams.find((s) => s.key === key)!, id: entries[0]![0] }));
  }

  /** The shard stream a user's records are in (tests, tools). */
  streamOf(tenantId: string, shard: number): ShardStream {
    return this.streams.find((s) => s.tenantId === tenantId && s.shard === shard)!;
  }

  protected seenOf(s: ShardStream): string {
    return this.seen.get(s.key)!;
  }

  protected markSeen(s: ShardStream, id: string): void {
    this.seen.set(s.key, id);
  }

  /** A failing turn repeats every second while Redis is down: logged once per 30 s. */
  private readonly failures = new LogThrottle();

  private async run(blocking: Redis): Promise<void> {
    while (!this.stopped) {
      try {
        await this.ensureGroups();
        await this.turn(blocking);
      } catch (err) {
        if (this.stopped) break;
        this.groupsReady = false;
        this.failures.run((unlogged) => this.loopOpts.logger.error({ err, unlogged }, `${this.loopOpts.name}: read or work failed; retrying`));
        await pause(1000);
      }
    }
  }
}
