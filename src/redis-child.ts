import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { Redis, type RedisOptions } from "ioredis";

/**
 * A redis-server child process on a port found free: spawned, waited for until it answers as
 * itself, and spawned again on another port when that one proves taken. The service's embedded
 * server (embedded-redis.ts) runs through it, and so do the tests' sentinels and TLS servers
 * (test/helpers), whose ports are found free the same way and can be taken the same way.
 */

/** Whether `setpriv --pdeathsig` runs here (util-linux, on every Debian; not on macOS). */
export function setprivDeathSignal(): boolean {
  return spawnSync("setpriv", ["--pdeathsig", "TERM", "--", "true"], { stdio: "ignore" }).status === 0;
}

export interface RedisChildOptions {
  /** redis-server's arguments for the port it is to listen on (a sentinel's config file, written for that port, then `--sentinel`). */
  args: (port: number) => readonly string[];
  /** A port the caller chose: that one and no other. */
  port?: number;
  /** Without `port`: how a free port is found, at first and again when one proves taken. */
  pickPort: () => Promise<number>;
  /** A session and process group of its own (the service's server: see spawnServer). */
  ownSession?: boolean;
  /** The readiness probe's own options: a TLS server's CA and client certificate. */
  probe?: RedisOptions;
}

/** A redis-server that answers on `port` as itself. */
export interface RedisChild {
  port: number;
  child: ChildProcess;
  log: RedisLog;
  /** Set once the server is being stopped on purpose: its exit and last lines are then no news. */
  state: { stopping: boolean };
  /** SIGTERM, and its exit waited for (at once when it has exited). */
  stop(): Promise<void>;
}

/**
 * Starts a redis-server with `args(port)` and waits until it answers as itself. A port found
 * free can be taken before the server binds it (any listen on port 0 on the host in between): the
 * server then exits "Address already in use", or, where another Redis took it, the probe finds
 * that one (waitForRedis). Either way a new port, a few times; never for a port the caller chose.
 * A server that never became ready is stopped, not left behind.
 */
export async function startRedisChild(opts: RedisChildOptions): Promise<RedisChild> {
  let port = opts.port ?? (await opts.pickPort());
  for (let attempt = 1; ; attempt++) {
    const server = spawnServer(opts.args(port), opts.ownSession === true);
    try {
      await waitForRedis(`redis://127.0.0.1:${port}`, server.child, server.log.lastLine, opts.probe);
    } catch (err) {
      server.abandon();
      if (err instanceof PortTaken && opts.port === undefined && attempt < 5) {
        port = await opts.pickPort();
        continue;
      }
      throw err;
    }
    const { child, log, state, stop } = server;
    return { port, child, log, state, stop };
  }
}

/** A redis-server spawned (spawnServer), not yet known to be ready. */
interface SpawnedServer {
  child: ChildProcess;
  log: RedisLog;
  state: { stopping: boolean };
  stop: () => Promise<void>;
  /** Gives up a server that did not become ready: stopped, not left behind. */
  abandon: () => void;
}

function spawnServer(args: readonly string[], ownSession: boolean): SpawnedServer {
  // ownSession (the service's server): a session and process group of its own, so that a Ctrl-C
  // in the terminal (a SIGINT to the foreground group) reaches the service alone, which answers
  // what it has taken, closes its connections and stops the server last (stop(), or the exit
  // handler below on any other way out). In the service's group the server could exit first, and
  // the stop then logged connection errors and waited LAUREL_DRAIN + 5 s for connections that
  // could not close. A signal that kills the service outright (SIGKILL, to it or its group, the
  // OOM killer) runs no handler: every server is started through `setpriv --pdeathsig TERM` (util-
  // linux), which asks the kernel to send it SIGTERM when the process that started it dies (Redis
  // then writes its AOF and exits), and execs redis-server in place (same pid). Where setpriv is
  // missing the server runs on orphaned, and the service's next start stops it (claimDataDir).
  // The test run's and the bench's servers take the death signal too (not the session): a run cut
  // short (a Ctrl-C, a timeout's SIGKILL) left them running. The death signal follows the thread
  // that spawned the server: the main thread of the service, of the bench, and of each of
  // vitest's forks, alive as long as their process (a spawn from a worker thread would be
  // signalled when that thread ends).
  // Its log (stdout) is read: for the last line a server that would not start wrote (a port it
  // could not bind, a damaged AOF: what it says to run), and, once it is ready and until it is
  // stopped, for the embedded server's `onLog` (a slow disk's fsync, a SHUTDOWN someone sent it).
  const [command, commandArgs] = setprivDeathSignal() ? ["setpriv", ["--pdeathsig", "TERM", "--", "redis-server", ...args]] : ["redis-server", [...args]];
  const child: ChildProcess = spawn(command, commandArgs, { stdio: ["ignore", "pipe", "inherit"], detached: ownSession });
  const log = followLog(child);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const state = { stopping: false };
  const stopOnExit = (): void => {
    state.stopping = true;
    child.kill("SIGTERM");
  };
  process.once("exit", stopOnExit);
  return {
    child,
    log,
    state,
    async stop() {
      state.stopping = true;
      process.removeListener("exit", stopOnExit);
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        await exited;
      }
    },
    abandon: () => {
      process.removeListener("exit", stopOnExit);
      child.kill("SIGTERM");
    },
  };
}

