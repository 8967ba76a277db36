// npm run bench:script-cost: Redis instructions per event script, counted by callgrind.
//
// The wall-clock figures of bench/run.mjs drift by a third from run to run on a shared 2-core
// VM, which hides any change to the event script smaller than that. Instructions executed by
// redis-server do not drift: the same build, data and requests give the same count within a
// fraction of a percent, whatever else the machine does. So this bench runs redis-server under
// `valgrind --tool=callgrind` (instrumentation off until the measured phase), starts the service
// on it, seeds users, then counts what Redis executes for a fixed sequence of events, per metric;
// then per stream record, the stream worker's apply script (over the seed's records: every series
// new; over the phases' records: returning users, on the day they already have; over copies of
// those records moved to the next day and the day after: each record opens a day for its series;
// and over copies moved to the next month: each record opens a month).
// Each config runs twice: as written, and with one webhook endpoint subscribed to the milestone
// types (as bench/webhooks.mjs; COST_TYPES=a,b for others): the event scripts then also select
// records into the hook streams (lua/includes/hooks.lua), and the webhook consumer's read
// (XREADGROUP and the acknowledging script, as its loop runs them) is counted per record it reads.
// Instructions are not time (cache misses are not counted, and the zset commands' misses are
// most of their cost under load), but a change that saves instructions saves Redis CPU.
//
// Usage: node bench/script-cost.mjs [config ...]   (default: bench/core-tenant.yaml config/demo.yaml)
// Environment: COST_USERS (seeded users, default 2000), COST_EVENTS (events per metric, default 1000),
// COST_METRICS (default lessons,api-calls), COST_WORKER (off: skip the stream worker and the
// webhook filter rows), COST_SERVICE (the service's entry, default dist/main.js: point it at another build, with its
// lua/ beside its dist/, to compare two trees), COST_KEEP (a directory: keep each phase's callgrind
// dump there as cg.<n>.out, for callgrind_annotate; with a redis-server built with symbols first on
// PATH the dumps name Lua's and Redis's own functions), COST_TYPES (the endpoint's event types,
// comma-separated; default the milestones), COST_ENDPOINT=only (only the runs with the endpoint) or none (only the runs without: a build older than
// the hook streams).
// Needs valgrind (Debian: apt-get install -y valgrind). Reports; never gates.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { pino } from "pino";
import { loadConfigFile } from "../dist/config/load.js";
import { freePort } from "../dist/embedded-redis.js";
import { shardStreams, StreamWorker } from "../dist/jobs/stream-worker.js";
import { periodOfDay } from "../dist/domain/periods.js";
import { loadLua } from "../dist/store/lua-loader.js";
import { runScript } from "../dist/store/redis-script.js";
import { countInstructions } from "./callgrind.mjs";
import { Children, runBench } from "./processes.mjs";
import { eventBody, seedUsers } from "./workload.mjs";

const configs = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ["bench/core-tenant.yaml", "config/demo.yaml"];
const users = Number(process.env.COST_USERS ?? 2000);
const events = Number(process.env.COST_EVENTS ?? 1000);
const METRICS = (process.env.COST_METRICS ?? "lessons,api-calls").split(",");

const children = new Children();
const cleanups = [];
const cleanup = async () => {
  await children.stopAll();
  for (const fn of cleanups.splice(0)) await fn();
};

