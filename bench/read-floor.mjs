// node bench/read-floor.mjs   (after npm run build): how close the metering read can get to its
// HGET baseline on this box at all.
//
// The read ÷ HGET target compares the service's read with a bare uWS route running one HGET. The
// read must also do what no rule of Laurel adds: read the key header, two path parameters and the
// query, fetch a list of award records, and send an answer of ~600 bytes instead of ~15. The
// baseline's /floor route (bench/baseline-server.mjs) does exactly that and nothing else: so
// floor ÷ HGET is the best read ÷ HGET this box allows with this stack, and read ÷ floor is the
// share the service's own code (authentication, validation, parsing, ids, rendering) leaves.
//
// Sequence: a redis-server on a free port, the service (bench/core-tenant.yaml) and the baseline;
// the seed (BENCH_USERS, default 100 000, one lessons event each); an events run as in bench/run.mjs
// (BENCH_DURATION s), so that award lists hold what they hold at the main bench's read phase; each
// traffic warmed up (BENCH_WARMUP s); then BENCH_SLICES rounds (default 6) of BENCH_SLICE-s slices
// (default 2) of HGET, floor and read, in a rotating order. Per slice: req/s and the server
// process's CPU µs per request. Prints the medians of the three ratios. Reports; never gates.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, startEmbeddedRedis } from "../dist/embedded-redis.js";
import { Children, cpuSeconds, runBench } from "./processes.mjs";
import { median } from "./report.mjs";
import { eventRequests, load, phaseSettings, readRequests, seedUsers, SERVICE_EVENT_PATHS } from "./workload.mjs";

const settings = phaseSettings(100_000);
const rounds = settings.slices;
const slice = settings.slice;
const children = new Children();
const dir = mkdtempSync(join(tmpdir(), "laurel-read-floor-"));
let redisServer;

async function main() {
  redisServer = await startEmbeddedRedis({ dir, appendOnly: false });
  const env = { REDIS_URL: redisServer.url, LOG_LEVEL: "warn" };
  const servicePort = await freePort();
  const service = await children.start("service", "node", ["dist/main.js"], { ...env, PORT: String(servicePort), LAUREL_CONFIG: "bench/core-tenant.yaml", LAUREL_WORKER: "off" }, `http://127.0.0.1:${servicePort}/healthz`);
  let baselinePort = await freePort();
  while (baselinePort === servicePort) baselinePort = await freePort();
  const baseline = await children.start("baseline", "node", ["bench/baseline-server.mjs"], { ...env, PORT: String(baselinePort) }, `http://127.0.0.1:${baselinePort}/ping`);
  const serviceUrl = `http://127.0.0.1:${servicePort}`;
  const baselineUrl = `http://127.0.0.1:${baselinePort}`;

  await seedUsers(serviceUrl, settings);
  process.stdout.write(`events: ${settings.duration} s ... `);
  const events = await load(serviceUrl, eventRequests(settings.users, SERVICE_EVENT_PATHS), { connections: settings.connections, duration: settings.duration });
  console.log(`${Math.round(events.rps)} req/s`);

  const path = (id) => `/users/${id}/points/energy?awards=10`;
  const traffics = {
    hget: { url: baselineUrl, pid: baseline.pid, requests: readRequests(settings.users, (id) => `/users/${id}`) },
    floor: { url: baselineUrl, pid: baseline.pid, requests: readRequests(settings.users, (id) => `/floor${path(id)}`) },
    read: { url: serviceUrl, pid: service.pid, requests: readRequests(settings.users, (id) => `/v1${path(id)}`) },
  };
  const probe = await fetch(`${baselineUrl}/floor${path("user-1")}`, { headers: { "x-api-key": "demo-key" } });
  const read = await fetch(`${serviceUrl}/v1${path("user-1")}`, { headers: { "x-api-key": "demo-key" } });
  const floorText = await probe.text();
  // The floor route builds the demo tenant's keys with 16 shards: any other layout reads empty lists and measures nothing.
  if (!floorText.includes("|welcome")) throw new Error(`the floor route found no award records for user-1 (${floorText.slice(0, 80)}...): its keys do not match the service's`);
  console.log(`answer bytes for user-1: floor ${floorText.length}, read ${(await read.text()).length}`);
  for (const traffic of Object.values(traffics)) await load(traffic.url, traffic.requests, { connections: settings.connections, duration: settings.warmup });

  const names = Object.keys(traffics);
  const ratios = { "floor ÷ HGET": [], "read ÷ HGET": [], "read ÷ floor": [] };
  for (let round = 0; round < rounds; round++) {
    const rps = {};
    const line = [];
    for (let i = 0; i < names.length; i++) {
      const name = names[(round + i) % names.length];
      const { url, pid, requests } = traffics[name];
      const cpuBefore = cpuSeconds(pid);
      const result = await load(url, requests, { connections: settings.connections, duration: slice });
      rps[name] = result.rps;
      line.push(`${name} ${Math.round(result.rps)} (${(((cpuSeconds(pid) - cpuBefore) * 1e6) / result.requests).toFixed(1)} µs)`);
    }
    ratios["floor ÷ HGET"].push(rps.floor / rps.hget);
    ratios["read ÷ HGET"].push(rps.read / rps.hget);
    ratios["read ÷ floor"].push(rps.read / rps.floor);
    console.log(`round ${round + 1}: ${line.join("  ")}`);
  }
  console.log("\nreq/s ratios, median of the rounds (range); server CPU µs per request in parentheses above");
  for (const [name, values] of Object.entries(ratios)) {
    console.log(`  ${name.padEnd(14)} ${median(values).toFixed(2)} (${Math.min(...values).toFixed(2)}-${Math.max(...values).toFixed(2)})`);
  }
}

await runBench(main, async () => {
  await children.stopAll();
  await redisServer?.stop();
  rmSync(dir, { recursive: true, force: true });
});
