// node bench/delivery-cost.mjs [first|queue|direct]   (after npm run build)
//
// What one webhook delivery costs, with no event load beside it: CPU of this process (Node),
// of redis-server and of the receiver (bench/receiver.mjs on loopback), per delivery, over three
// rounds of N deliveries (the first warms up).
//   first   the delivery path Laurel runs: DeliveryQueue.dispatch, as the webhook consumer calls
//           it with each batch of fresh records' deliveries: the first attempts made at once (32
//           at a time) and written as BullMQ jobs by one script per batch (first-attempt.ts)
//   queue   every attempt through BullMQ (firstAttempt off, and the path of retries and of
//           redelivered records): DeliveryQueue.enqueue (BullMQ addBulk) and the queue's BullMQ
//           worker, 16 at a time, POSTing each job
//   direct  the same signed POSTs, 16 at a time, without BullMQ: the floor of any design that
//           keeps HTTP and HMAC (what a first attempt made outside the queue would cost)
// The gap is BullMQ's share: its add, its moves to active and to completed (each a Lua script
// with its own round trip) and its job (de)serialisation. See bench/README.md, "The eighth stop".
// Environment: N (deliveries per round, default 4000). Reports; never gates.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import pino from "pino";
import { freePort, startEmbeddedRedis } from "../dist/embedded-redis.js";
import { DEFAULT_DELIVERY, DeliveryQueue, deliveryOptions } from "../dist/jobs/webhooks/deliveries.js";
import { post } from "../dist/jobs/webhooks/post.js";
import { signedHeaders } from "../dist/jobs/webhooks/signing.js";
import { Children, cpuSeconds, runBench } from "./processes.mjs";

const N = Number(process.env.N ?? 4000);
const mode = process.argv[2] ?? "queue";
if (!["first", "queue", "direct"].includes(mode)) {
  console.error("usage: node bench/delivery-cost.mjs [first|queue|direct]");
  process.exit(2);
}

const children = new Children();
const dir = mkdtempSync(join(tmpdir(), "laurel-delivery-cost-"));
let redisServer = null;
let redis = null;
let queue = null;
const cleanup = async () => {
  await queue?.close();
  redis?.disconnect();
  await children.stopAll();
  await redisServer?.stop();
  rmSync(dir, { recursive: true, force: true });
};

// A level change as payloads.ts builds it (~500 bytes): the size matters to BullMQ and to HMAC.
const now = new Date().toISOString();
const BODY = JSON.stringify({
  id: "00000000-0000-5000-8000-000000000000",
  type: "points.level_changed",
  timestamp: now,
  user: { id: "user-1", email: "user-1@example.com", tz: "Europe/Paris", name: "User One", created: now },
  points: { id: "9f3c0000-0000-5000-8000-000000000000", key: "xp", name: "XP", total: 230 },
  previousLevel: { id: "a0000000-0000-5000-8000-000000000000", key: "bronze", name: "Bronze", points: 50 },
  newLevel: { id: "b0000000-0000-5000-8000-000000000000", key: "silver", name: "Silver", points: 200 },
});

async function redisCpuSeconds() {
  const text = await redis.info("cpu");
  const field = (name) => Number(new RegExp(`^${name}:([0-9.]+)`, "m").exec(text)[1]);
  return field("used_cpu_user") + field("used_cpu_sys");
}

function selfCpuSeconds() {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1e6;
}

async function directly(jobs, target, secrets) {
  let next = 0;
  const lane = async () => {
    while (next < jobs.length) {
      const job = jobs[next++];
      await post(target, signedHeaders(job.eventId, job.body, secrets, Date.now()), job.body, 5000, new AbortController());
    }
  };
  await Promise.all(Array.from({ length: DEFAULT_DELIVERY.concurrency }, lane));
}

async function main() {
  redisServer = await startEmbeddedRedis({ dir, appendOnly: false });
  redis = new Redis(redisServer.url);
  const receiverPort = await freePort();
  const receiverPid = (await children.start("receiver", "node", ["bench/receiver.mjs"], { PORT: String(receiverPort) }, `http://127.0.0.1:${receiverPort}/ping`)).pid;
  const url = `http://127.0.0.1:${receiverPort}/hooks`;
  const secrets = [`whsec_${Buffer.from("bench-secret-bench-secret-32byte").toString("base64")}`];
  const tenant = { id: "bench", webhooks: [{ key: "bench", url, secrets, events: new Set(), coalesceMs: new Map(), timeoutMs: 5000 }] };
  const { hostname, port } = new URL(redisServer.url);
  if (mode !== "direct") {
    const options = deliveryOptions({ firstAttempt: { enabled: mode === "first" } });
    queue = new DeliveryQueue(tenant, { host: hostname, port: Number(port) }, options, pino({ level: "warn" }), redis);
    await queue.startWorker();
  }
  for (let round = 0; round < 3; round++) {
    const jobs = Array.from({ length: N }, (_, i) => ({ endpoint: "bench", eventId: `event-${round}-${i}`, type: "points.level_changed", userId: `user-${i}`, body: BODY }));
    const before = { node: selfCpuSeconds(), redis: await redisCpuSeconds(), receiver: cpuSeconds(receiverPid), at: performance.now() };
    if (queue) {
      // As the webhook consumer hands them over: a batch of records' deliveries at a time.
      for (let i = 0; i < jobs.length; i += 100) await queue.dispatch(jobs.slice(i, i + 100), true);
      await queue.settled();
    } else {
      await directly(jobs, new URL(url), secrets);
    }
    const after = { node: selfCpuSeconds(), redis: await redisCpuSeconds(), receiver: cpuSeconds(receiverPid), at: performance.now() };
    const per = (seconds) => `${((seconds * 1e6) / N).toFixed(0)} µs`;
    const received = await (await fetch(`http://127.0.0.1:${receiverPort}/count`)).json();
    console.log(
      `${mode} round ${round + 1}${round === 0 ? " (warm-up)" : ""}: per delivery Node ${per(after.node - before.node)}, Redis ${per(after.redis - before.redis)}, receiver ${per(after.receiver - before.receiver)}; wall ${per((after.at - before.at) / 1000)}; received ${received.requests} in all`,
    );
  }
}

await runBench(main, cleanup);
