import type { Redis } from "ioredis";
import type { Socket } from "node:net";

/**
 * Coalesces the commands a process sends to Redis within one turn of the event loop into one
 * socket write. ioredis writes each command with its own `socket.write`, one syscall each; under
 * load one turn of the loop handles many HTTP requests (uWS dispatches every ready socket in the
 * poll phase), so their commands are corked on the first and flushed together in the check phase
 * (setImmediate), one writev. Redis then also reads them with one read. Order is kept (a corked
 * socket still writes in order); a command waits microseconds at most, never another turn.
 */
export function coalesceWrites(redis: Redis): void {
  const send = redis.sendCommand.bind(redis);
  let corked: Socket | null = null;
  // Numbers the batches, so that openBatch can tell this turn's from the next.
  let batch = 0;
  const flush = (): void => {
    const socket = corked;
    corked = null;
    socket?.uncork();
  };
  redis.sendCommand = ((command, stream) => {
    const socket = redis.stream as Socket | undefined;
    if (corked === null && stream === undefined && socket !== undefined && redis.status === "ready") {
      socket.cork();
      corked = socket;
      batch++;
      setImmediate(flush);
    }
    return send(command, stream);
  }) as Redis["sendCommand"];
  openBatches.set(redis, () => (corked === null ? null : batch));
}

/** Per coalescing client: the batch it holds unsent, if any (openBatch). */
const openBatches = new WeakMap<Redis, () => number | null>();

/**
 * The batch of commands `redis` holds unsent (corked until this turn's check phase), as a number
 * that names it until its flush; null when it holds none (the next command starts one, or is
 * written at once: coalescing off, the client not ready). Every HTTP request whose handler put a
 * command in the batch had arrived before the batch is written, so a read in it sees at least
 * every write acknowledged before any of them arrived: ReadsInBatch shares such a read.
 */
export function openBatch(redis: Redis): number | null {
  return openBatches.get(redis)?.() ?? null;
}

/**
 * One read per key in each unsent batch of a client, shared by every caller that asks for the
 * same key before the batch is written: under load one turn takes dozens of requests (bench:
 * ~40 a socket write), and a tenant-wide read they all make (the achievements' counters, 16
 * HMGETs) is sent once for all of them. The shared reply is as fresh as each caller's own would
 * be (openBatch): it reaches Redis after every one of them arrived. A read started when no batch
 * is open (coalescing off) is not shared. The callers get one promise: they must not change its value.
 */
/** Per client, the reads shared in its batches (readsInBatch). */
const sharedReads = new WeakMap<Redis, ReadsInBatch<unknown>>();

/**
 * The client's ReadsInBatch: one for every reader of the client, whose keys must name the read
 * whole (its keys, which carry the tenant, and its arguments).
 */
export function readsInBatch(redis: Redis): ReadsInBatch<unknown> {
  let reads = sharedReads.get(redis);
  if (!reads) sharedReads.set(redis, (reads = new ReadsInBatch(redis)));
  return reads;
}

export class ReadsInBatch<T> {
  private batch: number | null = null;
  private readonly reads = new Map<string, Promise<T>>();

  constructor(private readonly redis: Redis) {}

  read(key: string, send: () => Promise<T>): Promise<T> {
    const open = openBatch(this.redis);
    if (open !== null && open === this.batch) {
      const shared = this.reads.get(key);
      if (shared !== undefined) return shared;
    }
    const reply = send();
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