/** redis-server under callgrind, instrumentation off; resolves once it answers PING. */
async function startRedisUnderCallgrind(dir) {
  const port = await freePort();
  const child = spawn("valgrind", ["--tool=callgrind", "--instr-atstart=no", `--callgrind-out-file=${dir}/cg.out`, "redis-server", "--port", String(port), "--save", "", "--appendonly", "no", "--dir", dir], { stdio: "ignore" });
  const stop = () => new Promise((resolve) => (child.exitCode !== null ? resolve() : (child.once("exit", resolve), child.kill("SIGTERM"))));
  cleanups.push(stop);
  const redis = new Redis(port, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on("error", () => {}); // refused while valgrind starts: the loop below retries
  for (let i = 0; ; i++) {
    try {
      await redis.connect();
      await redis.ping();
      break;
    } catch {
      redis.disconnect();
      if (i > 300) throw new Error("redis-server under valgrind did not start (is valgrind installed?)");
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return { port, pid: child.pid, redis, stop, dir };
}

/** Redis's functions counted inclusive: the script (luaCallFunction), the commands it calls, msgpack. */
const SCRIPT_FUNCTIONS = ["luaCallFunction", "scriptCall", "mp_unpack", "mp_pack"];

/** The types an application typically reacts to (bench/webhooks.mjs MILESTONES): rare per event. */
const MILESTONES = ["points.level_changed", "achievement.completed", "streak.started", "streak.lost", "streak.freeze_consumed"];
/** The endpoint's types: COST_TYPES (comma-separated; points.changed selects every event's record), else the milestones. */
const TYPES = process.env.COST_TYPES ? process.env.COST_TYPES.split(",") : MILESTONES;
const TYPES_LABEL = process.env.COST_TYPES ? process.env.COST_TYPES : "milestones";

/** The config plus one endpoint on its tenant subscribed to TYPES (the file's tenant block ends it). */
function withEndpoint(config, dir) {
  const path = join(dir, "with-endpoint.yaml");
  const secret = `whsec_${Buffer.from("bench-secret-bench-secret-32byte").toString("base64")}`;
  writeFileSync(path, `${readFileSync(config, "utf8").trimEnd()}\n    webhooks:\n      - key: bench\n        url: "http://127.0.0.1:9/hooks"\n        secret: "${secret}"\n        events: [${TYPES.join(", ")}]\n`);
  return path;
}

/** A fixed sequence of users (a multiplicative walk over 0..users-1), the same on every run. */
const userAt = (i) => (i * 7919 + 13) % users;

/**
 * One config as written (`endpoint` false: the event scripts and the stream worker), or with the
 * milestone endpoint (the event scripts, and the webhook consumer's read of the hook streams).
 */
async function measureConfig(config, endpoint) {
  const dir = mkdtempSync(join(tmpdir(), "laurel-cost-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const redis = await startRedisUnderCallgrind(dir);
  const port = await freePort();
  const label = endpoint ? `${config} + endpoint (${TYPES_LABEL})` : config;
  // No delivery workers: their BullMQ polls would run Lua inside the measured phases (nothing is delivered here anyway).
  const env = { REDIS_URL: `redis://127.0.0.1:${redis.port}`, PORT: String(port), LAUREL_CONFIG: endpoint ? withEndpoint(config, dir) : config, LAUREL_WORKER: "off", LAUREL_DELIVERIES: "off", LOG_LEVEL: "warn" };
  await children.start(`service ${label}`, "node", [process.env.COST_SERVICE ?? "dist/main.js"], env, `http://127.0.0.1:${port}/healthz`, 120_000);
  const url = `http://127.0.0.1:${port}`;
  await seedUsers(url, { users, connections: 20 }, `${config}: `);
  const worker = !endpoint && process.env.COST_WORKER !== "off" ? await seedForWorker(config, redis) : null;
  const post = async (metric, n) => {
    const res = await fetch(`${url}/v1/metrics/${metric}/event`, { method: "POST", headers: { "x-api-key": "demo-key", "content-type": "application/json" }, body: eventBody(n) });
    if (res.status !== 201) throw new Error(`${metric} event answered ${res.status}: ${await res.text()}`);
    await res.arrayBuffer();
  };
  const rows = [];
  for (const metric of METRICS) {
    for (let i = 0; i < 200; i++) await post(metric, userAt(i)); // warm: the user's state as traffic leaves it
    const before = await redis.redis.info("commandstats");
    const { counts: d } = await countInstructions(redis.pid, dir, SCRIPT_FUNCTIONS, async () => {
      for (let i = 0; i < events; i++) await post(metric, userAt(i + 200));
    });
    const after = await redis.redis.info("commandstats");
    const calls = scriptCalls(after) - scriptCalls(before);
    const inside = commandCounts(after, before, calls);
    rows.push({
      config: label,
      metric,
      scripts: calls,
      perRequest: d.total / events,
      perScript: d.luaCallFunction / calls,
      commands: d.scriptCall / calls,
      msgpack: (d.mp_unpack + d.mp_pack) / calls,
      inside,
    });
  }
  if (endpoint) rows.push(await measureHookRead(config, label, redis));
  if (worker) rows.push(...(await measureStreamWorker(config, redis, worker)));
  redis.redis.disconnect();
  await children.stopAll();
  await redis.stop();
  return rows;
}

/** "zadd 2.00, zrem 1.98, ...": commands per script call between two INFO commandstats. */
function commandCounts(after, before, scripts) {
  const counts = (info) => new Map([...info.matchAll(/cmdstat_(\w+):calls=(\d+)/g)].map((m) => [m[1], Number(m[2])]));
  const a = counts(after), b = counts(before);
  return [...a]
    .filter(([name]) => !["fcall", "evalsha", "info", "ping", "function", "script"].includes(name))
    .map(([name, n]) => [name, (n - (b.get(name) ?? 0)) / scripts])
    .filter(([, per]) => per >= 0.01) // not the service's background polls (BullMQ, time triggers)
    .sort((x, y) => y[1] - x[1])
    .map(([name, per]) => `${name} ${per.toFixed(2)}`)
    .join(", ");
}

/** One StreamWorker drain in this process, counted: a row, instructions per record, all of Redis (the apply script and what it calls). */
async function measureDrain(config, redis, worker, label) {
  const before = await redis.redis.info("commandstats");
  const { result: records, counts: d } = await countInstructions(redis.pid, redis.dir, SCRIPT_FUNCTIONS, () => worker.drain());
  const after = await redis.redis.info("commandstats");
  return { config, metric: `${label} (${records} records)`, perRequest: d.total / records, perScript: d.luaCallFunction / records, commands: d.scriptCall / records, msgpack: (d.mp_unpack + d.mp_pack) / records, inside: commandCounts(after, before, records) };
}

/**
 * After the seed: the stream worker (the service runs with LAUREL_WORKER=off) applies the seed's
 * records, counted: every series is new there.
 */
async function seedForWorker(config, redis) {
  const tenants = loadConfigFile(config);
  const streams = shardStreams(tenants);
  const worker = new StreamWorker({ redis: redis.redis, tenants, logger: pino({ level: "silent" }) });
  const seedRow = await measureDrain(config, redis, worker, "stream worker, the seed: new series");
  const marks = new Map();
  for (const s of streams) marks.set(s.key, (await redis.redis.hget(s.watermarks, "buckets")) ?? "0-0");
  return { worker, streams, seedRow, marks };
}

/**
 * The stream worker (issue 6's cost) over the phases' records: returning users, every record on
 * the day its series already has (the common case: the month member is not touched). Then the
 * same records copied to the first day of the month after theirs (counted): every record opens a
 * month, so the worker writes the closed month's member (once per series and month). Then copies
 * on that month's second day (applied, not counted) and third (counted): every record opens a
 * day for its series, so the worker also closes the open day (the rarest case a user with one
 * event a day makes the common one), inside one month whatever the run's date.
 */
async function measureStreamWorker(config, redis, { worker, streams, seedRow, marks }) {
  const phaseRecords = [];
  for (const s of streams) phaseRecords.push(...(await redis.redis.xrange(s.key, `(${marks.get(s.key)}`, "+")).map(([, flat]) => [s.key, flat]));
  const rows = [seedRow, await measureDrain(config, redis, worker, "stream worker, returning users: the same day")];
  const moved = async (to) => {
    for (const [key, flat] of phaseRecords) await redis.redis.xadd(key, "*", ...movedRecord(flat, to));
  };
  await moved(firstOfNextMonth);
  const monthRow = await measureDrain(config, redis, worker, "stream worker, returning users: each record opens a month");
  await moved((day) => firstOfNextMonth(day) + 1);
  await worker.drain();
  await moved((day) => firstOfNextMonth(day) + 2);
  rows.push(await measureDrain(config, redis, worker, "stream worker, returning users: each record opens a day"), monthRow);
  return rows;
}

/** The first day of the month after `day`'s. */
function firstOfNextMonth(day) {
  let d = day + 1;
  const month = periodOfDay(day, "monthly");
  while (periodOfDay(d, "monthly") === month) d += 1;
  return d;
}

/** A record's fields with an event record's day moved to `to(day)` (and its month); other records as they are. */
function movedRecord(flat, to) {
  const out = [...flat];
  const e = out.indexOf("e");
  if (out[out.indexOf("k") + 1] !== "ev" || e < 0) return out;
  const parts = out[e + 1].split("|");
  if (parts.length !== 6) return out;
  const day = to(Number(parts[3]));
  parts[3] = String(day);
  parts[4] = String(periodOfDay(day, "monthly"));
  out[e + 1] = parts.join("|");
  return out;
}

/**
 * The webhook consumer's read over the hook streams, as its loop does it (src/jobs/stream-group.ts):
 * XREADGROUP of up to 100 records over every hook stream, then per shard lua/ackStream-1.lua
 * (XACK and the trim). Instructions per record read, i.e. per record the consumer turns into
 * deliveries: the payloads and the BullMQ adds that follow are not counted. The service created
 * the group at its start, so every record selected since (the seed's and the phases') is read.
 */
async function measureHookRead(config, label, redis) {
  const tenants = loadConfigFile(config);
  const hooks = shardStreams(tenants, "hooks");
  let written = 0;
  for (const s of shardStreams(tenants)) written += await redis.redis.xlen(s.key);
  const ack = loadLua("ackStream-1");
  let read = 0;
  const { counts: d } = await countInstructions(redis.pid, redis.dir, SCRIPT_FUNCTIONS, async () => {
    for (;;) {
      const reply = await redis.redis.xreadgroup("GROUP", "webhooks", "cost", "COUNT", 100, "STREAMS", ...hooks.map((s) => s.key), ...hooks.map(() => ">"));
      if (!reply) break;
      for (const [key, entries] of reply) {
        read += entries.length;
        await runScript(redis.redis, ack, [key], ["webhooks", ...entries.map(([id]) => id)]);
      }
    }
  });
  const perRead = (x) => (read === 0 ? 0 : x / read);
  return { config: label, metric: `webhook consumer's read (${read} of ${written} records selected)`, perRequest: perRead(d.total), perScript: perRead(d.luaCallFunction), commands: perRead(d.scriptCall), msgpack: 0, inside: "xreadgroup per 100 records, ackStream-1 per shard and read" };
}

function scriptCalls(info) {
  let calls = 0;
  for (const m of info.matchAll(/cmdstat_(fcall|evalsha):calls=(\d+)/g)) calls += Number(m[2]);
  return calls;
}

async function main() {
  if (spawnSync("valgrind", ["--version"], { stdio: "ignore" }).status !== 0) throw new Error("valgrind is not installed (Debian: apt-get install -y valgrind)");
  const rows = [];
  const variants = process.env.COST_ENDPOINT === "only" ? [true] : process.env.COST_ENDPOINT === "none" ? [false] : [false, true];
  for (const config of configs) for (const endpoint of variants) rows.push(...(await measureConfig(config, endpoint)));
  const k = (x) => `${(x / 1000).toFixed(1)}k`;
  console.log(`\nRedis instructions (callgrind), ${events} events per metric after ${users} seeded users and 200 warm-up events:`);
  console.log("| config | metric | per request | per event script | commands it ran | msgpack (state) | rest of the script: Lua, argument and reply conversion | commands per script |");
  console.log("|---|---|---|---|---|---|---|---|");
  for (const r of rows) {
    console.log(`| ${r.config} | ${r.metric} | ${k(r.perRequest)} | ${k(r.perScript)} | ${k(r.commands)} | ${k(r.msgpack)} | ${k(r.perScript - r.commands - r.msgpack)} | ${r.inside} |`);
  }
}

await runBench(main, cleanup);
