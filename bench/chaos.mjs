// node bench/chaos.mjs [seconds] [seed]   (after npm run build)
//
// Exactly once under faults: the mechanisms each test covers alone (lost-reply, crash-durability,
// concurrency, graceful-stop) run together, under load, with faults injected at random. A scratch
// redis-server (AOF on, appendfsync always) on a port below the ephemeral range, two service
// processes sharing a port (LAUREL_REUSE_PORT=1, bench/core-tenant.yaml, LAUREL_WORKER=off), and
// CHAOS_CLIENTS clients (32) for `seconds` (60), each owning CHAOS_USERS users (4) and posting
// `lessons` events (value 1), one at a time, each logical event with its own Idempotency-Key.
// A client that gets a 5xx or a network error (or no answer in 10 s) sends the same event again
// with the same key, until it gets 201 or 202 (at most CHAOS_ATTEMPTS times, 1000; the backoff
// grows to 500 ms), and counts the event acknowledged once. Meanwhile, at seeded random
// intervals (CHAOS_GAP_MS, "300-3000"), one fault of the kinds in CHAOS_FAULTS (default all):
//   kill     CLIENT KILL TYPE normal: every connection of the services drops (lost replies)
//   pause    SIGSTOP of redis-server for 0.2-2 s, then SIGCONT
//   restart  SHUTDOWN of redis-server, started again on its directory and port (AOF reload)
//   crash    SIGKILL of redis-server, started again likewise (appendfsync always keeps what it answered)
//   term     a new service process started on the port, then SIGTERM to the oldest (graceful stop)
// Faults stop at the deadline; the clients then finish the event they hold (retrying it until
// acknowledged). Checked: each answer's metric total (one client per user, one event at a time:
// the total must be the user's acknowledged count, this one included), and at the end each
// user's stored total (GET /v1/users/{id}/metrics/lessons, `current`) and xp (GET
// /v1/users/{id}/points/xp, `total`: 10 a lesson in the core tenant), which must EQUAL the count
// of acknowledged events (no loss, no double count). Prints the faults by kind, requests,
// retries, 5xx by message, network errors by code, the re-sent calls the last redis-server ran
// (EVAL), and any mismatching user with its history.
//   node bench/chaos.mjs 60 1
//   CHAOS_FAULTS=kill node bench/chaos.mjs 30 7
//   CHAOS_FAULTS=restart,term CHAOS_CLIENTS=8 node bench/chaos.mjs 20 3
//
// CHAOS_HOOKS=1: outbound webhooks under the same faults. The tenant file is bench/core-tenant.yaml
// plus one endpoint (`chaos`, subscribed to points.changed) written to a temporary file, pointing
// at a node:http receiver on a thread of this process (bench/hook-receiver.mjs: on the main
// thread, the load generator's busy turns held its answers past Laurel's timeout) that records
// each POST's `webhook-id` and body and answers 200. The services then run with their stream worker and webhook consumer on (the
// default: LAUREL_WORKER is not set to off; delivery workers run in every service process), so
// `term` also stops consumers mid-turn. CHAOS_HOOK_FAIL=f (default 0): each POST is answered 500
// with probability f (seeded), at most once per webhook-id, so a failed delivery is retried once
// by BullMQ after the README's first backoff (30 s ±20%; the tenant file has no retry options,
// and a second 500 would put the next retry ~75 s later). After the load and the stored totals'
// check, the script polls (at most CHAOS_HOOK_WAIT s, 120) until every stored change has been
// answered 200. Each xp change is named by its user and its `points.total` (10 × the n-th applied
// lesson: one client per user, one event at a time); the stored lessons give the changes that
// exist (1..n), the acknowledged answers' totals those acknowledged (a replayed answer names the
// change it replays, so a lost answer then replayed is still one change). Checked: every stored
// change delivered (missing), no change under two webhook-ids (double id), no webhook-id for two
// changes, and deliveries of changes never acknowledged, classed as applied but given up on (the
// stored total covers them: the client stopped retrying an event that had been applied; only
// with a low CHAOS_ATTEMPTS) or not stored at all (a bug). Duplicates of one id are allowed (at
// least once) and counted.
//   CHAOS_HOOKS=1 node bench/chaos.mjs 60 5
//   CHAOS_HOOKS=1 CHAOS_HOOK_FAIL=0.1 CHAOS_FAULTS=kill,restart,term node bench/chaos.mjs 60 6
// Reports; never gates (exit 0 on a mismatch too; exit 1 only when it could not run).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { portOutsideEphemeralRange, startEmbeddedRedis } from "../dist/embedded-redis.js";
import { prng, startHookReceiver } from "./hook-receiver.mjs";
import { Children, listenerCount, runBench } from "./processes.mjs";

