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
 * every write acknowledged before any of them arrived: reads-in-batch.ts shares such a read.
 */
export function openBatch(redis: Redis): number | null {
  return openBatches.get(redis)?.() ?? null;
}
