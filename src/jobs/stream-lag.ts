import type { Redis } from "ioredis";
import type { CompiledTenant } from "../config/compiled.js";
import { loadLua } from "../store/lua-loader.js";
import { runScript } from "../store/redis-script.js";
import { shardStreams, type StreamKind } from "./stream-loop.js";
import { BUCKET_GROUP } from "./stream-worker.js";

const lagScript = loadLua("streamLag-1");

/** How far a consumer group is behind on one stream of a shard (lua/streamLag-1.lua). */
export interface StreamLag {
  tenantId: string;
  shard: number;
  /** Entries in the stream: trimmed as its groups acknowledge them. */
  length: number;
  /** Delivered to a worker, not yet acknowledged. */
  pending: number;
  /** Not yet delivered to any worker; null when Redis cannot tell. */
  undelivered: number | null;
  /** Age of the oldest entry not yet processed (by Redis time), 0 when there is none. */
  oldestAgeMs: number;
}

/**
 * One script call per shard, all in flight at once; read-only. `kind`: the shard streams (the
 * stream worker's group) or the hook streams (the webhook consumer's).
 */
export async function streamLag(redis: Redis, tenants: readonly CompiledTenant[], group = BUCKET_GROUP, kind: StreamKind = "records"): Promise<StreamLag[]> {
  return Promise.all(
    shardStreams(tenants, kind).map(async (s) => {
      const [length, pending, lag, oldest, nowMs] = (await runScript(redis, lagScript, [s.key], [group])) as [number, number, number, string | null, number];
      const oldestMs = oldest === null ? null : Number(oldest.split("-")[0]);
      return {
        tenantId: s.tenantId,
        shard: s.shard,
        length,
        pending,
        undelivered: lag < 0 ? null : lag,
        oldestAgeMs: oldestMs === null ? 0 : Math.max(0, nowMs - oldestMs),
      };
    }),
  );
}
