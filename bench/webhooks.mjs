// node bench/webhooks.mjs (after npm run build): the event endpoint with and without a
// subscribed webhook endpoint, in one run on one dedicated redis-server (issue 6: "the event
// benchmark with a subscribed endpoint configured stays within 10% of the core issue's figure").
// Reports; never gates. See bench/README.md, "Webhooks".
//
// Phases, each a warm-up and a measured run of the events workload of bench/run.mjs:
//   events               the service on config/demo.yaml, LAUREL_WORKER=off (the core figure)
//   events, worker on    the same with its stream worker on (the default), without webhooks
//   events + webhooks (quiet endpoint)   demo.yaml plus one endpoint subscribed to a type the demo
//                        tenant never emits (streak.freeze_earned: it has no freezes): the cost of
//                        an endpoint that wants nothing (since the selection moved to the writers,
//                        no record reaches its hook streams; before, the consumer read and filtered
//                        every record)
//   events + webhooks (milestones)   the service on demo.yaml plus one endpoint subscribed to
//                        the milestone types (level changes, achievements, streak start and loss),
//                        its stream worker and webhook consumer on (the default), the deliveries
//                        going to bench/receiver.mjs on loopback
//   events + webhooks (every type)   the same endpoint subscribed to every type (about 1.5
//                        deliveries per event on the demo tenant: points, and rank changes)
//   events + webhooks (every type), worker apart   the same with LAUREL_WORKER=off and
//                        LAUREL_DELIVERIES=off, `node dist/worker.js` running the consumer and
//                        the deliveries (since the fourth stop the service sends none)
// A phase with a worker starts settled (after its warm-up, every record of the streams is
// applied and delivered) and ends by waiting until it is settled again: how far the worker and
// the deliveries lagged when the load stopped, how long they took to catch up, and the sustained
// rate, requests ÷ (measured seconds + catch-up seconds). Under full load the worker and the
// consumer get the event loop only when HTTP leaves it, so req/s alone counts their work as free
// when it was only deferred.
//
// BENCH_PAIRS=n, BENCH_SEEDED_PAIRS=n (default 0 each): then n alternated pairs of "events"
// (worker off) and "events + webhooks (milestones)" (worker and consumer on), each sustained,
// and the median ratio of each kind: the single phases drift by a third from run to run on a
// shared VM, alternated pairs much less. Each phase of a pair has BENCH_USERS users of its own:
// new to the service (BENCH_PAIRS: every request is among a user's first few, the worst case for
// milestones), or seeded with one event each before the phase, as the core bench seeds its users
// (BENCH_SEEDED_PAIRS: the core bench's traffic with an endpoint). See the pairs in main.
// BENCH_PAIR_BASE=worker: the pairs' first phase runs with the stream worker on, so the ratio is
// the endpoint's own cost rather than the endpoint's and the stream worker's.
//
// BENCH_SEEDED_USERS (default 100000, the core bench's BENCH_USERS): users per phase of a seeded
// pair. Until the tenth stop they had BENCH_USERS (20 000), so each user had ~8 events in a phase
// and passed a level in it (~0.14 deliveries per request); the core bench spreads its events over
// 100 000 users (~0.006). BENCH_PHASES: which single phases (below). Every phase and pair also reports
// the box's CPU per request (service, Redis and receiver, catch-up included): see cpuPerRequest.
//
// Environment: BENCH_DURATION, BENCH_WARMUP, BENCH_CONNECTIONS, BENCH_USERS (default 20000),
// BENCH_JSON, as for bench/run.mjs.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { freePort, startEmbeddedRedis } from "../dist/embedded-redis.js";
import { Children, runBench, serviceNodeArgs } from "./processes.mjs";
import { median } from "./report.mjs";
import { delta, snapshot } from "./snapshot.mjs";
import { eventRequests, load, phaseSettings, seedUsers, SERVICE_EVENT_PATHS } from "./workload.mjs";

const config = phaseSettings(20_000);
/** Users of each seeded pair's phases: the core bench's 100 000 by default, so the pairs are its traffic. */
const seededUsers = Number(process.env.BENCH_SEEDED_USERS ?? 100_000);
/**
 * BENCH_PHASES: the single phases to run, comma-separated among events, worker, quiet, milestones,
 * every, apart (default all); "pairs" for none (only the alternated pairs).
 */
