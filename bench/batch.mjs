// node bench/batch.mjs [config] [batches] [users]   (after npm run build)
//
// POST /admin/v1/metrics/events (README: a batch of events) against the built service on a Redis
// of its own: `batches` batches of 1000 events (the core bench's bodies, random users among
// `users`, 80% lessons), sent one after another, then the same batches again while the event
// route takes the core events traffic beside them (50 connections), to see what a batch costs
// the events around it. Prints events/s and ms per batch, and the events' req/s and p99 with and
// without batches beside them. Reports; never gates.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, startEmbeddedRedis } from "../dist/embedded-redis.js";
import { Children, runBench, serviceNodeArgs } from "./processes.mjs";
import { eventRequests, load, SERVICE_EVENT_PATHS, userId } from "./workload.mjs";

const [config = "config/demo.yaml", batchesArg = "40", usersArg = "20000"] = process.argv.slice(2);
const batches = Number(batchesArg);
const users = Number(usersArg);
const zones = ["UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo", "Australia/Sydney", "Asia/Kolkata", "America/Los_Angeles", "Europe/London"];
const children = new Children();
const dir = mkdtempSync(join(tmpdir(), "laurel-batch-bench-"));
let server;

function batchBody() {
  const events = [];
  for (let i = 0; i < 1000; i++) {
    const n = Math.floor(Math.random() * users);
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
    await children.start("service", "node", [...serviceNodeArgs(), "dist/main.js"], { REDIS_URL: server.url, PORT: String(port), LAUREL_CONFIG: config, LAUREL_WORKER: "off", LOG_LEVEL: "warn" }, `${url}/healthz`);
    const bodies = Array.from({ length: batches }, batchBody);
    await sendBatches(url, bodies.slice(0, 3)); // warm-up
    const alone = await sendBatches(url, bodies);
    console.log(`batches alone: ${Math.round(alone.eventsPerSecond)} events/s, ${alone.medianMs.toFixed(1)} ms a batch (median), ${alone.maxMs.toFixed(1)} ms (max)`);
    const traffic = eventRequests(users, SERVICE_EVENT_PATHS);
    const quiet = await load(url, traffic, { connections: 50, duration: 8 });
    console.log(`event route alone (50 connections): ${Math.round(quiet.rps)} req/s, p99 ${quiet.p99} ms`);
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
