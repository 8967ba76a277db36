// Child processes of the bench (the service, the baseline): start, wait until ready, stop.
// Every child is registered before anything can fail, so stopAll() and the exit hook find it.
import { execFile, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { freePort, startEmbeddedRedis } from "../dist/embedded-redis.js";

export class Children {
  #list = [];

  constructor() {
    // Last resort when the bench dies without reaching its finally block.
    process.once("exit", () => {
      for (const { child } of this.#list) if (running(child)) child.kill("SIGKILL");
    });
  }

  /** Spawns `cmd args` and resolves once GET readyUrl answers 200. */
  async start(name, cmd, args, env, readyUrl, timeoutMs = 20_000) {
    const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    this.#list.push({ name, child });
    forwardOutput(name, child);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (!running(child)) throw new Error(`${name} exited during start (code ${child.exitCode}, signal ${child.signalCode})`);
      try {
        const res = await fetch(readyUrl);
        await res.arrayBuffer();
        if (res.ok) return { name, pid: child.pid };
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`${name} not ready at ${readyUrl} after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** SIGTERM the children started under `name`, SIGKILL after 5 s. */
  async stop(name) {
    await Promise.all(this.#list.filter((c) => c.name === name).map(({ child }) => stopChild(child)));
  }

  /** SIGTERM every child still running, SIGKILL after 5 s. */
  async stopAll() {
    await Promise.all(this.#list.map(({ child }) => stopChild(child)));
  }
}

/**
 * Shows a child's first lines of output, prefixed with its name, then only a count: a service
 * that fails every request logs once per request, which would bury the report.
 */
const MAX_LINES = 20;
function forwardOutput(name, child) {
  let lines = 0;
  const onData = (chunk) => {
    for (const line of chunk.toString("utf8").split("\n")) {
      if (line === "") continue;
      lines++;
      if (lines <= MAX_LINES) process.stderr.write(`[${name}] ${line.slice(0, 500)}\n`);
    }
  };
  child.stdout.on("data", onData);
  child.stderr.on("data", onData);
  child.once("exit", () => {
    if (lines > MAX_LINES) process.stderr.write(`[${name}] ${lines - MAX_LINES} more lines of output not shown\n`);
  });
}

function stopChild(child) {
  if (!running(child)) return undefined;
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

function running(child) {
  return child.exitCode === null && child.signalCode === null;
}

/**
 * How many sockets listen on the port (`ss`, iproute2). Processes sharing a port
 * (LAUREL_REUSE_PORT=1) answer each other's readiness checks, so a bench that starts one waits
 * for the count to grow.
 */
export function listenerCount(port) {
  return new Promise((resolve, reject) =>
    execFile("ss", ["-Hltn", `sport = :${port}`], { encoding: "utf8" }, (err, stdout) => (err ? reject(err) : resolve(stdout.split("\n").filter(Boolean).length))),
  );
}

const CLK_TCK = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout) || 100;

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat. */
export function cpuSeconds(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" "); // fields[0] is field 3 (state)
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK; // fields 14 utime, 15 stime
}

/** Runs a bench's main, then its cleanup whatever happened; exits 0, or 1 when the bench could not run (it never gates on figures). */
export async function runBench(main, cleanup) {
  let exitCode = 0;
  try {
    await main();
  } catch (err) {
    console.error(`\nbench failed: ${err instanceof Error ? err.stack : err}`);
    exitCode = 1;
  } finally {
    await cleanup();
  }
  process.exit(exitCode);
}

/** Extra node flags for the service only, e.g. BENCH_SERVICE_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" (NODE_OPTIONS refuses --cpu-prof). */
export function serviceNodeArgs() {
  return (process.env.BENCH_SERVICE_NODE_ARGS ?? "").split(/\s+/).filter(Boolean);
}

/**
 * BENCH_PIN=1: Redis alone on CPU 0, every other process of the bench (the service, the
 * baseline, this process with autocannon) on the others, with `taskset` (util-linux). On a
 * 2-core box the three otherwise preempt each other, and a Redis preempted inside a script counts
 * the wait as script time (commandstats measure wall time): the pinned run says what the script
 * costs when Redis has its own core, as it has in production. The CPUs are those this process
 * may run on (a restricted cpuset may allow 2-5 only): Redis gets the first. Returns a description
 * for the report, or null when not asked for; throws when it cannot (one CPU, no taskset), and the
 * bench exits 1.
 */
export function pinProcesses(redisPid, otherPids) {
  if (process.env.BENCH_PIN !== "1") return null;
  const cpus = allowedCpus();
  if (cpus.length < 2) throw new Error(`BENCH_PIN=1 needs at least 2 CPUs (this process may run on ${cpus.join(",") || "one"})`);
  const pin = (pid, list) => {
    const result = spawnSync("taskset", ["-a", "-p", "-c", list, String(pid)], { encoding: "utf8" });
    if (result.status !== 0) throw new Error(`taskset failed for pid ${pid}: ${result.error?.message ?? result.stderr.trim()}`);
  };
  const [redisCpu, ...rest] = cpus;
  const others = rest.join(",");
  pin(redisPid, String(redisCpu));
  for (const pid of otherPids) pin(pid, others);
  return `Redis pinned to CPU ${redisCpu}, the service, the baseline and the load generator to CPU ${others}`;
}

/**
 * The CPUs this process may run on, from /proc/self/status's Cpus_allowed_list ("0-1", "2-5,8");
 * without /proc, 0 .. nproc - 1.
 */
export function allowedCpus() {
  let list;
  try {
    list = /^Cpus_allowed_list:\s*(\S+)$/m.exec(readFileSync("/proc/self/status", "utf8"))?.[1];
  } catch {
    list = undefined;
  }
  if (!list) {
    const n = Number(spawnSync("nproc", { encoding: "utf8" }).stdout) || 1;
    return Array.from({ length: n }, (_, i) => i);
  }
  const cpus = [];
  for (const part of list.split(",")) {
    const [from, to = from] = part.split("-").map(Number);
    for (let cpu = from; cpu <= to; cpu++) cpus.push(cpu);
  }
  return cpus;
}

/**
 * A redis-server of the bench's own, without persistence, in a temporary directory: `server`, and
 * `stop()`, which stops it and removes the directory (safe to call twice).
 */
export async function scratchRedis(prefix) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const server = await startEmbeddedRedis({ dir, appendOnly: false });
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  return { server, stop };
}

/**
 * One service (`node dist/main.js`, with `env` over REDIS_URL and PORT) on a scratch redis-server
 * of its own (scratchRedis): its `url`, a client of that Redis (`redis`), and `stop()`, which stops
 * both and removes the server's directory (safe to call twice, and called when the start fails).
 */
export async function serviceOnScratchRedis(prefix, env) {
  const children = new Children();
  const scratch = await scratchRedis(prefix);
  const redis = new Redis(scratch.server.url);
  const stop = async () => {
    redis.disconnect();
    await children.stopAll();
    await scratch.stop();
  };
  try {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    await children.start("service", "node", ["dist/main.js"], { REDIS_URL: scratch.server.url, PORT: String(port), ...env }, `${url}/healthz`);
    return { url, redis, redisUrl: scratch.server.url, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
