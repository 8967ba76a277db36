// npm run bench: the service against a bare uWS + ioredis baseline, measured in the same run on
// a dedicated redis-server. Reports; never gates (exit 0 whatever the figures; 1 only when the
// harness itself cannot run). See bench/README.md for the figures and recorded runs.
//
// Environment: BENCH_DURATION (s, default 10), BENCH_WARMUP (s, default 3), BENCH_CONNECTIONS
// (default 100), BENCH_USERS (default 100000), BENCH_JSON (write the figures to this path),
// BENCH_SLICES (default 6) and BENCH_SLICE (s, default 2): the alternated read / HGET slices,
// LAUREL_AUTOPIPELINE=1 (ioredis auto-pipelining in both servers), BENCH_PIN=1 (Redis on a core of
// its own: processes.mjs pinProcesses).
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { pino } from "pino";
import { loadConfigFile } from "../dist/config/load.js";
import { freePort, startEmbeddedRedis } from "../dist/embedded-redis.js";
import { StreamWorker } from "../dist/jobs/stream-worker.js";
import { Children, pinProcesses, serviceNodeArgs, runBench } from "./processes.mjs";
import { figures, print, TARGETS } from "./report.mjs";
import { delta, snapshot } from "./snapshot.mjs";
import { eventRequests, load, phaseSettings, readRequests, seedUsers, SERVICE_EVENT_PATHS, userId } from "./workload.mjs";

const config = {
  ...phaseSettings(100_000),
  autoPipelining: process.env.LAUREL_AUTOPIPELINE === "1",
  tree: treeState(),
};

/** The commit measured, marked dirty when src/, lua/ or config/ differ from it (dist/ is built from the work tree). */
function treeState() {
  const git = (...args) => spawnSync("git", args, { encoding: "utf8" }).stdout?.trim() ?? "";
  const head = git("rev-parse", "--short", "HEAD") || "unknown";
  return git("status", "--porcelain", "--", "src", "lua", "config") ? `${head}+dirty` : head;
}

const children = new Children();
const redisDir = mkdtempSync(join(tmpdir(), "laurel-bench-"));
let redisServer = null;
let redis = null;

let cleaning = null;
/** Idempotent: a signal and the finally block may both call it. */
function cleanup() {
  cleaning ??= (async () => {
    redis?.disconnect();
    await children.stopAll();
    await redisServer?.stop();
    rmSync(redisDir, { recursive: true, force: true });
  })();
  return cleaning;
}
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.once(signal, () => void cleanup().finally(() => process.exit(130)));
}

/** Warm-up, then one measured run with Redis and CPU read before and after. */
async function phase(name, server, requests) {
  const url = `http://127.0.0.1:${server.port}`;
  const opts = { connections: config.connections };
  process.stdout.write(`${name}: warm-up ${config.warmup} s, measure ${config.duration} s ... `);
  await load(url, requests, { ...opts, duration: config.warmup });
  const before = await snapshot(redis, server.pid);
  const result = await load(url, requests, { ...opts, duration: config.duration });
  const change = delta(before, await snapshot(redis, server.pid));
  console.log(`${Math.round(result.rps)} req/s`);
  const perRequest = (percent) => (percent * 1e4 * change.seconds) / result.requests;
  return {
    ...result,
    redis: change.commands,
    cpuPercent: change.cpuPercent,
    cpuUsPerRequest: { server: perRequest(change.cpuPercent.server), redis: perRequest(change.cpuPercent.redis) },
  };
}

/**
 * read ÷ HGET again, from short slices of the two phases' traffic alternated (HGET then read, then
 * read then HGET, ...): this box changes speed by a third for tens of seconds at a time, and the
 * two 10-s phases, ~25 s apart, can land in different speeds (bench/README.md, *The thirteenth
 * stop*). Both servers are warm by now. Each pair gives a ratio; the report shows their median.
 */
async function readSlices(baseline, service, hgetTraffic, readTraffic) {
  process.stdout.write(`read ÷ HGET: ${config.slices} alternated pairs of ${config.slice}-s slices ... `);
  const run = (server, traffic) => load(`http://127.0.0.1:${server.port}`, traffic, { connections: config.connections, duration: config.slice });
  const pairs = [];
  for (let i = 0; i < config.slices; i++) {
    let hget;
    let read;
    if (i % 2 === 0) {
      hget = await run(baseline, hgetTraffic);
      read = await run(service, readTraffic);
    } else {
      read = await run(service, readTraffic);
      hget = await run(baseline, hgetTraffic);
    }
    pairs.push({ hgetRps: hget.rps, readRps: read.rps, ratio: read.rps / hget.rps });
  }
  console.log(pairs.map((p) => p.ratio.toFixed(2)).join(" "));
  return pairs;
}

