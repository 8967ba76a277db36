import { connect, type Socket } from "node:net";
import { Redis } from "ioredis";

export interface Observed {
  /** Commands the service sent, in order (name and arguments). */
  commands: string[][];
  /** Commands the scripts ran inside Redis (MONITOR shows them with source "lua"), lower-case names. */
  luaCalls: string[];
  /** The same commands with their arguments. */
  luaCommands: string[][];
  /**
   * Each script call the service sent (FCALL, EVALSHA, EVAL, lower-case name first), with the
   * commands that ran inside it: Redis 7.0 shows a script's call, then its commands, and runs
   * nothing else in between. For one call's declared keys against the keys it touched.
   */
  scriptCalls: { call: string[]; touched: string[][] }[];
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
  const scriptCalls: Observed["scriptCalls"] = [];
  let current: Observed["scriptCalls"][number] | null = null;
  for (const a of window) {
    if (a.source === "lua") current?.touched.push(a.args);
    else if (/^(fcall|fcall_ro|evalsha|evalsha_ro|eval|eval_ro)$/i.test(a.args[0]!)) scriptCalls.push((current = { call: [a.args[0]!.toLowerCase(), ...a.args.slice(1)], touched: [] }));
    else current = null;
  }
  return {
    scriptCalls,
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

/** A script call's declared keys (FCALL and EVALSHA alike: name, function or sha, numkeys, keys...) and its other arguments. */
export function keysOfCall(call: readonly string[]): { declared: string[]; args: string[] } {
  const n = Number(call[2]);
  return { declared: call.slice(3, 3 + n), args: call.slice(3 + n) };
}

/** The hash tag a key starts with ("{t:s}"). */
export const hashTagOf = (key: string): string => key.slice(0, key.indexOf("}") + 1);