/** "27721:M 05 Dec 2026 13:14:18.657 # Bad file format ..." → the message after the level mark. */
const logMessage = (line: string): string => line.replace(/^\d+:[A-Z] .*? [.\-*#] /, "");

/**
 * A redis-server's stdout (its log), read for the server's life (a pipe left unread would fill
 * and stall it). `lastLine`: the last line it wrote, without its pid and time, or null; asked once
 * the server exited, it waits for the log's end first. `forward`: each complete line from then
 * on. `ended`: the log read to its end ('exit' can come before the last output is read), or a
 * second passed (a process the server forked could hold the pipe open).
 */
export interface RedisLog {
  lastLine: () => Promise<string | null>;
  forward: (onLine: (line: string) => void) => void;
  ended: () => Promise<void>;
}

function followLog(child: ChildProcess): RedisLog {
  let tail = "";
  let partial = "";
  let onLine: ((line: string) => void) | null = null;
  const stdout = child.stdout!;
  stdout.setEncoding("utf8");
  stdout.on("data", (chunk: string) => {
    tail = (tail + chunk).slice(-4096);
    if (onLine === null) return;
    const lines = (partial + chunk).split("\n");
    partial = lines.pop()!;
    for (const line of lines) if (line.trim() !== "") onLine(logMessage(line.trimEnd()));
  });
  const closed = new Promise<void>((resolve) => stdout.once("close", resolve));
  const ended = async (): Promise<void> => {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([closed, new Promise<void>((resolve) => (timer = setTimeout(resolve, 1000)))]);
    clearTimeout(timer);
  };
  return {
    ended,
    forward: (f) => {
      onLine = f;
    },
    lastLine: async () => {
      await ended();
      const line = tail.trimEnd().split("\n").at(-1);
      return line ? logMessage(line) : null;
    },
  };
}

/** The port a server was spawned on is another process's (waitForRedis): startRedisChild tries another. */
class PortTaken extends Error {}

/**
 * Waits until a redis-server just spawned answers at `address` (a URL, a port or a socket path),
 * for up to 30 s; fails at once if the process exits, with the last line of its log when
 * `lastLogLine` gives one. Its data set may still be loading (INFO answers while a large AOF
 * loads): the start's PING wait (waitForRedisOrExit, LAUREL_REDIS_WAIT) waits for that, not
 * this one's 30 s.
 * `probe`: options of the probe's connection (a TLS server's).
 */
export async function waitForRedis(address: string | number, child: ChildProcess, lastLogLine: () => Promise<string | null> = async () => null, probe: RedisOptions = {}): Promise<void> {
  const options = { ...probe, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null };
  // Two calls for ioredis' overloads (a port, or a URL or socket path).
  const client = typeof address === "number" ? new Redis(address, options) : new Redis(address, options);
  client.on("error", () => undefined); // refused while the server starts: the loop retries
  const exited = new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : child.once("exit", () => resolve())));
  try {
    for (let attempt = 0; ; attempt++) {
      if (child.exitCode !== null) {
        const said = await lastLogLine();
        const message = `redis-server exited with code ${child.exitCode}${said ? `: ${said}` : ""}`;
        // Redis 7's last words when it cannot bind (the line before says why: in use, most often).
        throw /Failed listening on port|Address already in use/.test(said ?? "") ? new PortTaken(message) : new Error(message);
      }
      let answering: string | null = null;
      try {
        const asked = (async () => {
          await client.connect();
          return await client.info("server");
        })();
        asked.catch(() => undefined); // given up below when the server exits first
        // Raced with the server's exit: a port taken by something that accepts connections but
        // never answers (not a Redis) held the probe, and the start, for ever.
        answering = await Promise.race([asked, exited.then(() => null)]);
      } catch {
        client.disconnect();
      }
      if (answering !== null) {
        // Ours (its pid: setpriv execs redis-server in place), not a server that took the port.
        const pid = Number(/process_id:(\d+)/.exec(answering)?.[1]);
        if (child.pid === undefined || pid === child.pid) return;
        throw new PortTaken(`another redis-server (pid ${pid}) answers at ${address}`);
      }
      if (attempt > 300) throw new Error("redis-server did not become ready in 30 s");
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    client.disconnect();
  }
}
