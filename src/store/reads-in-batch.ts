import type { Redis } from "ioredis";
import { openBatch } from "./write-coalescing.js";

/**
 * One read per key in each unsent batch of a client's commands, shared by every caller that asks
 * for the same key before the batch is written. Under load one turn of the event loop takes
 * dozens of requests (bench: ~40 a socket write), and a tenant-wide read they all make (the
 * achievements' counters, 16 HMGETs; a board page's entries, names and first rank) is sent once
 * for all of them. The shared reply is as fresh as each caller's own would be (openBatch): it
 * reaches Redis after every one of them arrived, so it sees every write acknowledged before any
 * of them did. A read started when no batch is open (coalescing off, the client not ready) is not
 * shared. The callers get one promise: they must not change its value.
 */
export class ReadsInBatch {
  private batch: number | null = null;
  private readonly reads = new Map<string, Promise<unknown>>();

  constructor(private readonly redis: Redis) {}

  /** `send`'s reply, or the reply of the read sent under `key` in the batch still open. `key` names the read whole (its keys, which carry the tenant, and its arguments). */
  read<T>(key: string, send: () => Promise<T>): Promise<T> {
    const open = openBatch(this.redis);
    if (open !== null && open === this.batch) {
      const shared = this.reads.get(key);
      if (shared !== undefined) return shared as Promise<T>;
    }
    const reply = send();
    // The batch the read went into (send wrote its first command synchronously).
    const batch = openBatch(this.redis);
    if (batch === null) return reply;
    if (batch !== this.batch) {
      this.batch = batch;
      this.reads.clear();
    }
    this.reads.set(key, reply);
    return reply;
  }
}

/** Per client, the reads shared in its batches. */
const sharedReads = new WeakMap<Redis, ReadsInBatch>();

/** The client's ReadsInBatch, one for every reader of the client. */
export function readsInBatch(redis: Redis): ReadsInBatch {
  let reads = sharedReads.get(redis);
  if (!reads) sharedReads.set(redis, (reads = new ReadsInBatch(redis)));
  return reads;
}