/** One stream worker (in this process) drains every record the phases wrote: its throughput and Redis cost per record. */
async function drainPhase() {
  process.stdout.write("stream worker: drain ... ");
  const tenants = loadConfigFile("config/demo.yaml");
  const entries = (await Promise.all(Array.from({ length: tenants[0].shards }, (_, s) => redis.xlen(`{demo:${s}}:x`)))).reduce((a, b) => a + b, 0);
  const worker = new StreamWorker({ redis, tenants, logger: pino({ level: "silent" }) });
  const before = await snapshot(redis, process.pid);
  const applied = await worker.drain();
  const change = delta(before, await snapshot(redis, process.pid));
  const scripts = change.commands.fcall ?? change.commands.evalsha;
  console.log(`${applied} of ${entries} records`);
  return { entries: applied, seconds: change.seconds, redisUsec: scripts?.usec ?? NaN, redisCpuPercent: change.cpuPercent.redis };
}

async function main() {
  const loadAtStart = loadavg();
  redisServer = await startEmbeddedRedis({ dir: redisDir, appendOnly: false });
  redis = new Redis(redisServer.url);
  const redisVersion = /redis_version:(\S+)/.exec(await redis.info("server"))?.[1];

  const env = { REDIS_URL: redisServer.url, LOG_LEVEL: process.env.LOG_LEVEL ?? "warn" };
  const servicePort = await freePort();
  // The stream worker is off in the service so the phases measure the request path alone, as
  // in the earlier rows; its own cost is measured at the end, draining what the phases wrote.
  const service = await children.start("service", "node", [...serviceNodeArgs(), "dist/main.js"], { ...env, PORT: String(servicePort), LAUREL_WORKER: "off" }, `http://127.0.0.1:${servicePort}/healthz`);
  service.port = servicePort;
  let baselinePort = await freePort();
  while (baselinePort === servicePort) baselinePort = await freePort();
  const baseline = await children.start("baseline", "node", ["bench/baseline-server.mjs"], { ...env, PORT: String(baselinePort) }, `http://127.0.0.1:${baselinePort}/ping`);
  baseline.port = baselinePort;
  const redisPid = Number(/process_id:(\d+)/.exec(await redis.info("server"))?.[1]);
  config.pinned = pinProcesses(redisPid, [service.pid, baseline.pid, process.pid]);

  // Seed: one lessons event per user, so every user the read phase asks for exists.
  const seed = await seedUsers(`http://127.0.0.1:${service.port}`, config);
  const probe = await fetch(`http://127.0.0.1:${service.port}/v1/users/${userId(config.users - 1)}/points/energy?awards=10`, { headers: { "x-api-key": "demo-key" } });
  if (probe.status !== 200) throw new Error(`read of a seeded user answered ${probe.status}: ${await probe.text()}`);

  // Each service phase runs right after its baseline, so a noisy neighbour skews the pair alike.
  const phases = {};
  phases.baselineEvalsha = await phase("baseline EVALSHA", baseline, eventRequests(config.users, { lessons: "/event", apiCalls: "/event" }));
  phases.events = await phase("events", service, eventRequests(config.users, SERVICE_EVENT_PATHS));
  const hgetTraffic = readRequests(config.users, (id) => `/users/${id}`);
  const readTraffic = readRequests(config.users, (id) => `/v1/users/${id}/points/energy?awards=10`);
  phases.baselineHget = await phase("baseline HGET", baseline, hgetTraffic);
  phases.read = await phase("read", service, readTraffic);
  const slices = await readSlices(baseline, service, hgetTraffic, readTraffic);
  // Issue 4's user reads: the streak (one script on the user's shard, then one per shard for the
  // rank: every seeded user holds an active streak) and the achievements (one script + S HMGET).
  phases.streakRead = await phase("streak read", service, readRequests(config.users, (id) => `/v1/users/${id}/streak`));
  phases.achievementsRead = await phase("achievements read", service, readRequests(config.users, (id) => `/v1/users/${id}/achievements`));
  const worker = await drainPhase();

  const f = figures(phases, slices);
  print(config, phases, f);
  console.log(`stream worker: drained ${worker.entries} records in ${worker.seconds.toFixed(1)} s = ${Math.round(worker.entries / worker.seconds)} records/s, one worker; Redis µs per record ${(worker.redisUsec / worker.entries).toFixed(1)} (scripts), Redis CPU µs per record ${((worker.redisCpuPercent * 1e4 * worker.seconds) / worker.entries).toFixed(1)}`);
  console.log(`load average at start: ${loadAtStart.map((x) => x.toFixed(2)).join(" ")} (other work on the box makes figures noisy)`);

  if (process.env.BENCH_JSON) {
    const record = {
      date: new Date().toISOString(),
      env: Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith("BENCH_") || k === "LAUREL_AUTOPIPELINE")),
      machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model, node: process.version, redis: redisVersion, loadAverageAtStart: loadAtStart },
      config,
      seed,
      phases,
      readSlices: slices,
      worker,
      figures: f,
      targets: TARGETS,
    };
    writeFileSync(process.env.BENCH_JSON, `${JSON.stringify(record, null, 2)}\n`);
    console.log(`figures written to ${process.env.BENCH_JSON}`);
  }
}

await runBench(main, cleanup);
