// The webhook receiver of bench/chaos.mjs (CHAOS_HOOKS=1), on a worker thread of its own.
//
// Why a thread: in the chaos process the receiver shared its event loop with the load's 32
// clients and the fault loop, whose turns took 50-120 ms each at the load's start and while a
// new service started. A receiver that reads a POST only when the load generator lets it answered
// some of them after Laurel's first-attempt timeout (2 s): Laurel rightly counted those attempts
// as failed and sent them again ~30 s later (the first backoff), and the chaos run reported them
// as re-sends after stops (bench/README.md, "The fifty-ninth stop"). On its own thread the
// receiver answers within milliseconds whatever the load generator does.
//
// Records every POST (webhook-id, status answered, the body's user, points key, total and added,
// and when), answering 500 to a seeded fraction (`failRate`), at most once per id. The records
// reach the main thread as messages, in the order they were answered.
import { createServer } from "node:http";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";

/** Starts the receiver thread; resolves with its URL, the records so far (an array that grows) and stop(). */
export async function startHookReceiver({ seed, failRate }) {
  const worker = new Worker(new URL(import.meta.url), { workerData: { seed, failRate } });
  const deliveries = [];
  const url = await new Promise((resolve, reject) => {
    worker.once("error", reject);
    worker.on("message", (msg) => {
      if (msg.url) resolve(msg.url);
      else deliveries.push(...msg.deliveries);
    });
  });
  const stop = async () => {
    worker.postMessage("stop");
    await new Promise((resolve) => worker.once("exit", resolve));
  };
  return { url, deliveries, stop };
}

/** The seeded generator chaos.mjs uses (mulberry32). */
export function prng(s) {
  let a = s >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

if (!isMainThread) {
  const { seed, failRate } = workerData;
  const rand = prng(seed ^ 0x5eed5eed);
  const failedOnce = new Set();
  // Sent in batches: one message per POST would make the main thread's busy turns longer.
  let batch = [];
  const flush = setInterval(() => {
    if (batch.length === 0) return;
    parentPort.postMessage({ deliveries: batch });
    batch = [];
  }, 20);
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const id = req.headers["webhook-id"];
      let body = null;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        // recorded as unreadable
      }
      const fail = failRate > 0 && !failedOnce.has(id) && rand() < failRate;
      if (fail) failedOnce.add(id);
      batch.push({ id, status: fail ? 500 : 200, at: Date.now(), type: body?.type, bodyId: body?.id, user: body?.user?.id, system: body?.points?.key, total: body?.points?.total, added: body?.points?.added });
      res.writeHead(fail ? 500 : 200).end(fail ? "chaos" : "ok");
    });
  });
  server.keepAliveTimeout = 1_000;
  server.listen(0, "127.0.0.1", () => parentPort.postMessage({ url: `http://127.0.0.1:${server.address().port}/hooks` }));
  parentPort.on("message", (msg) => {
    if (msg !== "stop") return;
    server.closeAllConnections();
    server.close(() => {
      clearInterval(flush);
      if (batch.length > 0) parentPort.postMessage({ deliveries: batch });
      parentPort.close();
    });
  });
}