const seconds = Number(process.argv[2] ?? 60);
const seed = Number(process.argv[3] ?? Math.floor(Math.random() * 1e9));
const CLIENTS = Number(process.env.CHAOS_CLIENTS ?? 32);
const USERS = Number(process.env.CHAOS_USERS ?? 4);
const ATTEMPTS = Number(process.env.CHAOS_ATTEMPTS ?? 1000);
const KINDS = ["kill", "pause", "restart", "crash", "term"];
const faults = (process.env.CHAOS_FAULTS ?? KINDS.join(",")).split(",").filter(Boolean);
for (const f of faults) if (!KINDS.includes(f)) throw new Error(`unknown fault kind ${f} (known: ${KINDS.join(", ")})`);
const [gapMin, gapMax] = (process.env.CHAOS_GAP_MS ?? "300-3000").split("-").map(Number);
const XP_PER_LESSON = 10; // bench/core-tenant.yaml: xp's lesson-completed trigger, threshold 1, 10 points
const ENTRY = "dist/main.js";
const HOOKS = process.env.CHAOS_HOOKS === "1";
const HOOK_FAIL = Number(process.env.CHAOS_HOOK_FAIL ?? 0);
const HOOK_WAIT_S = Number(process.env.CHAOS_HOOK_WAIT ?? 120);

