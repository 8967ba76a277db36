// node bench/memory.mjs [users] [days]   (after npm run build)
//
// How much Redis memory a user costs, and in which keys: the figures for sizing Redis (README,
// Operations, *Sizing Redis*). One service (config/demo.yaml unless MEM_CONFIG, LAUREL_CLOCK=manual,
// its stream worker in the process) on a scratch redis-server (no persistence). `users` (2000)
// users are active on each of `days` (30) days: each day every user sends MEM_LESSONS lessons
// events (3) and MEM_API_CALLS api-calls events (5), a MEM_KEYED share of them (0.5) with an
// Idempotency-Key, and the clock moves a day (so streaks, boards' weekly runs, the open day and
// month and the buckets behind them all move as in production). Then, once the stream worker has
// applied every record, every key is measured with MEMORY USAGE (SAMPLES 0: every element) and
// grouped by its kind (the layout in src/store/keys.ts), and printed per user; with INFO's
// used_memory and used_memory_dataset (keys, values and the keyspace's own tables), against the
// server once the service has started (its libraries loaded, no user yet). Reports; never gates.
//   node bench/memory.mjs 2000 30
//   MEM_KEYED=0 node bench/memory.mjs 1000 7
import { runBench, serviceOnScratchRedis } from "./processes.mjs";
import { load } from "./workload.mjs";

const users = Number(process.argv[2] ?? 2000);
const days = Number(process.argv[3] ?? 30);
const CONFIG = process.env.MEM_CONFIG ?? "config/demo.yaml";
const LESSONS = Number(process.env.MEM_LESSONS ?? 3);
const API_CALLS = Number(process.env.MEM_API_CALLS ?? 5);
const KEYED = Number(process.env.MEM_KEYED ?? 0.5);
const START = Date.parse("2026-03-02T12:00:00Z");
const DAY = 86_400_000;
const ZONES = ["UTC", "Europe/London", "America/New_York", "Asia/Tokyo", "Australia/Sydney"];

let service = null;
const cleanup = async () => service?.stop();

/** The kind of a key, from its name after the hash tag (src/store/keys.ts); BullMQ's keys as one. */
function kindOf(key) {
  const rest = key.replace(/^\{[^}]*\}:/, "");
  if (rest === key && !key.startsWith("laurel-")) return "other";
  const head = rest.split(":")[0];
  // BullMQ's queues are named laurel-<job>-<tenant> (src/jobs), under a hash tag of their own.
  if (head.startsWith("laurel-") || key.startsWith("bull:")) return "BullMQ: scheduled jobs and deliveries";
  const named = {
    u: "u: user hash (state, profile, idempotency keys without a window)",
    aw: "aw: award list per user and system (newest 100-120)",
    b: "b: daily buckets before the open month, per user and series",
    bl: "bl: open day and month of every user, per shard",
    xw: "xw: stream watermarks per shard",
    sh: "sh: streak periods per user",
    lh: "lh: rank history per user and board run",
    lb: "lb: board run participants",
    lg: "lg: board run groups",
    pz: "pz: points totals per shard and system",
    pa: "pa: points totals per attribute value",
    uv: "uv: users per attribute value",
    ik: "ik: Idempotency-Keys (with a window)",
    x: "x: shard stream (trimmed once applied)",
    xh: "xh: hook stream",
    sa: "sa/sd/sb: streak rankings per shard",
    sd: "sa/sd/sb: streak rankings per shard",
    sb: "sa/sd/sb: streak rankings per shard",
    tt: "tt: time triggers due per shard",
    agg: "agg: shard counters",
    wr: "wr: writers' call numbers",
  }[head];
  return named ?? `${head}: other tenant keys`;
}

