import { connect, type Socket } from "node:net";
import { Redis } from "ioredis";

export interface Observed {
  /** Commands the service sent, in order (name and arguments). */
  commands: string[][];
  /** Commands the scripts ran inside Redis (MONITOR shows them with source "lua"), lower-case names. */
  luaCalls: string[];
  /** The same commands with their arguments. */
  luaCommands: string[][];
}

/**
 * Every Redis command sent while `action` runs, seen with MONITOR on a second connection (a plain
 * socket: openMonitor below). Markers sent before and after bracket
 * exactly the action's commands, without sleeping. MONITOR sees every client: give the test
 * its own redis-server (startTestRedis) so that no other test file's commands fall in the window,
 * or pass `only`, the service's connection, to keep just its commands. Commands run inside
 * scripts show as from "lua" whichever client's script ran them: `only` keeps them all, so
 * filter those by key (the test's tenant) when other files may run scripts on the same server.
 */
export async function commandsDuring(redisUrl: string, action: () => Promise<unknown>, only?: Redis): Promise<Observed> {
  const seen: { args: string[]; source: string }[] = [];
  const monitor = await openMonitor(redisUrl, (args, source) => seen.push({ args, source }));
  const marker = new Redis(redisUrl);
  const begin = `laurel-monitor-begin-${Math.random()}`;
  const end = `laurel-monitor-end-${Math.random()}`;
  await marker.echo(begin);
  await action();
  await marker.echo(end);
  await new Promise<void>((resolve) => {
    const check = () => (seen.some((a) => a.args[1] === end) ? resolve() : setImmediate(check));
    check();
  });
  monitor.destroy();
  marker.disconnect();
  const own = only ? `127.0.0.1:${(only as unknown as { stream: { localPort: number } }).stream.localPort}` : null;
  const window = seen
    .slice(seen.findIndex((a) => a.args[1] === begin) + 1, seen.findIndex((a) => a.args[1] === end))
    .filter((a) => own === null || a.source === own || a.source === "lua");
  return {
    commands: window.filter((a) => a.source !== "lua").map((a) => a.args),
    luaCalls: window.filter((a) => a.source === "lua").map((a) => a.args[0]!.toLowerCase()),
    luaCommands: window.filter((a) => a.source === "lua").map((a) => a.args),
  };
}

/**
 * A MONITOR connection on a plain socket: every line after MONITOR's +OK is a command Redis ran,
 * parsed as ioredis parses them (args split at '" "', \" unescaped; the source is "lua" for a
 * script's commands). ioredis' own monitor() enters its monitoring state a microtask after the +OK,
 * so monitor lines that arrive in the same read as the +OK (a busy server: test files running
 * beside this one) were taken for replies to commands it never sent: "Command queue state error".
 */
async function openMonitor(redisUrl: string, onCommand: (args: string[], source: string) => void): Promise<Socket> {
  const { hostname, port } = new URL(redisUrl);
  const socket = connect(Number(port), hostname);
  let pending = "";
  let monitoring = false;
  await new Promise<void>((resolve, reject) => {
    socket.once("error", reject);
    socket.on("data", (chunk: Buffer) => {
      pending += chunk.toString("latin1");
      let end: number;
      while ((end = pending.indexOf("\r\n")) >= 0) {
        const line = pending.slice(0, end);
        pending = pending.slice(end + 2);
        if (!monitoring) {
          if (line !== "+OK") return reject(new Error(`MONITOR answered ${line}`));
          monitoring = true;
          resolve();
          continue;
        }
        // "+<time> [<db> <source>] "<arg>" "<arg>" ..."
        const argIndex = line.indexOf('"');
        const space = line.indexOf(" ");
        const source = line.slice(space + 2, argIndex - 2).split(" ")[1]!;
        const args = line.slice(argIndex + 1, -1).split('" "').map((arg) => arg.replace(/\\"/g, '"'));
        onCommand(args, source);
      }
    });
    socket.write("MONITOR\r\n");
  });
  return socket;
}