const SINGLE_PHASES = ["events", "worker", "quiet", "milestones", "every", "apart"];
const phasesToRun = new Set(process.env.BENCH_PHASES ? process.env.BENCH_PHASES.split(",") : SINGLE_PHASES);
const runs = (name) => phasesToRun.has(name);

const children = new Children();
const dir = mkdtempSync(join(tmpdir(), "laurel-bench-hooks-"));
let redisServer = null;
let redis = null;
let receiverUrl = null;
let receiverPid = null;
/** `node dist/worker.js` while a phase runs it: its CPU counts in the box's. */
let workerPid = null;

async function cleanup() {
  redis?.disconnect();
  await children.stopAll();
  await redisServer?.stop();
  rmSync(dir, { recursive: true, force: true });
}
for (const signal of ["SIGINT", "SIGTERM"]) process.once(signal, () => void cleanup().finally(() => process.exit(130)));

const TYPES = [
  "achievement.completed", "streak.started", "streak.extended", "streak.lost", "streak.freeze_consumed", "streak.freeze_earned",
  "points.changed", "points.level_changed", "points.boost_started", "points.boost_finished",
  "leaderboard.started", "leaderboard.finished", "leaderboard.rank_changed",
];

/** The types an application typically reacts to: rare per event (a level, an achievement, a streak's fate). */
const MILESTONES = ["points.level_changed", "achievement.completed", "streak.started", "streak.lost", "streak.freeze_consumed"];

/** demo.yaml plus one endpoint on the demo tenant, subscribed to `types` (the file's tenant block ends with its indented keys and comments). */
function webhookConfig(url, types, name) {
  const demo = readFileSync("config/demo.yaml", "utf8");
  const path = join(dir, `${name}.yaml`);
  const secret = `whsec_${Buffer.from("bench-secret-bench-secret-32byte").toString("base64")}`;
  writeFileSync(path, `${demo.trimEnd()}\n    webhooks:\n      - key: bench\n        url: "${url}"\n        secret: "${secret}"\n        events: [${types.join(", ")}]\n`);
  return path;
}

async function startService(name, env) {
  const port = await freePort();
  const service = await children.start(name, "node", [...serviceNodeArgs(), "dist/main.js"], { ...env, PORT: String(port) }, `http://127.0.0.1:${port}/healthz`);
  return { ...service, port, url: `http://127.0.0.1:${port}` };
}

async function stop(name) {
  await children.stop(name);
}

/**
 * `withWorker`: something consumes the streams in this phase, so it starts settled and its
 * catch-up is timed. `users`: how many the phase's events pick from (user-0 onwards).
 */
async function measure(name, server, queue, withWorker, users = config.users) {
  process.stdout.write(`${name}: warm-up ${config.warmup} s, measure ${config.duration} s ... `);
  const requests = eventRequests(users, SERVICE_EVENT_PATHS);
  await load(server.url, requests, { connections: config.connections, duration: config.warmup });
  if (withWorker) await drainBacklog(queue);
  if (receiverUrl) await (await fetch(`${receiverUrl}/reset`)).arrayBuffer();
  // The receiver shares the box: its CPU is the bench's, not Laurel's, and is reported apart.
  const others = () => ({ receiver: receiverPid, ...(workerPid ? { worker: workerPid } : {}) });
  const before = await snapshot(redis, server.pid, others());
  const result = await load(server.url, requests, { connections: config.connections, duration: config.duration });
  const change = delta(before, await snapshot(redis, server.pid, others()));
  console.log(`${Math.round(result.rps)} req/s (p50 ${result.p50} ms, p99 ${result.p99} ms)`);
  const phase = { ...result, cpuPercent: change.cpuPercent, redisCommands: change.commands.fcall?.calls ?? 0 };
  if (withWorker) {
    phase.delivery = await drainBacklog(queue);
    phase.sustainedRps = result.requests / (config.duration + phase.delivery.seconds);
    console.log(`  caught up: ${JSON.stringify(phase.delivery)}`);
  } else {
    phase.sustainedRps = result.rps; // nothing consumes the records in this phase
  }
  const settled = await snapshot(redis, server.pid, others());
  phase.cpuUs = cpuPerRequest(before, settled, result.requests);
  // Redis µs per request by command, catch-up included (the event scripts are fcall): where a phase's extra Redis time goes.
  phase.redisUsByCommand = Object.fromEntries(
    Object.entries(delta(before, settled).commands)
      .map(([name, c]) => [name, Number((c.usec / result.requests).toFixed(2))])
      .filter(([, us]) => us >= 0.05)
      .sort((a, b) => b[1] - a[1]),
  );
  phase.boxCpuUs = phase.cpuUs.service + phase.cpuUs.redis + phase.cpuUs.others;
  return phase;
}