async function main() {
  service = await serviceOnScratchRedis("laurel-memory-", { LAUREL_CONFIG: CONFIG, LAUREL_CLOCK: "manual", LOG_LEVEL: "warn" });
  const { url, redis } = service;
  // The server with Laurel's libraries and its start's few keys, before any user.
  const memory = async () => {
    const info = await redis.info("memory");
    return { used: Number(/used_memory:(\d+)/.exec(info)[1]), dataset: Number(/used_memory_dataset:(\d+)/.exec(info)[1]) };
  };
  const empty = await memory();
  const setClock = async (ms) => {
    const res = await fetch(`${url}/admin/v1/clock`, { method: "POST", headers: { "x-api-key": "demo-admin-key", "content-type": "application/json" }, body: JSON.stringify({ now: new Date(ms).toISOString() }) });
    if (!res.ok) throw new Error(`clock: ${res.status} ${await res.text()}`);
  };
  console.log(`memory: ${users} users x ${days} days, ${LESSONS} lessons + ${API_CALLS} api-calls events a user a day, ${KEYED} of them keyed, ${CONFIG}`);

  let sent = 0;
  let keyed = 0;
  const perDay = users * (LESSONS + API_CALLS);
  for (let d = 0; d < days; d++) {
    await setClock(START + d * DAY);
    let i = 0;
    const requests = [
      {
        method: "POST",
        headers: { "x-api-key": "demo-key", "content-type": "application/json" },
        setupRequest: (req) => {
          const n = i++;
          const user = n % users;
          const metric = Math.floor(n / users) < LESSONS ? "lessons" : "api-calls";
          const headers = { ...req.headers };
          if ((n * 0.6180339887) % 1 < KEYED) {
            headers["idempotency-key"] = `${d}-${n}-2f6c1a9e-8d3b-4c57-9e0a-${String(n).padStart(12, "0")}`;
            keyed++;
          } else delete headers["idempotency-key"];
          const id = `user-${user}`;
          return { ...req, headers, path: `/v1/metrics/${metric}/event`, body: JSON.stringify({ user: { id, email: `${id}@example.com`, tz: ZONES[user % ZONES.length] }, value: 1 }) };
        },
      },
    ];
    const result = await load(url, requests, { connections: 50, amount: perDay });
    sent += result.requests;
    if (result.non2xx > 0 || result.errors > 0) throw new Error(`day ${d + 1}: ${JSON.stringify(result.statusCodes)}, ${result.errors} errors`);
    process.stdout.write(`day ${d + 1}: ${perDay} events ... `);
  }
  await setClock(START + days * DAY);
  console.log("\nwaiting for the stream worker to apply every record ...");
  for (;;) {
    const text = await (await fetch(`${url}/metrics`)).text();
    const behind = text
      .split("\n")
      .filter((l) => /^laurel_stream_(pending|undelivered)_entries\{.*group="buckets"/.test(l))
      .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
    if (behind === 0) break;
    await new Promise((r) => setTimeout(r, 500));
  }

  const kinds = new Map();
  let cursor = "0";
  let keys = 0;
  do {
    const [next, batch] = await redis.scan(cursor, "COUNT", 1000);
    cursor = next;
    const pipeline = redis.pipeline();
    for (const key of batch) pipeline.memory("USAGE", key, "SAMPLES", 0);
    const sizes = await pipeline.exec();
    batch.forEach((key, j) => {
      const kind = kindOf(key);
      const entry = kinds.get(kind) ?? { keys: 0, bytes: 0 };
      entry.keys++;
      entry.bytes += Number(sizes[j][1] ?? 0);
      kinds.set(kind, entry);
    });
    keys += batch.length;
  } while (cursor !== "0");
  const after = await memory();
  const used = after.used - empty.used;
  const dataset = after.dataset - empty.dataset;
  const sum = [...kinds.values()].reduce((s, e) => s + e.bytes, 0);

  console.log(`\n${sent} events (${keyed} keyed) for ${users} users over ${days} days; ${keys} keys\n`);
  console.log("kind                                                              keys    bytes a user   share");
  for (const [kind, e] of [...kinds].sort((a, b) => b[1].bytes - a[1].bytes)) {
    console.log(`${kind.padEnd(64)}  ${String(e.keys).padStart(7)}  ${String(Math.round(e.bytes / users)).padStart(12)}  ${((100 * e.bytes) / sum).toFixed(1).padStart(5)}%`);
  }
  console.log(`${"keys measured (MEMORY USAGE)".padEnd(64)}  ${String(keys).padStart(7)}  ${String(Math.round(sum / users)).padStart(12)}`);
  console.log(`${"used_memory_dataset since the start (keys and their tables)".padEnd(64)}  ${"".padStart(7)}  ${String(Math.round(dataset / users)).padStart(12)}   (${(dataset / 2 ** 20).toFixed(1)} MB)`);
  console.log(`${"used_memory since the start (+ scripts, clients, buffers)".padEnd(64)}  ${"".padStart(7)}  ${String(Math.round(used / users)).padStart(12)}   (${(used / 2 ** 20).toFixed(1)} MB)`);
}

await runBench(main, cleanup);
