import { spawnSync } from "node:child_process";
import { linkSync, mkdirSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { Redis } from "ioredis";
import { startRedisChild, type RedisChild } from "./redis-child.js";

/**
 * When REDIS_URL is unset, Laurel runs its own redis-server as a child process with its data
 * under the project (data/redis, AOF on, fsync every second), so a new user can start with one
 * command. Production should point REDIS_URL at a managed Redis.
 */
export interface EmbeddedRedis {
  url: string;
  /** The pid of a redis-server an earlier, killed service left on this directory, stopped first (claimDataDir). */
  replacedOrphan: number | null;
  stop(): Promise<void>;
}

export const INSTALL_HINT =
  "redis-server was not found on PATH. Install it (Debian/Ubuntu: sudo apt-get install -y redis-server; macOS: brew install redis) or set REDIS_URL to a running Redis 7.";

/**
 * Whether `redis-server --version` runs. A probe ended by a signal found the program: a Ctrl-C
 * while it ran reaches it too (it is in the service's process group), and was reported as
 * "redis-server was not found" with exit 1, before the start's own handler could stop it (the
 * signal waits while spawnSync blocks; the failed probe's exit came first).
 */
export function redisServerAvailable(): boolean {
  const probe = spawnSync("redis-server", ["--version"], { stdio: "ignore" });
  return probe.status === 0 || probe.signal !== null;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

/**
 * A free port below the kernel's ephemeral range, for a server stopped and started again on the
 * same port (its clients must find it there again; tests and bench/chaos.mjs), for an address
 * that must stay unanswered, and for a service process a test starts (its start refuses a taken
 * port). freePort() asks the kernel (listen on port 0), which hands out ports of the ephemeral
 * range, as it does for every outgoing connection: between a stop and the restart, any
 * connection's local end could take the port, and the restart failed with EADDRINUSE (rare, but a
 * failing CI run). The kernel never hands out a port below the range, so only a program that
 * names this very port could take it. Picked at random, checked by binding it.
 */
export async function portOutsideEphemeralRange(): Promise<number> {
  const low = ephemeralLow();
  const from = Math.max(10_000, low - 16_384);
  if (low - from < 1_000) return freePort(); // an unusual range: fall back to the kernel's choice
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = from + Math.floor(Math.random() * (low - from));
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port found in ${from}-${low - 1}`);
}

/** The first port of the ephemeral range (net.ipv4.ip_local_port_range), 32768 where it cannot be read. */
function ephemeralLow(): number {
  try {
    return Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]) || 32_768;
  } catch {
    return 32_768;
  }
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/**
 * `onExit`: called when the server exits other than by stop() (a crash, the OOM killer, a
 * SIGKILL), once it has been ready; with the exit code, or the signal that ended it.
 */
export async function startEmbeddedRedis(opts: {
  dir: string;
  appendOnly?: boolean;
  /** The AOF's fsync policy (LAUREL_FSYNC): `everysec` (the default) or `always`. */
  fsync?: "everysec" | "always";
  port?: number;
  ownSession?: boolean;
  onExit?: (how: { code: number | null; signal: NodeJS.Signals | null }) => void;
  /** Each line the server logs (warnings), without its pid and time, from ready until stop(). */
  onLog?: (line: string) => void;
  /** More redis-server arguments, after Laurel's own (the tests' cluster-mode node: test/helpers/redis-server.ts). */
  serverArgs?: readonly string[];
  /** Without `port`: how a free port is found (freePort; a test gives one that first finds a taken port). */
  pickPort?: () => Promise<number>;
}): Promise<EmbeddedRedis> {
  if (!redisServerAvailable()) throw new Error(INSTALL_HINT);
  mkdirSync(opts.dir, { recursive: true });
  const replacedOrphan = await claimDataDir(opts.dir);
  const occupantFile = join(opts.dir, OCCUPANT_FILE);
  const args = (port: number): string[] => [
    "--port", String(port),
    "--bind", "127.0.0.1",
    "--dir", opts.dir,
    "--save", "",
    "--appendonly", opts.appendOnly === false ? "no" : "yes",
    "--appendfsync", opts.fsync ?? "everysec",
    "--daemonize", "no",
    "--loglevel", "warning",
    ...(opts.serverArgs ?? []),
  ];
  let server: RedisChild;
  try {
    // On another port when the one found free proves taken (redis-child.ts); never for `port`.
    server = await startRedisChild({ args, port: opts.port, pickPort: opts.pickPort ?? freePort, ownSession: opts.ownSession });
  } catch (err) {
    releaseDataDir(occupantFile);
    throw err;
  }
  const { port, child, log, state } = server;
  const url = `redis://127.0.0.1:${port}`;
  replaceFile(occupantFile, JSON.stringify({ service: process.pid, redis: child.pid!, port } satisfies Occupant));
  if (opts.onLog) {
    const onLog = opts.onLog;
    log.forward((line) => {
      if (!state.stopping) onLog(line);
    });
  }
  if (opts.onExit) {
    const onExit = opts.onExit;
    child.once("exit", (code, signal) => {
      // After the log's last lines (why it exited), which can be read after the exit is seen.
      if (!state.stopping) void log.ended().then(() => onExit({ code, signal }));
    });
  }
  return {
    url,
    replacedOrphan,
    async stop() {
      await server.stop();
      releaseDataDir(occupantFile);
    },
  };
}

/** Who runs the embedded server of a data directory: claimed before the spawn, completed once it is ready, removed at its stop. */
interface Occupant {
  service: number;
  /** Absent while the server starts. */
  redis?: number;
  port?: number;
}
const OCCUPANT_FILE = "laurel-embedded.json";

/**
 * One embedded server per data directory: two redis-servers on one AOF each rewrite it as their
 * own, and whatever one of them acknowledged is lost. The directory is claimed before the server
 * is spawned, by creating its record exclusively (a hard link: of two starts at once, one wins); the
 * server's pid and port are added once it is ready. A record found there is the holder's:
 * - its server answers on the recorded port as that pid with this directory, and its service
 *   still runs: the directory is in use, and the start is refused;
 * - that server runs (answering, or not: stopping, stopped, hung) but its service is gone (killed
 *   outright: SIGKILL to it or its process group, the OOM killer; on a host without setpriv its
 *   child runs on orphaned, and with it the death signal may still be at work): the server is
 *   stopped (SIGTERM: Redis writes its AOF and exits), waited for, and its pid returned;
 * - no such server (the record of a service that exited without stopping it, or of one still
 *   starting whose service is gone): stale, replaced. A record without a server whose service
 *   runs is a start under way: refused.
 * The server is identified by asking it (INFO's process_id, CONFIG GET dir), not by its pid alone,
 * which the system may have given to another process since.
 */
async function claimDataDir(dir: string): Promise<number | null> {
  const file = join(dir, OCCUPANT_FILE);
  let stopped: number | null = null;
  for (let attempt = 0; attempt < 3; attempt++) {
    if (createWhole(file, JSON.stringify({ service: process.pid } satisfies Occupant))) return stopped;
    let holder: Occupant | null = null;
    try {
      holder = JSON.parse(readFileSync(file, "utf8")) as Occupant;
    } catch {
      // Unreadable or half written: the holder is judged by what runs, which is nothing known.
    }
    const server = holder?.redis !== undefined && holder.port !== undefined ? await serverOf(holder.port, holder.redis, dir) : "silent";
    // The recorded server still running without answering: one stopping (its service was killed
    // just now and the death signal reached it: it is writing its AOF), or one stopped or busy.
    // Known by its pid and the title Redis gives itself, "redis-server 127.0.0.1:<port>". Taken
    // for gone, a new server would open the AOF while the old one still writes to it. A server
    // that answers as another (its pid given to another since) is not this directory's.
    const serverRuns = server === "ours" || (server === "silent" && holder?.redis !== undefined && alive(holder.redis, `redis-server 127.0.0.1:${holder.port}`));
    const serviceRuns = holder !== null && holder.service !== process.pid && alive(holder.service, "node");
    if (serviceRuns && (serverRuns || holder!.redis === undefined)) {
      throw new Error(`${dir} is in use by a running Laurel (pid ${holder!.service}${holder!.port ? `, its redis-server on port ${holder!.port}` : ""}): stop it first, or give this one another LAUREL_DATA_DIR`);
    }
    if (serverRuns) {
      stopped = holder!.redis!;
      try {
        process.kill(stopped, "SIGTERM");
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ESRCH") throw err; // it finished stopping since
      }
      for (let waited = 0; alive(stopped, "redis-server"); waited += 50) {
        if (waited > 30_000) throw new Error(`the redis-server an earlier Laurel left on ${dir} (pid ${stopped}) did not stop in 30 s`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    // Stale, or its server now stopped: removed, and claimed again (another start may win the race).
    rmSync(file, { force: true });
  }
  throw new Error(`could not claim ${dir} for the embedded redis-server (another start kept taking it)`);
}

/**
 * Creates `file` with `text` unless it exists; false when it does. The record appears whole:
 * written to a file of this process's, then hard-linked to its name (which fails if the name
 * exists). With open(O_EXCL) and a write, a start that came between the two read an empty record,
 * took it for stale and removed it, and both starts ran a redis-server on the directory (seen
 * once in a CI run of startup.test.ts's "two starts at once").
 */
function createWhole(file: string, text: string): boolean {
  const own = `${file}.${process.pid}`;
  writeFileSync(own, text);
  try {
    linkSync(own, file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  } finally {
    rmSync(own, { force: true });
  }
}

/** Replaces `file` with `text` in one step (a rename): a reader sees the old record or the new, never a truncated one. */
function replaceFile(file: string, text: string): void {
  const own = `${file}.${process.pid}`;
  writeFileSync(own, text);
  renameSync(own, file);
}

/** Removes the data directory's record if it is still this process's. */
function releaseDataDir(file: string): void {
  try {
    if ((JSON.parse(readFileSync(file, "utf8")) as Occupant).service !== process.pid) return;
  } catch {
    return;
  }
  rmSync(file, { force: true });
}

/**
 * Whether the redis-server on `port` answers as process `pid` with its data in `dir` ("ours"), as
 * another ("other"), or not at all ("silent": refused, closed, or no answer in 2 s).
 */
async function serverOf(port: number, pid: number, dir: string): Promise<"ours" | "other" | "silent"> {
  // commandTimeout: a server that takes the connection but never answers (stopped, SIGSTOP, or
  // hung) is no answer; without it the start waited on INFO for ever.
  const probe = new Redis(port, "127.0.0.1", { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 2000, commandTimeout: 2000 });
  probe.on("error", () => undefined);
  let info: string;
  let servedDir: string;
  try {
    await probe.connect();
    info = await probe.info("server");
    [, servedDir] = (await probe.config("GET", "dir")) as [string, string];
  } catch {
    return "silent";
  } finally {
    probe.disconnect();
  }
  // Redis reports the directory it changed into, links resolved.
  return Number(/process_id:(\d+)/.exec(info)?.[1]) === pid && servedDir === realpathSync(dir) ? "ours" : "other";
}

/**
 * Whether `pid` is a live process whose command line names `command` (where /proc tells; a
 * zombie, exited but not reaped, has an empty one). Without /proc, whether the pid exists.
 */
function alive(pid: number, command: string): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(command);
  } catch {
    return process.platform !== "linux";
  }
}