/**
 * CPU µs per request of the service, Redis and the receiver from the start of the measured run
 * until every record is applied and delivered (the catch-up included; the load generator
 * excluded). On this box a phase's rate is bound by round trips and scheduling rather than by a
 * full core, and drifts by a tenth between identical phases; the CPU a request costs is what a
 * saturated box would divide its cores by, and varies much less (bench/README.md, "The tenth stop").
 * Split as the service, Redis, and the rest (the receiver, and a phase's `node dist/worker.js`).
 */
function cpuPerRequest(before, after, requests) {
  const us = (seconds) => (seconds * 1e6) / requests;
  let others = 0;
  for (const [name, cpu] of Object.entries(after.othersCpu)) others += cpu - before.othersCpu[name];
  return { service: us(after.serverCpu - before.serverCpu), redis: us(after.redisCpu - before.redisCpu), others: us(others) };
}

/**
 * Records of the demo streams not yet applied by the stream worker (buckets group, on the shard
 * streams) or the webhook consumer (webhooks group, on the hook streams), and jobs not yet delivered.
 */
async function backlog(queue) {
  let records = 0;
  let buckets = 0;
  for (let s = 0; s < 16; s++) {
    for (const key of [`{demo:${s}}:x`, `{demo:${s}}:xh`]) {
      const groups = await redis.xinfo("GROUPS", key).catch(() => []);
      for (const g of groups) {
        const f = Object.fromEntries(Array.from({ length: g.length / 2 }, (_, i) => [g[2 * i], g[2 * i + 1]]));
        const left = Number(f.pending) + Number(f.lag ?? 0);
        if (f.name === "webhooks") records += left;
        if (f.name === "buckets") buckets += left;
      }
    }
  }
  const counts = await queue.getJobCounts("waiting", "active", "delayed", "prioritized");
  return { buckets, records, jobs: Object.values(counts).reduce((a, b) => a + b, 0) };
}

