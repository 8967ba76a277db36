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
      setImmediate(flush);
    }
    return send(command, stream);
  }) as Redis["sendCommand"];
}
