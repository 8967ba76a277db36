// node bench/gc-trace.mjs [config] [node flag ...]   (after npm run build)
//
// The service's garbage collector under the events phase's traffic: the service runs with
// `--trace-gc-nvp` (and any node flags given, e.g. --max-semi-space-size=32), the bench's events
// traffic (80% lessons, 20% api-calls, random seeded users) for BENCH_DURATION seconds at
// BENCH_CONNECTIONS, and it prints per young collection (scavenge) what V8 reports: bytes
// allocated since the one before, bytes that survived it, bytes promoted to the old generation,
// its pause; and per 1000 events how many there were. With them, two figures of the box: Redis
// commands per socket read (scripts' own commands included: how large a batch Redis runs before it
// writes any reply) and the share of the two cores left idle.
// What it found is in bench/README.md, "The twenty-fourth stop" (allocation-site pretenuring).
// Environment: BENCH_USERS (default 20000), BENCH_DURATION (8), BENCH_WARMUP (3), BENCH_CONNECTIONS (100),
// GC_ENTRY (another build's dist/main.js, e.g. a git worktree of an earlier commit, built).
// Reports; never gates.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { freePort, startEmbeddedRedis } from "../dist/embedded-redis.js";
import { runBench } from "./processes.mjs";
import { eventRequests, load, phaseSettings, seedUsers, SERVICE_EVENT_PATHS } from "./workload.mjs";

const [config = "bench/core-tenant.yaml", ...nodeFlags] = process.argv.slice(2);
const entry = process.env.GC_ENTRY ?? "dist/main.js";
const settings = { ...phaseSettings(20_000), duration: Number(process.env.BENCH_DURATION ?? 8) };
const cleanups = [];
const cleanup = async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
};

/** user, nice, system, idle, iowait, irq, softirq jiffies of the whole box. */
const boxJiffies = () => readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1, 8).map(Number);

/** The numbers of one `--trace-gc-nvp` line ("pause=1.1 ... gc=s ... promoted=123 ..."). */
function nvp(line) {
  return Object.fromEntries([...line.matchAll(/ ([a-z_.]+)=([\d.]+)/g)].map((m) => [m[1], Number(m[2])]));
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "laurel-gc-"));
  const server = await startEmbeddedRedis({ dir, appendOnly: false });
  cleanups.push(async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const redis = new Redis(server.url);
  cleanups.push(async () => redis.disconnect());
  const port = await freePort();
  const service = spawn("node", ["--trace-gc-nvp", ...nodeFlags, entry], {
    env: { ...process.env, REDIS_URL: server.url, PORT: String(port), LAUREL_CONFIG: config, LAUREL_WORKER: "off", LOG_LEVEL: "warn" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  cleanups.push(async () => {
    if (service.exitCode === null) await new Promise((resolve) => (service.once("exit", resolve), service.kill("SIGKILL")));
  });
  let counting = false;
  const young = [];
  let full = 0;
  let pending = "";
  service.stdout.on("data", (chunk) => {
    const lines = (pending + chunk.toString("utf8")).split("\n");
    pending = lines.pop();
    if (!counting) return;
    for (const line of lines) {
      if (line.includes(" gc=s ")) young.push(nvp(line));
      else if (line.includes(" gc=")) full++;
    }
  });
  const url = `http://127.0.0.1:${port}`;
  for (let tries = 0; ; tries++) {
    try {
      if ((await fetch(`${url}/healthz`)).ok) break;
    } catch {
      // not listening yet
    }
    if (tries > 200) throw new Error("the service did not start");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await seedUsers(url, settings);
  const traffic = eventRequests(settings.users, SERVICE_EVENT_PATHS);
  await load(url, traffic, { connections: settings.connections, duration: settings.warmup });
  const statsOf = async () => Object.fromEntries([...(await redis.info("stats")).matchAll(/^(\w+):(\d+)/gm)].map((m) => [m[1], Number(m[2])]));
  const [stats0, box0] = [await statsOf(), boxJiffies()];
  counting = true;
  const result = await load(url, traffic, { connections: settings.connections, duration: settings.duration });
  counting = false;
  const [stats1, box1] = [await statsOf(), boxJiffies()];
  const mean = (key) => young.reduce((sum, y) => sum + (y[key] ?? 0), 0) / Math.max(1, young.length);
  const kb = (bytes) => `${(bytes / 1024).toFixed(0)} KB`;
  const commands = stats1.total_commands_processed - stats0.total_commands_processed;
  const reads = stats1.total_reads_processed - stats0.total_reads_processed;
  const box = box1.map((v, i) => v - box0[i]);
  const boxTotal = box.reduce((a, b) => a + b, 0);
  console.log(`\nlaurel gc trace: ${entry}, ${config}, node flags: ${nodeFlags.join(" ") || "none"}; ${settings.connections} connections, ${settings.duration} s, ${settings.users} users`);
  console.log(`events: ${Math.round(result.rps)} req/s, p99 ${result.p99} ms`);
  console.log(`young collections: ${young.length} (${((1000 * young.length) / result.requests).toFixed(2)} per 1000 events), each: allocated ${kb(mean("allocated"))}, survived ${kb(mean("new_space_survived"))}, promoted ${kb(mean("promoted"))}, pause ${mean("pause").toFixed(1)} ms`);
  console.log(`allocated per event ${((mean("allocated") * young.length) / result.requests / 1024).toFixed(1)} KB; full collections: ${full}`);
  console.log(`Redis: ${(commands / Math.max(1, reads)).toFixed(0)} commands per socket read (scripts' own included)`);
  console.log(`box: user ${Math.round((100 * (box[0] + box[1])) / boxTotal)}%, system ${Math.round((100 * box[2]) / boxTotal)}%, softirq ${Math.round((100 * box[6]) / boxTotal)}%, idle ${Math.round((100 * (box[3] + box[4])) / boxTotal)}%`);
}

await runBench(main, cleanup);
