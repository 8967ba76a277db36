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
 * Every Redis command sent while `action` runs, seen with MONITOR on a second connection
 * (ioredis' test/functional/scripting.ts does the same). Markers sent before and after bracket
 * exactly the action's commands, without sleeping. MONITOR sees every client: give the test
 * its own redis-server (startTestRedis) so that no other test file's commands fall in the window,
 * or pass `only`, the service's connection, to keep just its commands. Commands run inside
 * scripts show as from "lua" whichever client's script ran them: `only` keeps them all, so
 * filter those by key (the test's tenant) when other files may run scripts on the same server.
 */
export async function commandsDuring(redisUrl: string, action: () => Promise<unknown>, only?: Redis): Promise<Observed> {
  const monitor = await new Redis(redisUrl).monitor();
  const seen: { args: string[]; source: string }[] = [];
  monitor.on("monitor", (_time: string, args: string[], source: string) => seen.push({ args, source }));
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
  monitor.disconnect();
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
