// npm run bench:read-cost: the service's instructions per metering read, counted by callgrind,
// against the bare baseline's per HGET.
//
// The read ÷ HGET target (bench/run.mjs) compares two figures that each drift by a third on this
// shared 2-core VM, so a change to the read path worth a few percent cannot be seen in req/s.
// Instructions executed by the service process do not drift: here the service (and then the
// baseline of bench/baseline-server.mjs) runs under `valgrind --tool=callgrind`, instrumentation
// off until the measured rounds, against a plain redis-server; users are seeded, the read is
// warmed up until V8 has optimised it, and each round counts what the process executes (every
// thread: the JIT's and the GC's too) for a fixed number of reads of the core tenant's energy
// system, 10 connections at a time. Rounds agree within ~1%.
// Instructions are not time: the kernel's share (the HTTP and Redis sockets, about half of the
// service's CPU per read here) is not counted, nor are cache misses. So the ratio printed is not
// the req/s ratio; a change that saves instructions saves user-space CPU.
//
// Usage: node bench/read-cost.mjs [service entry]   (default dist/main.js: another build's, to compare two trees)
// COST_TRAFFIC=events counts the event call instead: the events phase's traffic (80% lessons, 20%
// api-calls, random seeded users) against the baseline's POST /event (JSON.parse + one EVALSHA).
// Environment: COST_USERS (seeded users, default 2000), COST_READS (reads per round, default 3000),
// COST_ROUNDS (default 3), COST_SERVICE_ENV (NAME=value,... for the service), COST_KEEP (a directory:
// keep each round's callgrind dump there, for callgrind_annotate).
// Needs valgrind (Debian: apt-get install -y valgrind). Reports; never gates.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, startEmbeddedRedis } from "../dist/embedded-redis.js";
import { countInstructions } from "./callgrind.mjs";
import { runBench } from "./processes.mjs";
import { median } from "./report.mjs";
import { eventRequests, load, readRequests, seedUsers, SERVICE_EVENT_PATHS } from "./workload.mjs";

const entry = process.argv[2] ?? "dist/main.js";
const users = Number(process.env.COST_USERS ?? 2000);
const reads = Number(process.env.COST_READS ?? 3000);
const rounds = Number(process.env.COST_ROUNDS ?? 3);
const serviceEnv = Object.fromEntries((process.env.COST_SERVICE_ENV ?? "").split(",").filter(Boolean).map((pair) => [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)]));
const traffic = process.env.COST_TRAFFIC ?? "read";
if (traffic !== "read" && traffic !== "events") throw new Error("COST_TRAFFIC is read or events");
const CONNECTIONS = 10;
const WARM_READS = 20_000;

const cleanups = [];
const cleanup = async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
};

/** `node script` under callgrind, instrumentation off; resolves once GET readyPath answers 200. */
async function startUnderCallgrind(script, env, readyPath) {
  const dir = mkdtempSync(join(tmpdir(), "laurel-read-cost-"));
  const port = await freePort();
  const child = spawn("valgrind", ["-q", "--tool=callgrind", "--instr-atstart=no", "--smc-check=all-non-file", `--callgrind-out-file=${dir}/cg.out`, "node", script], {
    env: { ...process.env, ...env, PORT: String(port) },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) await new Promise((resolve) => (child.once("exit", resolve), child.kill("SIGKILL")));
    rmSync(dir, { recursive: true, force: true });
  };
  cleanups.push(stop);
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${script} exited under valgrind (is valgrind installed?)`);
    try {
      const res = await fetch(`${url}${readyPath}`);
      await res.arrayBuffer();
      if (res.ok) break;
    } catch {
      // not listening yet: valgrind starts node slowly
    }
    if (i > 600) throw new Error(`${script} not ready under valgrind after 120 s`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return { pid: child.pid, dir, url, stop };
}

/** k instructions per request of `traffic`, per round. */
async function measure(label, proc, traffic) {
  await load(proc.url, traffic, { connections: CONNECTIONS, amount: WARM_READS });
  const perRound = [];
  for (let round = 0; round < rounds; round++) {
    const { result, counts } = await countInstructions(proc.pid, proc.dir, [], () => load(proc.url, traffic, { connections: CONNECTIONS, amount: reads }));
    if (result.non2xx > 0 || result.errors > 0) throw new Error(`${label}: ${result.non2xx} non-2xx answers, ${result.errors} errors`);
    perRound.push(counts.total / result.requests / 1000);
  }
  const middle = median(perRound);
  console.log(`${label.padEnd(34)} ${middle.toFixed(1)}k instructions per request (rounds: ${perRound.map((k) => k.toFixed(1)).join(", ")})`);
  return middle;
}

async function main() {
  const redisDir = mkdtempSync(join(tmpdir(), "laurel-read-cost-redis-"));
  const redis = await startEmbeddedRedis({ dir: redisDir, appendOnly: false });
  cleanups.push(async () => {
    await redis.stop();
    rmSync(redisDir, { recursive: true, force: true });
  });
  console.log(`laurel ${traffic} cost: ${users} users, ${WARM_READS} warm-up requests, ${rounds} rounds of ${reads} requests, ${CONNECTIONS} connections; service ${entry}`);
  // One at a time, so that neither shares the machine with the other; the baseline's keys ({b}:u:*) are its own.
  const service = await startUnderCallgrind(entry, { REDIS_URL: redis.url, LOG_LEVEL: "warn", LAUREL_CONFIG: "bench/core-tenant.yaml", LAUREL_WORKER: "off", LAUREL_DELIVERIES: "off", ...serviceEnv }, "/healthz");
  await seedUsers(service.url, { users, connections: CONNECTIONS });
  const events = traffic === "events";
  const served = events
    ? await measure("events POST /v1/metrics/*/event", service, eventRequests(users, SERVICE_EVENT_PATHS))
    : await measure("read GET /v1/users/*/points/energy", service, readRequests(users, (id) => `/v1/users/${id}/points/energy?awards=10`));
  await service.stop();
  const baseline = await startUnderCallgrind("bench/baseline-server.mjs", { REDIS_URL: redis.url }, "/ping");
  const bare = events
    ? await measure("baseline POST → EVALSHA", baseline, eventRequests(users, { lessons: "/event", apiCalls: "/event" }))
    : await measure("baseline GET → HGET", baseline, readRequests(users, (id) => `/users/${id}`));
  await baseline.stop();
  console.log(`  info  ${events ? "EVALSHA ÷ event" : "HGET ÷ read"} in user-space instructions ${(bare / served).toFixed(2)} (the kernel's share, not counted, is about the same for both)`);
}

await runBench(main, cleanup);
