import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { Redis } from "ioredis";

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

export function redisServerAvailable(): boolean {
  return spawnSync("redis-server", ["--version"], { stdio: "ignore" }).status === 0;
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
 * `onExit`: called when the server exits other than by stop() (a crash, the OOM killer, a
 * SIGKILL), once it has been ready; with the exit code, or the signal that ended it.
 */
export async function startEmbeddedRedis(opts: { dir: string; appendOnly?: boolean; port?: number; onExit?: (how: { code: number | null; signal: NodeJS.Signals | null }) => void }): Promise<EmbeddedRedis> {
  if (!redisServerAvailable()) throw new Error(INSTALL_HINT);
  mkdirSync(opts.dir, { recursive: true });
  const replacedOrphan = await claimDataDir(opts.dir);
  const port = opts.port ?? (await freePort());
  const args = [
    "--port", String(port),
    "--bind", "127.0.0.1",
    "--dir", opts.dir,
    "--save", "",
    "--appendonly", opts.appendOnly === false ? "no" : "yes",
    "--appendfsync", "everysec",
    "--daemonize", "no",
    "--loglevel", "warning",
  ];
  const child: ChildProcess = spawn("redis-server", args, { stdio: ["ignore", "ignore", "inherit"] });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = `redis://127.0.0.1:${port}`;
  await waitForRedis(url, child);
  const occupantFile = join(opts.dir, OCCUPANT_FILE);
  writeFileSync(occupantFile, JSON.stringify({ service: process.pid, redis: child.pid!, port } satisfies Occupant));
  let stopping = false;
  if (opts.onExit) {
    const onExit = opts.onExit;
    child.once("exit", (code, signal) => {
      if (!stopping) onExit({ code, signal });
    });
  }
  const stopOnExit = (): void => {
    stopping = true;
    child.kill("SIGTERM");
  };
  process.once("exit", stopOnExit);
  return {
    url,
    replacedOrphan,
    async stop() {
      stopping = true;
      process.removeListener("exit", stopOnExit);
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        await exited;
      }
      rmSync(occupantFile, { force: true });
    },
  };
}

/** Who runs the embedded server of a data directory: written there once it is ready, removed at its stop. */
interface Occupant {
  service: number;
  redis: number;
  port: number;
}
const OCCUPANT_FILE = "laurel-embedded.json";

/**
 * One embedded server per data directory: two redis-servers on one AOF each rewrite it as their
 * own, and whatever one of them acknowledged is lost. A service killed outright (SIGKILL, the OOM
 * killer) cannot stop its child, whose server then runs on, orphaned; the next start stops it
 * first (SIGTERM: Redis writes its AOF and exits) and returns its pid. A directory whose service
 * still runs is refused. A record whose processes are gone (or are others now, by their command
 * line where /proc tells) is stale and ignored.
 */
async function claimDataDir(dir: string): Promise<number | null> {
  let occupant: Occupant;
  try {
    occupant = JSON.parse(readFileSync(join(dir, OCCUPANT_FILE), "utf8")) as Occupant;
  } catch {
    return null;
  }
  if (!running(occupant.redis, "redis-server")) return null;
  if (occupant.service !== process.pid && running(occupant.service, "node")) {
    throw new Error(
      `${dir} is in use by a running Laurel (pid ${occupant.service}, its redis-server pid ${occupant.redis} on port ${occupant.port}): stop it first, or give this one another LAUREL_DATA_DIR`,
    );
  }
  process.kill(occupant.redis, "SIGTERM");
  for (let waited = 0; running(occupant.redis, "redis-server"); waited += 50) {
    if (waited > 30_000) throw new Error(`the redis-server an earlier Laurel left on ${dir} (pid ${occupant.redis}) did not stop in 30 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return occupant.redis;
}

/** Whether `pid` is a live process whose command line names `command` (unchecked without /proc). */
function running(pid: number, command: string): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  let commandLine: string;
  try {
    commandLine = readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return process.platform !== "linux";
  }
  // A zombie (exited, not yet reaped) has an empty command line.
  return commandLine.includes(command);
}

/**
 * Waits until a redis-server just spawned answers at `address` (a URL, a port or a socket path)
 * with its data set loaded (AOF loading answers LOADING to commands), for up to 30 s; fails at
 * once if the process exits.
 */
export async function waitForRedis(address: string | number, child: ChildProcess): Promise<void> {
  const options = { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null };
  // Two calls for ioredis' overloads (a port, or a URL or socket path).
  const probe = typeof address === "number" ? new Redis(address, options) : new Redis(address, options);
  probe.on("error", () => undefined); // refused while the server starts: the loop retries
  try {
    for (let attempt = 0; ; attempt++) {
      if (child.exitCode !== null) throw new Error(`redis-server exited with code ${child.exitCode}`);
      try {
        await probe.connect();
        const info = await probe.info("persistence");
        if (/loading:0/.test(info)) return;
      } catch {
        probe.disconnect();
      }
      if (attempt > 300) throw new Error("redis-server did not become ready in 30 s");
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    probe.disconnect();
  }
}
