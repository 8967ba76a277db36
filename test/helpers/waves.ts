import type { Redis } from "ioredis";

/**
 * The commands `fn` sends on `redis`, by wave: a wave is what is sent before the event loop's next
 * check phase, which the write coalescing puts in one socket write (src/store/write-coalescing.ts).
 * A command that needed an earlier reply is in a later wave, so the number of waves is the number
 * of round trips one after another. Commands are named as ioredis names them ("encoded": a call
 * Laurel encodes itself, a script's).
 */
export async function wavesDuring<T>(redis: Redis, fn: () => Promise<T>): Promise<{ result: T; waves: string[][] }> {
  const client = redis as unknown as { sendCommand: (...args: unknown[]) => unknown };
  const { sendCommand } = client;
  const waves: string[][] = [];
  let open = false;
  client.sendCommand = (...args: unknown[]) => {
    if (!open) {
      open = true;
      waves.push([]);
      setImmediate(() => (open = false));
    }
    const command = args[0] as { name?: string };
    waves.at(-1)!.push(String(command.name ?? "encoded"));
    return sendCommand.apply(redis, args);
  };
  try {
    return { result: await fn(), waves };
  } finally {
    client.sendCommand = sendCommand;
  }
}
