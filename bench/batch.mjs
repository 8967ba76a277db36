// node bench/batch.mjs [config] [batches] [users]   (after npm run build)
//
// POST /admin/v1/metrics/events (README: a batch of events) against the built service on a Redis
// of its own: every user seeded by batches first, then `batches` batches of 1000 events (the core
// bench's bodies, random users among `users`, 80% lessons), sent one after another, then the first
// five of them again and again while the event route takes the core events traffic beside them
// (50 connections), to see what a batch costs the events around it. Prints events/s and ms per
// batch, the events' req/s and p99 with and without batches beside them, and Redis's µs per
// script with the CPU per event of both sides. BATCH_COMMANDS=1 also lists the Redis commands of
// the batches alone, per event. Reports; never gates.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, startEmbeddedRedis } from "../dist/embedded-redis.js";
import { Redis } from "ioredis";
import { Children, runBench, serviceNodeArgs } from "./processes.mjs";
import { delta, snapshot } from "./snapshot.mjs";
import { eventRequests, load, SERVICE_EVENT_PATHS, userId } from "./workload.mjs";

const [config = "config/demo.yaml", batchesArg = "40", usersArg = "20000"] = process.argv.slice(2);
const batches = Number(batchesArg);
const users = Number(usersArg);
const zones = ["UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo", "Australia/Sydney", "Asia/Kolkata", "America/Los_Angeles", "Europe/London"];
const children = new Children();
const dir = mkdtempSync(join(tmpdir(), "laurel-batch-bench-"));
let server;

/** 1000 events of random users, or of users first .. first + 999 (the seed). */
function batchBody(first = null) {
  const events = [];
  for (let i = 0; i < 1000; i++) {
    const n = first === null ? Math.floor(Math.random() * users) : (first + i) % users;
    events.push({ key: Math.random() < 0.8 ? "lessons" : "api-calls", user: { id: userId(n), email: `${userId(n)}@example.com`, tz: zones[n % zones.length] }, value: 1 });
  }
  return JSON.stringify(events);
}

async function sendBatches(url, bodies) {
  const started = performance.now();
  const times = [];
  for (const body of bodies) {
    const t0 = performance.now();
    const res = await fetch(`${url}/admin/v1/metrics/events`, { method: "POST", headers: { "x-api-key": "demo-admin-key", "content-type": "application/json" }, body });
    const reply = await res.json();
    if (res.status !== 202 || reply.accepted !== 1000) throw new Error(`batch: ${res.status} ${JSON.stringify(reply).slice(0, 200)}`);
    times.push(performance.now() - t0);
  }
  const seconds = (performance.now() - started) / 1000;
  times.sort((a, b) => a - b);
  return { eventsPerSecond: (bodies.length * 1000) / seconds, medianMs: times[times.length >> 1], maxMs: times[times.length - 1] };
}

await runBench(
  async () => {
    server = await startEmbeddedRedis({ dir, appendOnly: false });
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const service = await children.start("service", "node", [...serviceNodeArgs(), "dist/main.js"], { REDIS_URL: server.url, PORT: String(port), LAUREL_CONFIG: config, LAUREL_WORKER: "off", LOG_LEVEL: "warn" }, `${url}/healthz`);
    // Every user exists first, as the core bench seeds them: a new user's event costs Redis more.
    await sendBatches(url, Array.from({ length: Math.ceil(users / 1000) }, (_, k) => batchBody(k * 1000)));
    const bodies = Array.from({ length: batches }, () => batchBody());
    await sendBatches(url, bodies.slice(0, 3)); // warm-up
    const redis = new Redis(server.url);
    const before = await snapshot(redis, service.pid);
    const alone = await sendBatches(url, bodies);
    const phase = delta(before, await snapshot(redis, service.pid));
    redis.disconnect();
    const events = bodies.length * 1000;
    if (process.env.BATCH_COMMANDS) {
      for (const [name, c] of Object.entries(phase.commands).sort((x, y) => y[1].usec - x[1].usec)) console.log(`  ${name}: ${(c.calls / events).toFixed(2)} per event, ${c.usPerCall.toFixed(1)} µs`);
    }
    const fcall = phase.commands.fcall;
    console.log(`batches alone: ${Math.round(alone.eventsPerSecond)} events/s, ${alone.medianMs.toFixed(1)} ms a batch (median), ${alone.maxMs.toFixed(1)} ms (max)`);
    console.log(
      `  Redis ${fcall.usPerCall.toFixed(1)} µs per script (wall), CPU per event: Redis ${((phase.cpuPercent.redis * phase.seconds * 1e4) / events).toFixed(1)} µs, service ${((phase.cpuPercent.server * phase.seconds * 1e4) / events).toFixed(1)} µs; CPU % server/redis ${Math.round(phase.cpuPercent.server)}/${Math.round(phase.cpuPercent.redis)}`,
    );
    const traffic = eventRequests(users, SERVICE_EVENT_PATHS);
    const watch = new Redis(server.url);
    const quietBefore = await snapshot(watch, service.pid);
    const quiet = await load(url, traffic, { connections: 50, duration: 8 });
    const quietPhase = delta(quietBefore, await snapshot(watch, service.pid));
    watch.disconnect();
    console.log(`event route alone (50 connections): ${Math.round(quiet.rps)} req/s, p99 ${quiet.p99} ms`);
    console.log(
      `  Redis ${quietPhase.commands.fcall.usPerCall.toFixed(1)} µs per script (wall), CPU per event: Redis ${((quietPhase.cpuPercent.redis * quietPhase.seconds * 1e4) / quiet.requests).toFixed(1)} µs, service ${((quietPhase.cpuPercent.server * quietPhase.seconds * 1e4) / quiet.requests).toFixed(1)} µs`,
    );
    let stop = false;
    const beside = (async () => {
      const results = [];
      while (!stop) results.push(await sendBatches(url, bodies.slice(0, 5)));
      return results;
    })();
    const busy = await load(url, traffic, { connections: 50, duration: 8 });
    stop = true;
    const rounds = await beside;
    const batchRate = rounds.reduce((sum, r) => sum + r.eventsPerSecond, 0) / rounds.length;
    console.log(`event route with batches beside it: ${Math.round(busy.rps)} req/s, p99 ${busy.p99} ms; the batches: ${Math.round(batchRate)} events/s`);
  },
  async () => {
    await children.stopAll();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  },
);
