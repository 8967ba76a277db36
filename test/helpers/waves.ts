import type { Socket } from "node:net";
import type { Redis } from "ioredis";

/**
 * The commands `fn` sends on `redis`, by wave: the commands of one round trip, none of which can
 * depend on another's reply. A wave ends when the write coalescing writes its batch (the socket
 * is uncorked: src/store/write-coalescing.ts, with the gathered reads its flush sends first) or
 * when a reply to one of its commands arrives (a command sent after that may have needed it; on a
 * client that does not coalesce, the only end). So the number of waves is the number of round
 * trips one after another, whatever the box's speed: a boundary by the event loop's phases (as
 * this helper drew it before) let a reply that arrived before the next check phase put the
 * command that needed it into the wave of the command it answered. Commands are named as ioredis
 * names them ("encoded": a call Laurel encodes itself, a script's).
 */
export async function wavesDuring<T>(redis: Redis, fn: () => Promise<T>): Promise<{ result: T; waves: string[][] }> {
  const client = redis as unknown as { sendCommand: (...args: unknown[]) => unknown; stream: Socket };
  const { sendCommand } = client;
  const socket = client.stream;
  const { uncork } = socket;
  const waves: string[][] = [];
  let open = false;
  const close = () => (open = false);
  socket.uncork = function (this: Socket) {
    close();
    return uncork.call(this);
  };
  client.sendCommand = (...args: unknown[]) => {
    if (!open) {
      open = true;
      waves.push([]);
    }
    const command = args[0] as { name?: string; promise?: Promise<unknown> };
    waves.at(-1)!.push(String(command.name ?? "encoded"));
    // Registered before the caller's own reactions to the reply: the wave is closed first.
    command.promise?.then(close, close);
    return sendCommand.apply(redis, args);
  };
  try {
    return { result: await fn(), waves };
  } finally {
    client.sendCommand = sendCommand;
    socket.uncork = uncork;
  }
}
