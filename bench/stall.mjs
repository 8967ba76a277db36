// node bench/stall.mjs [stall seconds] [variant ...]   (after npm run build)
//
// What a stalled Redis does to a metering gate's callers: the service on a scratch redis-server
// (bench/core-tenant.yaml, 2 000 users seeded), STALL_READERS clients (32) reading the metering
// read and STALL_WRITERS (4) posting events, each one request at a time, for the stall plus 4 s;
// 2 s in, redis-server gets SIGSTOP for `stall seconds` (5), then SIGCONT. Per variant (service
// environment, "NAME=value[,NAME=value]" or "-" for none; default: "-" and
// "LAUREL_READ_TIMEOUT=0"), it prints the reads and events answered by status, the longest wait
// of each, the reads sent during the stall and how long they waited (p50, max), and how long after
// the SIGCONT the first read was answered 200. Reports; never gates.
//   node bench/stall.mjs 5
//   node bench/stall.mjs 5 - LAUREL_READ_TIMEOUT=0.5 LAUREL_READ_TIMEOUT=0
import { Children, runBench, scratchRedis } from "./processes.mjs";
import { freePort } from "../dist/embedded-redis.js";
import { seedUsers, userId } from "./workload.mjs";
import { Redis } from "ioredis";
import { performance } from "node:perf_hooks";

const stallSeconds = Number(process.argv[2] ?? 5);
const variants = process.argv.length > 3 ? process.argv.slice(3) : ["-", "LAUREL_READ_TIMEOUT=0"];
const USERS = 2000;
const READERS = Number(process.env.STALL_READERS ?? 32);
const WRITERS = Number(process.env.STALL_WRITERS ?? 4);
const LEAD_MS = 2000;
const TAIL_MS = 2000;
const CONFIG = new URL("./core-tenant.yaml", import.meta.url).pathname;

const children = new Children();
let current = null;

function envOf(variant) {
  if (variant === "-") return {};
  return Object.fromEntries(variant.split(",").map((pair) => [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)]));
}

const pct = (sorted, p) => (sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]);
const ms = (x) => `${Math.round(x)} ms`;

/** Clients sending `request()` one at a time until `until` (performance.now()); every answer recorded. */
async function clients(count, until, request, log) {
  await Promise.all(
    Array.from({ length: count }, async () => {
      while (performance.now() < until) {
        const sent = performance.now();
        let status;
        try {
          const res = await request();
          await res.arrayBuffer();
          status = res.status;
        } catch {
          status = "error";
        }
        log.push({ sent, answered: performance.now(), status });
      }
    }),
  );
}

function byStatus(log) {
  const counts = {};
  for (const { status } of log) counts[status] = (counts[status] ?? 0) + 1;
  return Object.entries(counts)
    .map(([s, n]) => `${n} ${s}`)
    .join(", ");
}

async function runVariant(variant) {
  current = await scratchRedis("laurel-stall-");
  const admin = new Redis(current.server.url);
  const redisPid = Number(/process_id:(\d+)/.exec(await admin.info("server"))[1]);
  admin.disconnect();
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  await children.start("service", process.execPath, ["dist/main.js"], { PORT: String(port), REDIS_URL: current.server.url, LAUREL_CONFIG: CONFIG, LAUREL_WORKER: "off", LOG_LEVEL: "warn", ...envOf(variant) }, `${url}/healthz`);
  await seedUsers(url, { users: USERS, connections: 32 }, `${variant}: `);
  const headers = { "x-api-key": "demo-key" };
  const read = () => fetch(`${url}/v1/users/${userId(Math.floor(Math.random() * USERS))}/points/energy`, { headers });
  const event = () =>
    fetch(`${url}/v1/metrics/api-calls/event`, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json" },
      body: JSON.stringify({ user: { id: userId(Math.floor(Math.random() * USERS)), tz: "UTC" }, value: 1 }),
    });
  const start = performance.now();
  const until = start + LEAD_MS + stallSeconds * 1000 + TAIL_MS;
  const reads = [];
  const events = [];
  let stoppedAt = 0;
  let resumedAt = 0;
  const fault = (async () => {
    await new Promise((r) => setTimeout(r, LEAD_MS));
    process.kill(redisPid, "SIGSTOP");
    stoppedAt = performance.now();
    await new Promise((r) => setTimeout(r, stallSeconds * 1000));
    process.kill(redisPid, "SIGCONT");
    resumedAt = performance.now();
  })();
  await Promise.all([clients(READERS, until, read, reads), clients(WRITERS, until, event, events), fault]);
  const duringStall = reads.filter((r) => r.sent >= stoppedAt && r.sent < resumedAt);
  const waits = duringStall.map((r) => r.answered - r.sent).sort((a, b) => a - b);
  const firstOk = reads.filter((r) => r.status === 200 && r.sent >= stoppedAt).sort((a, b) => a.answered - b.answered)[0];
  const longest = (log) => Math.max(0, ...log.map((r) => r.answered - r.sent));
  console.log(`${variant}: Redis stopped ${(stallSeconds).toFixed(1)} s`);
  console.log(`  reads:  ${byStatus(reads)}; longest wait ${ms(longest(reads))}`);
  console.log(`  reads sent during the stall: ${duringStall.length}, waited p50 ${ms(pct(waits, 0.5))}, max ${ms(pct(waits, 1))}`);
  console.log(`  first read answered 200 after the SIGCONT: ${firstOk ? ms(firstOk.answered - resumedAt) : "none"}`);
  console.log(`  events: ${byStatus(events)}; longest wait ${ms(longest(events))}`);
  await children.stop("service");
  await current.stop();
  current = null;
}

await runBench(
  async () => {
    console.log(`laurel stall bench: ${READERS} readers + ${WRITERS} writers, one request at a time each, Redis SIGSTOPped ${stallSeconds} s, ${USERS} users, bench/core-tenant.yaml`);
    for (const variant of variants) await runVariant(variant);
  },
  async () => {
    await children.stopAll();
    await current?.stop();
  },
);
