// node bench/handover.mjs [rounds] [entry]   (after npm run build; entry: another build's dist/main.js)
//
// What a stop costs the clients of a service that shares its port with another process
// (LAUREL_REUSE_PORT=1, a rolling restart on one host): two service processes on a scratch
// redis-server, 64 clients posting events, and 2 s in one process is stopped (SIGTERM) while the
// load goes on for 3 s more. Each round runs twice: clients on a new connection per request
// (Connection: close), then clients on kept-alive connections (fetch, as the official SDK). Prints
// the requests answered and those that failed (a connection reset or closed under a request) and
// the kernel's net.ipv4.tcp_migrate_req, which decides whether connections waiting in the stopped
// process's accept queue move to the other process or are reset (README, Operations, Stopping).
// Reports; never gates.
import { readFileSync } from "node:fs";
import { request } from "node:http";
import { freePort } from "../dist/embedded-redis.js";
import { Children, listenerCount, runBench, scratchRedis } from "./processes.mjs";

const rounds = Number(process.argv[2] ?? 3);
const entry = process.argv[3] ?? "dist/main.js";
const CLIENTS = 64;
const BEFORE_STOP_MS = 2_000;
const AFTER_STOP_MS = 3_000;
const children = new Children();
const cleanups = [];
const cleanup = async () => {
  await children.stopAll();
  for (const fn of cleanups.splice(0)) await fn();
};

const eventBody = () => JSON.stringify({ user: { id: `handover-${Math.floor(Math.random() * 1000)}` }, value: 1 });

/** One event on a connection of its own, closed after the answer. */
function postOnNewConnection(port) {
  return new Promise((resolve) => {
    const body = eventBody();
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path: "/v1/metrics/lessons/event",
        method: "POST",
        agent: false,
        headers: { "x-api-key": "demo-key", "content-type": "application/json", "content-length": Buffer.byteLength(body), connection: "close" },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode === 201 ? "answered" : `status ${res.statusCode}`));
      },
    );
    req.on("error", (err) => resolve(err.code ?? err.message));
    req.end(body);
  });
}

/** One event through fetch's pool of kept-alive connections. */
async function postKeptAlive(port) {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/v1/metrics/lessons/event`, {
      method: "POST",
      headers: { "x-api-key": "demo-key", "content-type": "application/json" },
      body: eventBody(),
    });
    await res.arrayBuffer();
    return res.status === 201 ? "answered" : `status ${res.status}`;
  } catch (err) {
    return err.cause?.code ?? err.message;
  }
}

async function round(n, kind) {
  const { server, stop: stopServer } = await scratchRedis("laurel-handover-");
  cleanups.push(stopServer);
  const port = await freePort();
  const env = { REDIS_URL: server.url, PORT: String(port), LAUREL_REUSE_PORT: "1", LAUREL_WORKER: "off", LAUREL_CONFIG: "bench/core-tenant.yaml", LOG_LEVEL: "warn" };
  for (const name of ["stopped", "staying"]) await children.start(name, "node", [entry], env, `http://127.0.0.1:${port}/healthz`);
  // Either process may have answered the other's readiness check: wait until both listen.
  while ((await listenerCount(port)) < 2) await new Promise((r) => setTimeout(r, 50));
  const post = kind === "new connections" ? postOnNewConnection : postKeptAlive;
  const outcomes = new Map();
  const end = Date.now() + BEFORE_STOP_MS + AFTER_STOP_MS;
  const client = async () => {
    while (Date.now() < end) {
      const outcome = await post(port);
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
    }
  };
  const stop = new Promise((r) => setTimeout(r, BEFORE_STOP_MS)).then(() => children.stop("stopped"));
  await Promise.all([...Array.from({ length: CLIENTS }, client), stop]);
  const answered = outcomes.get("answered") ?? 0;
  outcomes.delete("answered");
  const failed = [...outcomes].map(([what, count]) => `${count} ${what}`).join(", ") || "none";
  console.log(`round ${n}, ${kind}: ${answered} answered; failed: ${failed}`);
  await children.stopAll();
  await stopServer();
  cleanups.splice(cleanups.indexOf(stopServer), 1);
}

async function main() {
  const migrate = readFileSync("/proc/sys/net/ipv4/tcp_migrate_req", "utf8").trim();
  console.log(`${entry}, net.ipv4.tcp_migrate_req = ${migrate}, ${CLIENTS} clients, SIGTERM to one of two processes ${BEFORE_STOP_MS} ms in`);
  for (let n = 1; n <= rounds; n++) {
    await round(n, "new connections");
    await round(n, "kept-alive connections");
  }
}

await runBench(main, cleanup);
