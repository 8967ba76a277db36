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
  // What runs just before the batch is written (beforeBatchWrite): its commands join the batch.
  let beforeWrite: (() => void)[] = [];
  const flush = (): void => {
    const socket = corked;
    // A callback may schedule another (a read that leads to a second): run until none is left.
    while (beforeWrite.length > 0) {
      const callbacks = beforeWrite;
      beforeWrite = [];
      for (const callback of callbacks) callback();
    }
    corked = null;
    socket?.uncork();
  };
  // Corks the socket for a batch that this turn's check phase writes; false when the client
  // cannot hold one (not ready, or not connected).
  const open = (stream: unknown): boolean => {
    if (corked !== null) return true;
    const socket = redis.stream as Socket | undefined;
    if (stream !== undefined || socket === undefined || redis.status !== "ready") return false;
    socket.cork();
    corked = socket;
    setImmediate(flush);
    return true;
  };
  redis.sendCommand = ((command, stream) => {
    open(stream);
    return send(command, stream);
  }) as Redis["sendCommand"];
  batchWriters.set(redis, (callback) => {
    if (!open(undefined)) return false;
    beforeWrite.push(callback);
    return true;
  });
}

/** Per coalescing client: its beforeBatchWrite. */
const batchWriters = new WeakMap<Redis, (callback: () => void) => boolean>();

/**
 * Runs `callback` just before `redis`'s batch of this turn is written, opening the batch if none
 * is open: the commands it sends are written with the batch. A read gathered from the requests of
 * the turn (reads-in-batch.ts) is sent from it, after every one of them asked: every HTTP request
 * whose handler put a command in the batch had arrived before the batch is written, so such a
 * read sees at least every write acknowledged before any of them arrived. The callback
 * must not throw. False, and nothing scheduled, when the client coalesces no writes or cannot hold
 * a batch now (not ready): the caller sends at once.
 */
export function beforeBatchWrite(redis: Redis, callback: () => void): boolean {
  return batchWriters.get(redis)?.(callback) ?? false;
}