const children = new Children();
const cleanups = [];
const cleanup = async () => {
  await children.stopAll();
  for (const fn of cleanups.splice(0)) await fn();
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const count = (map, key, n = 1) => map.set(key, (map.get(key) ?? 0) + n);
const show = (map) => [...map].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${n} ${k}`).join("; ") || "none";

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "laurel-chaos-"));
  const redisPort = await portOutsideEphemeralRange();
  let server = await startEmbeddedRedis({ dir, port: redisPort, fsync: "always" });
  cleanups.push(async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const redisUrl = server.url;
  const admin = new Redis(redisUrl, { maxRetriesPerRequest: null, lazyConnect: true });
  admin.on("error", () => undefined);
  cleanups.unshift(async () => admin.disconnect());
  await admin.connect();
  const redisPid = async () => Number(/process_id:(\d+)/.exec(await admin.info("server"))[1]);

  const port = await portOutsideEphemeralRange();
  const env = { REDIS_URL: redisUrl, PORT: String(port), LAUREL_REUSE_PORT: "1", LAUREL_WORKER: "off", LAUREL_CONFIG: "bench/core-tenant.yaml", LOG_LEVEL: "error" };
  const hooks = HOOKS ? await startReceiver() : null;
  if (hooks) {
    const confDir = mkdtempSync(join(tmpdir(), "laurel-chaos-conf-"));
    cleanups.push(async () => rmSync(confDir, { recursive: true, force: true }));
    const file = join(confDir, "tenant.yaml");
    const core = readFileSync("bench/core-tenant.yaml", "utf8");
    writeFileSync(file, `${core.trimEnd()}\n    webhooks:\n      - key: chaos\n        url: "${hooks.url}"\n        secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"\n        events: [points.changed]\n`);
    env.LAUREL_CONFIG = file;
    delete env.LAUREL_WORKER; // the stream worker and the webhook consumer run in each service
  }
  let serial = 0;
  const services = [];
  const startService = async () => {
    const name = `service-${++serial}`;
    const before = await listenerCount(port);
    await children.start(name, "node", [ENTRY], env, `http://127.0.0.1:${port}/healthz`, 60_000);
    // Another process may have answered the readiness check: wait until this one listens too.
    while ((await listenerCount(port)) <= before) await sleep(50);
    services.push(name);
  };
  await startService();
  await startService();

  console.log(`chaos: seed ${seed}, ${seconds} s, ${CLIENTS} clients x ${USERS} users, faults ${faults.join(",")} every ${gapMin}-${gapMax} ms, redis :${redisPort} (AOF, appendfsync always), service :${port}`);
  if (hooks) console.log(`hooks: endpoint chaos (points.changed) -> ${hooks.url}, worker and consumer in each service, receiver answers 500 to ${HOOK_FAIL} of POSTs (at most once per id), wait <= ${HOOK_WAIT_S} s`);

  // --- clients ---
  const stats = { requests: 0, retries: 0, events: 0, status: new Map(), fiveXX: new Map(), network: new Map(), gaveUp: 0, badAnswers: [] };
  const users = new Map(); // id -> { acked, history: [] }
  let loadEnds = Date.now() + seconds * 1000;
  const base = `http://127.0.0.1:${port}/v1/metrics/lessons/event`;

  /** One logical event: sent, and sent again with its key, until acknowledged. Returns the answer's body, or null. */
  async function deliver(user, key, u) {
    let backoff = 20;
    for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
      stats.requests++;
      if (attempt > 1) stats.retries++;
      let outcome;
      try {
        const res = await fetch(base, {
          method: "POST",
          headers: { "x-api-key": "demo-key", "content-type": "application/json", "idempotency-key": key },
          body: JSON.stringify({ user: { id: user, tz: "UTC" }, value: 1 }),
          signal: AbortSignal.timeout(10_000),
        });
        const text = await res.text();
        count(stats.status, res.status);
        outcome = `${res.status}`;
        if (res.status === 201 || res.status === 202) {
          const body = JSON.parse(text);
          u.history.push(`${key} #${attempt} ${res.status}${body.idempotentReplayed ? " replay" : ""} total=${body.total}${body.points?.xp ? ` xp+${body.points.xp.added}=${body.points.xp.total}` : ""}`);
          return body;
        }
        if (res.status < 500) throw new Error(`${user} ${key}: unexpected ${res.status} ${text.slice(0, 200)}`);
        let message = text;
        try {
          message = JSON.parse(text).message ?? text;
        } catch {
          // not JSON: the text as it is
        }
        count(stats.fiveXX, `${res.status} ${String(message).slice(0, 140)}`);
      } catch (err) {
        if (err instanceof Error && err.message.includes("unexpected")) throw err;
        const code = err?.cause?.code ?? err?.name ?? String(err);
        count(stats.network, code);
        outcome = code;
      }
      u.history.push(`${key} #${attempt} ${outcome}`);
      await sleep(backoff);
      backoff = Math.min(500, backoff * 2);
    }
    return null;
  }

  async function client(c) {
    const own = Array.from({ length: USERS }, (_, i) => `chaos-${c}-${i}`);
    for (const id of own) users.set(id, { acked: 0, history: [], unresolved: 0, ackedTotals: new Set() });
    for (let n = 0; Date.now() < loadEnds; n++) {
      const id = own[n % USERS];
      const u = users.get(id);
      const key = `ev-${c}-${n}`;
      stats.events++;
      const body = await deliver(id, key, u);
      if (body === null) {
        stats.gaveUp++;
        u.unresolved++;
        continue;
      }
      u.acked++;
      u.ackedTotals.add(body.total); // the change this acknowledgement stands for (the webhook check)
      // One client per user, one event at a time: the answer's total is the acknowledged count.
      if (body.total !== u.acked) stats.badAnswers.push(`${id} ${key}: answer total ${body.total}, acknowledged ${u.acked}`);
      const xp = body.points?.xp;
      if (xp && (xp.added !== XP_PER_LESSON || xp.total !== XP_PER_LESSON * u.acked)) stats.badAnswers.push(`${id} ${key}: answer xp +${xp.added} = ${xp.total}, acknowledged ${u.acked}`);
    }
  }

  // --- faults ---
  // mulberry32: the faults' times and kinds, reproducible from the seed printed.
  const rand = prng(seed);
  const done = new Map();
  const faultLog = [];
  const faultStarts = []; // { at, kind }: the webhook check attributes duplicates to the fault before them
  const t0 = Date.now();
  const at = () => ((Date.now() - t0) / 1000).toFixed(1);
  const restartRedis = async (how) => {
    const pid = await redisPid();
    const exited = new Promise((resolve) => {
      const poll = () => {
        try {
          process.kill(pid, 0);
          setTimeout(poll, 20);
        } catch {
          resolve();
        }
      };
      poll();
    });
    if (how === "restart") {
      const conn = new Redis(redisUrl, { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
      conn.on("error", () => undefined);
      await conn.connect();
      await conn.call("SHUTDOWN").catch(() => undefined); // answered by the connection's close
      conn.disconnect();
    } else {
      process.kill(pid, "SIGKILL");
    }
    await exited;
    await server.stop(); // releases the data directory's record
    server = await startEmbeddedRedis({ dir, port: redisPort, fsync: "always" });
  };
  const inject = {
    kill: async () => `${await admin.call("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")} connections`,
    pause: async () => {
      const ms = Math.round(200 + rand() * 1800);
      const pid = await redisPid();
      process.kill(pid, "SIGSTOP");
      await sleep(ms);
      process.kill(pid, "SIGCONT");
      return `${ms} ms`;
    },
    restart: async () => {
      const started = Date.now();
      await restartRedis("restart");
      return `down ${Date.now() - started} ms`;
    },
    crash: async () => {
      const started = Date.now();
      await restartRedis("crash");
      return `down ${Date.now() - started} ms`;
    },
    term: async () => {
      await startService();
      const old = services.shift();
      const started = Date.now();
      await children.stop(old);
      return `${old} stopped in ${Date.now() - started} ms`;
    },
  };
  const faultLoop = async () => {
    for (;;) {
      const gap = gapMin + rand() * (gapMax - gapMin);
      const kind = faults[Math.floor(rand() * faults.length)];
      await sleep(gap);
      if (faults.length === 0 || Date.now() >= loadEnds) return;
      faultStarts.push({ at: Date.now(), kind });
      const what = await inject[kind]();
      count(done, kind);
      faultLog.push(`${at()}s ${kind} ${what}`);
    }
  };

  await Promise.all([faultLoop(), ...Array.from({ length: CLIENTS }, (_, c) => client(c))]);
  const loadSeconds = (Date.now() - t0) / 1000;

  // --- check ---
  const read = async (path) => {
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await fetch(`http://127.0.0.1:${port}${path}`, { headers: { "x-api-key": "demo-key" } });
        const body = await res.json();
        if (res.ok) return body;
        if (attempt > 50) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`);
      } catch (err) {
        if (attempt > 50) throw err;
      }
      await sleep(200);
    }
  };
  const mismatches = [];
  const stored = new Map(); // user -> stored lessons (the webhook check's changes)
  let acked = 0;
  for (const [id, u] of users) {
    acked += u.acked;
    if (u.acked === 0 && u.unresolved === 0) continue;
    const lessons = (await read(`/v1/users/${id}/metrics/lessons`)).current;
    const xp = (await read(`/v1/users/${id}/points/xp`)).total;
    stored.set(id, lessons);
    const ok = u.unresolved === 0 ? lessons === u.acked && xp === XP_PER_LESSON * u.acked : lessons >= u.acked && lessons <= u.acked + u.unresolved && xp === XP_PER_LESSON * lessons;
    if (!ok) mismatches.push({ id, acked: u.acked, unresolved: u.unresolved, lessons, xp, history: u.history });
  }

  console.log(`load: ${loadSeconds.toFixed(1)} s, ${stats.events} logical events, ${acked} acknowledged, ${stats.gaveUp} given up after ${ATTEMPTS} attempts`);
  console.log(`faults: ${show(done)}`);
  for (const line of faultLog) console.log(`  ${line}`);
  console.log(`requests: ${stats.requests} (${stats.retries} retries); answers: ${show(stats.status)}`);
  console.log(`5xx: ${show(stats.fiveXX)}`);
  console.log(`network errors: ${show(stats.network)}`);
  console.log(`answers whose total disagreed with the acknowledged count: ${stats.badAnswers.length}`);
  for (const line of stats.badAnswers.slice(0, 20)) console.log(`  ${line}`);
  // A call re-sent after a lost reply goes as EVAL (src/store/redis-script.ts): counted by the
  // redis-server running now, since its last start. BullMQ's scripts go as EVAL too (a few at each
  // service start, 5 on a fresh Redis, and after a dropped connection), so this is an upper bound
  // of Laurel's re-sends, not their count: a run without faults shows the floor.
  const evals = Number(/cmdstat_eval:calls=(\d+)/.exec(await admin.info("commandstats"))?.[1] ?? 0);
  console.log(`EVAL calls seen by the current redis-server since its start (Laurel's re-sent calls, and BullMQ's scripts): ${evals}`);
  console.log(`users checked: ${users.size}; mismatching stored totals: ${mismatches.length}`);
  for (const m of mismatches.slice(0, 10)) {
    console.log(`  MISMATCH ${m.id}: acknowledged ${m.acked} (+${m.unresolved} unresolved), stored lessons ${m.lessons}, xp ${m.xp}`);
    for (const line of m.history.slice(-40)) console.log(`    ${line}`);
  }
  console.log(mismatches.length === 0 && stats.badAnswers.length === 0 ? "RESULT: exactly once held" : "RESULT: MISMATCH (loss or double count)");
  if (hooks) await checkHooks(hooks, users, stored, loadEnds, port, faultStarts);
}

/** The webhook receiver (CHAOS_HOOKS=1), on a thread of its own (hook-receiver.mjs says why). */
async function startReceiver() {
  const receiver = await startHookReceiver({ seed, failRate: HOOK_FAIL });
  cleanups.push(receiver.stop);
  return receiver;
}

/** How many duplicated ids firstAttemptOutcomes reads through the admin API. */
const DUP_INSPECT = 200;

/**
 * Why a delivery was sent again after a 200, as Laurel saw its first attempt: the first line of
 * the delivery's log (GET /admin/v1/webhooks/deliveries/{id}), its time left out. "no answer
 * within 2000 ms" is an attempt the receiver answered after Laurel's timeout, so Laurel rightly
 * sent it again; "(none)" is a delivery whose first attempt Laurel recorded as delivered (or never
 * recorded), so the re-send came from a record processed again.
 */
async function firstAttemptOutcomes(byId, port) {
  const outcomes = new Map();
  const ids = [...byId].filter(([, e]) => e.ok > 1).map(([id]) => id).slice(0, DUP_INSPECT);
  for (const id of ids) {
    const res = await fetch(`http://127.0.0.1:${port}/admin/v1/webhooks/deliveries/${id}.chaos`, { headers: { "x-api-key": "demo-admin-key" } });
    const delivery = res.ok ? await res.json() : null;
    const first = delivery?.log?.[0]?.replace(/^\S+ /, "");
    count(outcomes, first && !/HTTP 2\d\d/.test(first) ? first : res.ok ? "(none: first attempt logged as delivered, or not logged)" : `(admin API ${res.status})`);
  }
  return outcomes;
}

/**
 * The webhook check: each stored xp change (user, total = 10 × n for n up to the user's stored
 * lessons) delivered (answered 200) at least once, under one webhook-id; waits for them first.
 */
async function checkHooks(hooks, users, stored, loadEnds, port, faultStarts) {
  const { deliveries } = hooks;
  const changeKey = (user, total) => `${user} xp=${total}`;
  const expected = new Map(); // change key -> "acked" | "unacked" (applied; the client gave up)
  for (const [id, u] of users) {
    const lessons = stored.get(id) ?? u.acked;
    for (let n = 1; n <= lessons; n++) expected.set(changeKey(id, XP_PER_LESSON * n), u.ackedTotals.has(n) ? "acked" : "unacked");
  }
  const delivered = new Set();
  let seen = 0;
  const catchUp = () => {
    for (; seen < deliveries.length; seen++) {
      const d = deliveries[seen];
      if (d.status === 200 && d.system === "xp") delivered.add(changeKey(d.user, d.total));
    }
    let missing = 0;
    for (const key of expected.keys()) if (!delivered.has(key)) missing++;
    return missing;
  };
  const waitStart = Date.now();
  while (catchUp() > 0 && Date.now() - waitStart < HOOK_WAIT_S * 1000) await sleep(500);
  const settled = catchUp() === 0;
  const waited = (Date.now() - waitStart) / 1000;
  // A moment more for stray re-sends of ids already delivered (counted, not awaited).
  await sleep(2_000);

  const byChange = new Map(); // change key -> Set of ids
  const byId = new Map(); // id -> { changes: Set, posts, ok, failed }
  const other = new Map(); // deliveries that are not xp changes of a chaos user, by kind
  let ok = 0;
  let failed = 0;
  let lastOk = 0;
  for (const d of deliveries) {
    if (d.status === 200) {
      ok++;
      lastOk = Math.max(lastOk, d.at);
    } else failed++;
    const e = byId.get(d.id) ?? { changes: new Set(), posts: 0, ok: 0, failed: 0 };
    byId.set(d.id, e);
    e.posts++;
    if (d.status === 200) e.ok++;
    else e.failed++;
    if (d.type !== "points.changed" || d.system !== "xp" || !users.has(d.user)) {
      count(other, `${d.type} ${d.system} ${users.has(d.user) ? "chaos user" : `user ${d.user}`}`);
      continue;
    }
    const key = changeKey(d.user, d.total);
    e.changes.add(key);
    if (d.bodyId !== d.id) count(other, "body id differs from webhook-id");
    if (d.added !== XP_PER_LESSON) count(other, `xp added ${d.added}`);
    const ids = byChange.get(key) ?? new Set();
    byChange.set(key, ids);
    ids.add(d.id);
  }
  const missing = [...expected.keys()].filter((k) => !byChange.has(k) || ![...byChange.get(k)].some((id) => byId.get(id).ok > 0));
  const doubleIds = [...byChange].filter(([, ids]) => ids.size > 1);
  const idTwoChanges = [...byId].filter(([, e]) => e.changes.size > 1);
  const appliedUnacked = [...byChange.keys()].filter((k) => expected.get(k) === "unacked");
  const notStored = [...byChange.keys()].filter((k) => !expected.has(k));
  const redelivered = [...byId.values()].reduce((n, e) => n + Math.max(0, e.ok - 1), 0);
  const retried = [...byId.values()].filter((e) => e.failed > 0 && e.ok > 0).length;
  // Each duplicate (a 200 for an id already answered 200) by the last fault begun before the
  // id's first 200 (within 5 s), and how long after that first 200 it came.
  const firstOk = new Map();
  const dupCause = new Map();
  const dupLag = [];
  for (const d of deliveries) {
    if (d.status !== 200) continue;
    const first = firstOk.get(d.id);
    if (first === undefined) {
      firstOk.set(d.id, d.at);
      continue;
    }
    const fault = faultStarts.filter((f) => f.at <= first).at(-1);
    count(dupCause, fault && first - fault.at <= 5_000 ? `${fault.kind}` : "no fault in the 5 s before");
    dupLag.push(d.at - first);
  }
  dupLag.sort((a, b) => a - b);
  let admin = null;
  try {
    const res = await fetch(`http://127.0.0.1:${port}/admin/v1/webhooks`, { headers: { "x-api-key": "demo-admin-key" } });
    admin = (await res.json()).deliveries;
  } catch {
    // reported as unavailable
  }

  const unackedStored = [...expected.values()].filter((v) => v === "unacked").length;
  console.log(`hooks: ${expected.size} stored xp changes expected (${expected.size - unackedStored} acknowledged, ${unackedStored} applied but given up on by their client)`);
  console.log(`hooks: ${settled ? "all delivered" : "NOT all delivered"} ${waited.toFixed(1)} s after the stored totals were read; last 200 at +${((lastOk - loadEnds) / 1000).toFixed(1)} s after the load's deadline`);
  console.log(`hooks: POSTs ${deliveries.length} (answered 200: ${ok}, 500 sent by the receiver: ${failed}); distinct webhook-ids ${byId.size}; POSTs beyond one per id ${deliveries.length - byId.size} (ids delivered after a 500: ${retried}; re-sent after a 200, duplicates: ${redelivered})`);
  if (dupLag.length > 0) console.log(`hooks: duplicates by the fault begun within 5 s before the id's first 200: ${show(dupCause)}; re-sent ${(dupLag[0] / 1000).toFixed(1)}-${(dupLag.at(-1) / 1000).toFixed(1)} s (median ${(dupLag[dupLag.length >> 1] / 1000).toFixed(1)}) after it`);
  console.log(`hooks: admin API deliveries ${admin ? JSON.stringify(admin) : "unavailable"}`);
  if (redelivered > 0) console.log(`hooks: duplicates by what Laurel logged of the id's first attempt (admin API, at most ${DUP_INSPECT} ids): ${show(await firstAttemptOutcomes(byId, port))}`);
  console.log(`hooks: missing (stored change never answered 200): ${missing.length}; one change under two or more ids: ${doubleIds.length}; one id for two or more changes: ${idTwoChanges.length}`);
  console.log(`hooks: deliveries of changes never acknowledged: ${appliedUnacked.length} applied (stored; the client gave up before an answer), ${notStored.length} NOT stored`);
  console.log(`hooks: other POSTs (not an xp change of a chaos user, or odd fields): ${show(other)}`);
  for (const k of missing.slice(0, 20)) console.log(`  MISSING ${k} (${expected.get(k)})${byChange.has(k) ? ` posted under ${[...byChange.get(k)].join(", ")}, never answered 200` : ""}`);
  for (const [k, ids] of doubleIds.slice(0, 20)) {
    console.log(`  DOUBLE ID ${k}: ${[...ids].join(", ")}`);
    for (const d of deliveries.filter((x) => ids.has(x.id))) console.log(`    ${d.id} ${d.status} at +${((d.at - loadEnds) / 1000).toFixed(1)} s`);
  }
  for (const [id, e] of idTwoChanges.slice(0, 20)) console.log(`  ONE ID, SEVERAL CHANGES ${id}: ${[...e.changes].join("; ")}`);
  for (const k of notStored.slice(0, 20)) console.log(`  NOT STORED ${k} (ids ${[...byChange.get(k)].join(", ")})`);
  for (const k of appliedUnacked.slice(0, 20)) console.log(`  applied, unacknowledged ${k}`);
  const good = missing.length === 0 && doubleIds.length === 0 && idTwoChanges.length === 0 && notStored.length === 0;
  console.log(good ? "RESULT (webhooks): every change delivered, under one id each" : `RESULT (webhooks): ${missing.length} MISSING, ${doubleIds.length} DOUBLE ID, ${idTwoChanges.length} ID FOR SEVERAL CHANGES, ${notStored.length} NOT STORED`);
}

await runBench(main, cleanup);