/** Waits until the worker, the consumer and the deliveries have caught up; what was left at the start and how long it took. */
async function drainBacklog(queue) {
  const started = performance.now();
  const atStop = await backlog(queue);
  for (;;) {
    const left = await backlog(queue);
    if (left.buckets === 0 && left.records === 0 && left.jobs === 0) break;
    if (performance.now() - started > 600_000) throw new Error(`backlog not delivered after 10 min: ${JSON.stringify(left)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const seconds = (performance.now() - started) / 1000;
  const count = await (await fetch(`${receiverUrl}/count`)).json();
  const failed = (await queue.getJobCounts("failed")).failed;
  return { atStop, seconds, received: count.requests, distinctIds: count.ids, failed };
}

async function main() {
  const loadAtStart = loadavg();
  redisServer = await startEmbeddedRedis({ dir, appendOnly: false });
  redis = new Redis(redisServer.url);
  const env = { REDIS_URL: redisServer.url, LOG_LEVEL: process.env.LOG_LEVEL ?? "warn" };
  const receiverPort = await freePort();
  receiverPid = (await children.start("receiver", "node", ["bench/receiver.mjs"], { PORT: String(receiverPort) }, `http://127.0.0.1:${receiverPort}/ping`)).pid;
  receiverUrl = `http://127.0.0.1:${receiverPort}`;
  const everyType = webhookConfig(`${receiverUrl}/hooks`, TYPES, "every-type");
  const milestones = webhookConfig(`${receiverUrl}/hooks`, MILESTONES, "milestones");
  const quiet = webhookConfig(`${receiverUrl}/hooks`, ["streak.freeze_earned"], "quiet");
  const { hostname, port } = new URL(redisServer.url);
  const queue = new Queue("laurel-hooks-demo", { connection: { host: hostname, port: Number(port) }, prefix: "{laurel-jobs}" });

  const phases = {};
  let service;
  let seed = null;
  // The events phase seeds the users every single phase shares; it runs whenever another single phase does.
  if (SINGLE_PHASES.some(runs)) {
    service = await startService("service", { ...env, LAUREL_WORKER: "off" });
    seed = await seedUsers(service.url, config);
    phases.events = await measure("events", service, queue, false);
    await stop("service");
  }
  // One single phase: its service started (and with `apart`, `node dist/worker.js` running the
  // consumer and the deliveries), measured, stopped.
  const single = async (key, label, serviceEnv, apart = false) => {
    if (!runs(key)) return;
    service = await startService(key, { ...env, ...serviceEnv });
    if (apart) workerPid = (await children.start("worker", "node", ["dist/worker.js"], { ...env, LAUREL_CONFIG: serviceEnv.LAUREL_CONFIG }, `${service.url}/healthz`)).pid;
    phases[key] = await measure(label, service, queue, true);
    await stop(key);
    if (apart) await stop("worker");
    workerPid = null;
  };
  // The same service with its stream worker on (the default), to tell the worker's share from the webhooks'.
  await single("worker", "events, worker on", {});
  await single("quiet", "events + webhooks (quiet endpoint)", { LAUREL_CONFIG: quiet });
  await single("milestones", "events + webhooks (milestones)", { LAUREL_CONFIG: milestones });
  await single("every", "events + webhooks (every type)", { LAUREL_CONFIG: everyType });
  await single("apart", "events + webhooks (every type), worker apart", { LAUREL_CONFIG: everyType, LAUREL_WORKER: "off", LAUREL_DELIVERIES: "off" }, true);

  // Each phase of a pair has users of its own (an empty Redis, below): with the single phases'
  // users, who pass their milestones in the phases before, the later pairs sent next to nothing
  // (0.000-0.001 deliveries per request at the eighth stop). BENCH_PAIRS: the users are new to
  // the service, created by their first event in the phase's warm-up (a milestone or two each:
  // the worst case, ~0.24 deliveries per request at the tenth stop). BENCH_SEEDED_PAIRS: each
  // phase first seeds BENCH_SEEDED_USERS users with one event, as the core bench does, so the
  // measured traffic is the core bench's with an endpoint (~0.01 deliveries per request; the
  // seed's own deliveries are sent before the measurement starts).
  const pairs = [];
  const pairKinds = [
    ["new users", Number(process.env.BENCH_PAIRS ?? 0), false],
    ["seeded users", Number(process.env.BENCH_SEEDED_PAIRS ?? 0), true],
  ];
  // BENCH_PAIR_BASE=worker: the pairs' first phase runs the stream worker too (the deployment
  // without the endpoint), so the ratio is the endpoint's own cost; by default it is the core
  // figure's phase (LAUREL_WORKER=off), and the ratio counts the stream worker's cost as well.
  const workerBase = process.env.BENCH_PAIR_BASE === "worker";
  for (const [kind, count, seeded] of pairKinds) {
    for (let i = 0; i < count; i++) {
      const label = `pair ${i + 1} (${kind})`;
      // Each phase of a pair starts on an empty Redis, so its users are its own (new to the
      // service, or seeded just before). Until the tenth stop the phases took user numbers of
      // their own on one Redis, and the second ran on the first's data as well: twice the users
      // in its zsets, so its event scripts were slower (ZADD 9.4 -> 10.9 µs per request) and the
      // endpoint's side was charged for it.
      await redis.flushall();
      service = await startService("pair-events", { ...env, LAUREL_WORKER: workerBase ? "on" : "off" });
      const users = seeded ? seededUsers : config.users;
      if (seeded) await seedUsers(service.url, { ...config, users }, `${label}: `);
      const off = await measure(`${label}: events${workerBase ? ", worker on" : ""}`, service, queue, workerBase, users);
      await stop("pair-events");
      await redis.flushall();
      service = await startService("pair-milestones", { ...env, LAUREL_CONFIG: milestones });
      if (seeded) await seedUsers(service.url, { ...config, users }, `${label}: `);
      const on = await measure(`${label}: events + webhooks (milestones)`, service, queue, true, users);
      await stop("pair-milestones");
      pairs.push({
        kind,
        events: off.sustainedRps,
        milestones: on.sustainedRps,
        deliveriesPerRequest: on.delivery.received / on.requests,
        ratio: on.sustainedRps / off.sustainedRps,
        cpuUs: { events: off.cpuUs, milestones: on.cpuUs },
        redisUsByCommand: { events: off.redisUsByCommand, milestones: on.redisUsByCommand },
        cpuRatio: off.boxCpuUs / on.boxCpuUs,
      });
    }
  }
  phases.pairs = pairs;
  await queue.close();

  const ratio = (p, base) => (p.rps / base.rps).toFixed(2);
  if (phases.events) {
    console.log("\n| phase | req/s | p50 / p99 ms | ÷ events | ÷ worker on | sustained req/s (÷ events) | CPU % server / redis / load / receiver | box CPU µs per request | non-2xx / errors | deliveries (distinct ids) | left at stop: bucket records / webhook records / jobs, caught up in |");
    console.log("|---|---|---|---|---|---|---|---|---|---|---|");
    const rows = [
      ["events", phases.events],
      ["events, worker on", phases.worker],
      ["events + webhooks (quiet endpoint)", phases.quiet],
      ["events + webhooks (milestones)", phases.milestones],
      ["events + webhooks (every type)", phases.every],
      ["events + webhooks (every type), worker apart", phases.apart],
    ];
    for (const [name, p] of rows) {
      if (!p) continue;
      const c = p.cpuPercent;
      const d = p.delivery;
      const delivered = d ? `${d.received} (${d.distinctIds}), ${(d.received / p.requests).toFixed(3)} per request` : "";
      const lag = d ? `${d.atStop.buckets} / ${d.atStop.records} / ${d.atStop.jobs}, ${d.seconds.toFixed(1)} s` : "";
      const sustained = `${Math.round(p.sustainedRps)} (${(p.sustainedRps / phases.events.rps).toFixed(2)})`;
      console.log(`| ${name} | ${Math.round(p.rps)} | ${p.p50} / ${p.p99} | ${ratio(p, phases.events)} | ${(phases.worker ? ratio(p, phases.worker) : "")} | ${sustained} | ${c.server.toFixed(0)} / ${c.redis.toFixed(0)} / ${c.loadGenerator.toFixed(0)} / ${c.receiver.toFixed(0)} | ${p.boxCpuUs.toFixed(1)} | ${p.non2xx} / ${p.errors} | ${delivered} | ${lag} |`);
    }
  }
  if (pairs.length > 0) {
    for (const [kind] of pairKinds) {
      const ofKind = pairs.filter((p) => p.kind === kind);
      if (ofKind.length === 0) continue;
      console.log(`\nalternated pairs (${kind}), sustained milestones ÷ events${workerBase ? " (worker on)" : ""}: ${ofKind.map((p) => `${p.ratio.toFixed(2)} (${Math.round(p.milestones)} ÷ ${Math.round(p.events)}, ${p.deliveriesPerRequest.toFixed(3)} deliveries per request)`).join("; ")}; median ${median(ofKind.map((p) => p.ratio)).toFixed(3)}`);
      const split = (c) => `${c.service.toFixed(1)} + ${c.redis.toFixed(1)} + ${c.others.toFixed(1)}`;
      console.log(`  box CPU µs per request (service + Redis + receiver, catch-up included), events ÷ milestones: ${ofKind.map((p) => `${p.cpuRatio.toFixed(2)} (${split(p.cpuUs.events)} ÷ ${split(p.cpuUs.milestones)})`).join("; ")}; median ${median(ofKind.map((p) => p.cpuRatio)).toFixed(3)}`);
    }
  }
  console.log(`load average at start: ${loadAtStart.map((x) => x.toFixed(2)).join(" ")}; ${cpus().length} CPUs`);
  if (process.env.BENCH_JSON) writeFileSync(process.env.BENCH_JSON, `${JSON.stringify({ date: new Date().toISOString(), config, seed, phases, loadAtStart }, null, 2)}\n`);
}

await runBench(main, cleanup);
