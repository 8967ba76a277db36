import type { Redis } from "ioredis";
import { beforeBatchWrite } from "./write-coalescing.js";

/**
 * Reads that the requests of one turn of the event loop make in one call. Under load a turn takes
 * dozens of requests (bench: ~40 a socket write), whose commands the write coalescing sends as
 * one batch at the turn's end. A read they all make with the same keys (the achievements'
 * counters, 16 HMGETs; a board page's entries, names and first rank) is sent once for all of them
 * (`read`); a read that differs per request only by an item (a streak's rank by the user's length,
 * the rankings by their limit, names and users by their ids, a board's places by their entries)
 * goes out as one call for every item (`gather`).
 * Either is sent just before the batch is written (beforeBatchWrite), after every request of the
 * turn asked: its reply is as fresh as each caller's own would be, since it reaches Redis after
 * every one of them arrived and so sees every write acknowledged before any of them did. With
 * no batch to join (coalescing off, the client not ready), each caller's read is sent at once,
 * alone. Callers of `read` share its reply: they must not change it.
 */
export class ReadsInBatch {
  private readonly open = new Map<string, Gathered<unknown, unknown>>();

  constructor(private readonly redis: Redis) {}

  /** `send`'s reply, read once for every caller in the batch asking under `key`. `key` names the read whole (its keys, which carry the tenant, and its arguments). */
  read<T>(key: string, send: () => Promise<T>): Promise<T> {
    return this.gather<null, T>(key, null, async (asked) => {
      const reply = await send();
      return asked.map(() => reply);
    });
  }

  /**
   * `send`'s reply, sent just before the batch is written, behind the reads of the batch asked
   * for before it (at once where there is no batch, as they were): for a read that must reach
   * Redis after another caller's read, not shared with anyone.
   */
  behind<T>(send: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve) => {
      if (!beforeBatchWrite(this.redis, () => resolve(send()))) resolve(send());
    });
  }

  /**
   * The reply to `item` of one call for every caller in the batch asking under `key`: `send`
   * (the first caller's) is given every caller's item, in order, and answers one reply each.
   */
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

/** The callers gathered under one key in the open batch (ReadsInBatch.gather). */
interface Gathered<I, R> {
  items: I[];
  settle: { resolve: (reply: R) => void; reject: (error: unknown) => void }[];
}

/** Sends a gathered read and settles its callers; never throws (it runs in the batch's write). */
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

/** Per client, the reads of its batches. */
const byClient = new WeakMap<Redis, ReadsInBatch>();

/** The client's ReadsInBatch, one for every reader of the client. */
export function readsInBatch(redis: Redis): ReadsInBatch {
  let reads = byClient.get(redis);
  if (!reads) byClient.set(redis, (reads = new ReadsInBatch(redis)));
  return reads;
}
