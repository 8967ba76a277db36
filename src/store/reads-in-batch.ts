import type { Redis } from "ioredis";
import { beforeBatchWrite, openBatch } from "./write-coalescing.js";

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

/** The callers gathered under one key in the open batch (ReadsInBatch.gather). */
interface Gathered<I, R> {
  items: I[];
  settle: { resolve: (reply: R) => void; reject: (error: unknown) => void }[];
}

/**
 * Reads that differ per caller but go out as one call (a streak's rank, asked for each caller's
 * length): the callers of one batch that ask under the same `key` give their items, and `send`
 * is called once with all of them just before the batch is written (beforeBatchWrite), after
 * every caller of the turn asked; it answers one reply per item, in order. As fresh as each
 * caller's own read, as for ReadsInBatch. Without a batch to join (coalescing off, the client not
 * ready), `send` is called at once with the caller's item alone.
 */
export class GatheredReads {
  private readonly open = new Map<string, Gathered<unknown, unknown>>();

  constructor(private readonly redis: Redis) {}

  gather<I, R>(key: string, item: I, send: (items: I[]) => Promise<R[]>): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      let gathered = this.open.get(key) as Gathered<I, R> | undefined;
      if (gathered === undefined) {
        const fresh: Gathered<I, R> = { items: [], settle: [] };
        const scheduled = beforeBatchWrite(this.redis, () => {
          this.open.delete(key);
          sendGathered(fresh, send);
        });
        if (!scheduled) {
          sendGathered({ items: [item], settle: [{ resolve, reject }] }, send);
          return;
        }
        this.open.set(key, (gathered = fresh) as Gathered<unknown, unknown>);
      }
      gathered.items.push(item);
      gathered.settle.push({ resolve, reject });
    });
  }
}

function sendGathered<I, R>(gathered: Gathered<I, R>, send: (items: I[]) => Promise<R[]>): void {
  const fail = (error: unknown): void => {
    for (const caller of gathered.settle) caller.reject(error);
  };
  let replies: Promise<R[]>;
  try {
    replies = send(gathered.items);
  } catch (error) {
    fail(error);
    return;
  }
  replies.then((all) => gathered.settle.forEach((caller, i) => caller.resolve(all[i]!)), fail);
}

/** One instance per client, made on first use: every reader of a client shares its batches' reads. */
function perClient<T>(make: (redis: Redis) => T): (redis: Redis) => T {
  const byClient = new WeakMap<Redis, T>();
  return (redis) => {
    let made = byClient.get(redis);
    if (made === undefined) byClient.set(redis, (made = make(redis)));
    return made;
  };
}

/** The client's ReadsInBatch. */
export const readsInBatch = perClient((redis) => new ReadsInBatch(redis));

/** The client's GatheredReads. */
export const gatheredReadsOf = perClient((redis) => new GatheredReads(redis));
