// node bench/compare.mjs <config A> <config B>: the events phase of two tenant configurations,
// alternated (A B, B A, A B...), for the "within X% of the core figure" targets (issues 3, 5). On a shared 2-core
// VM the machine's speed drifts by a third within minutes (bench/README.md), so two separate
// `npm run bench` runs compare the box as much as the configs. Here both services run at once,
// each on its own redis-server with its own seeded users, and the measured runs alternate
// A B, B A, A B...: each pair shares the box's state of the moment. Prints every pair's ratio B ÷ A
// and their median. Reports; never gates (exit 1 only when it cannot run).
//
// Environment: BENCH_PAIRS (default 5), BENCH_DURATION (s per run, default 8), BENCH_WARMUP
// (default 2), BENCH_CONNECTIONS (default 100), BENCH_USERS (default 100000), BENCH_JSON.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { freePort, startEmbeddedRedis } from "../dist/embedded-redis.js";
import { Children, runBench, serviceNodeArgs } from "./processes.mjs";
import { median } from "./report.mjs";
import { eventRequests, load, phaseSettings, seedUsers, SERVICE_EVENT_PATHS } from "./workload.mjs";

const [configA, configB] = process.argv.slice(2).map((p) => p && resolve(p));
if (!configA || !configB) {
  console.error("usage: node bench/compare.mjs <config A> <config B>");
  process.exit(1);
}
const settings = {
  ...phaseSettings(100_000),
  duration: Number(process.env.BENCH_DURATION ?? 8),
  warmup: Number(process.env.BENCH_WARMUP ?? 2),
  pairs: Number(process.env.BENCH_PAIRS ?? 5),
};

const children = new Children();
const dirs = [];
const redisServers = [];
let cleaning = null;
function cleanup() {
  cleaning ??= (async () => {
    await children.stopAll();
    await Promise.all(redisServers.map((r) => r.stop()));
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  })();
  return cleaning;
}
for (const signal of ["SIGINT", "SIGTERM"]) process.once(signal, () => void cleanup().finally(() => process.exit(130)));

/** A service on its own redis-server, seeded with one lessons event per user. */
async function startService(name, configPath) {
  const dir = mkdtempSync(join(tmpdir(), `laurel-compare-${name}-`));
  dirs.push(dir);
  const redisServer = await startEmbeddedRedis({ dir, appendOnly: false });
  redisServers.push(redisServer);
  const port = await freePort();
  const env = { REDIS_URL: redisServer.url, PORT: String(port), LAUREL_CONFIG: configPath, LAUREL_WORKER: "off", LOG_LEVEL: "warn" };
  await children.start(name, "node", [...serviceNodeArgs(), "dist/main.js"], env, `http://127.0.0.1:${port}/healthz`);
  const url = `http://127.0.0.1:${port}`;
  await seedUsers(url, settings, `${name}: `);
  return { name, url };
}

async function measure(service) {
  const opts = { connections: settings.connections };
  const traffic = eventRequests(settings.users, SERVICE_EVENT_PATHS); // one traffic: its requests are built by the warm-up
  await load(service.url, traffic, { ...opts, duration: settings.warmup });
  const r = await load(service.url, traffic, { ...opts, duration: settings.duration });
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`${service.name}: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return r;
}

async function main() {
  const loadAtStart = loadavg();
  const a = await startService("A", configA);
  const b = await startService("B", configB);
  const pairs = [];
  for (let i = 1; i <= settings.pairs; i++) {
    // A then B in odd pairs, B then A in even ones: a drift of the box over the run then weighs
    // on both sides alike instead of always on the one measured second.
    let ra, rb;
    if (i % 2 === 1) {
      ra = await measure(a);
      rb = await measure(b);
    } else {
      rb = await measure(b);
      ra = await measure(a);
    }
    pairs.push({ a: ra, b: rb, ratio: rb.rps / ra.rps });
    console.log(`pair ${i}: A ${Math.round(ra.rps)} req/s (p99 ${ra.p99} ms), B ${Math.round(rb.rps)} req/s (p99 ${rb.p99} ms), B ÷ A ${(rb.rps / ra.rps).toFixed(3)}`);
  }
  const ratios = pairs.map((p) => p.ratio);
  console.log(`\nA = ${configA}\nB = ${configB}`);
  console.log(`${settings.pairs} pairs, ${settings.connections} connections, ${settings.warmup} s warm-up + ${settings.duration} s each, ${settings.users} users per service`);
  console.log(`B ÷ A: median ${median(ratios).toFixed(3)}, min ${Math.min(...ratios).toFixed(3)}, max ${Math.max(...ratios).toFixed(3)}`);
  console.log(`events/s: A median ${Math.round(median(pairs.map((p) => p.a.rps)))}, B median ${Math.round(median(pairs.map((p) => p.b.rps)))}`);
  console.log(`load average at start: ${loadAtStart.map((x) => x.toFixed(2)).join(" ")}`);
  if (process.env.BENCH_JSON) {
    writeFileSync(process.env.BENCH_JSON, `${JSON.stringify({ date: new Date().toISOString(), configA, configB, settings, pairs, medianRatio: median(ratios) }, null, 2)}\n`);
  }
}

await runBench(main, cleanup);
