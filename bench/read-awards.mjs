// node bench/read-awards.mjs <entry A> <entry B>   (after npm run build)
//
// The metering read as a metering gate sees it: users who hold at least 10 awards, read with
// ?awards=10 (the default), for two service builds alternated 3 times on one Redis (reads write
// nothing, so both see the same data). The core bench's read phase reads users with one or two
// awards, where the per-award work (id, date, trigger) hardly shows. Entries are dist/main.js of
// two builds, e.g. a git worktree of an earlier commit:
//   git worktree add /tmp/orig <commit>; ln -s $PWD/node_modules /tmp/orig/; (cd /tmp/orig && npm run build)
//   node bench/read-awards.mjs /tmp/orig/dist/main.js dist/main.js
// Prints req/s, p99 and the service's CPU µs per read of each run. Reports; never gates.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, startEmbeddedRedis } from "../dist/embedded-redis.js";
import { Children, cpuSeconds } from "./processes.mjs";
import { load, readRequests } from "./workload.mjs";
const [A, B] = process.argv.slice(2);
if (!A || !B) {
  console.error("usage: node bench/read-awards.mjs <entry A> <entry B>");
  process.exit(2);
}
const children = new Children();
const dir = mkdtempSync(join(tmpdir(), "r10-"));
const server = await startEmbeddedRedis({ dir, appendOnly: false });
const env = { REDIS_URL: server.url, LAUREL_CONFIG: process.cwd() + "/bench/core-tenant.yaml", LAUREL_WORKER: "off", LOG_LEVEL: "warn" };
const start = async (name, entry) => { const port = await freePort(); const s = await children.start(name, "node", [entry], { ...env, PORT: String(port) }, `http://127.0.0.1:${port}/healthz`); return { ...s, url: `http://127.0.0.1:${port}` }; };
try {
  const a = await start("A", A);
  const USERS = 1000;
  // 12 api-calls events per user: the welcome award and 12 deductions of energy, 13 awards each.
  for (let round = 0; round < 12; round++) {
    await Promise.all(Array.from({ length: USERS }, (_, n) => fetch(`${a.url}/v1/metrics/api-calls/event`, { method: "POST", headers: { "x-api-key": "demo-key", "content-type": "application/json" }, body: JSON.stringify({ user: { id: `user-${n}`, email: `user-${n}@example.com`, tz: "UTC" }, value: 1 }) }).then((r) => r.arrayBuffer())));
  }
  const b = await start("B", B);
  const traffic = readRequests(USERS, (id) => `/v1/users/${id}/points/energy?awards=10`);
  const probe = await (await fetch(`${b.url}/v1/users/user-5/points/energy?awards=10`, { headers: { "x-api-key": "demo-key" } })).json();
  console.log("awards per read:", probe.awards.length);
  for (let i = 0; i < 3; i++) for (const s of [a, b]) {
    await load(s.url, traffic, { connections: 100, duration: 2 });
    const c0 = cpuSeconds(s.pid);
    const r = await load(s.url, traffic, { connections: 100, duration: 8 });
    console.log(`${s.name} (${s.name === "A" ? A : B}):`, Math.round(r.rps), "req/s p99", r.p99, "service CPU µs/read", (((cpuSeconds(s.pid) - c0) * 1e6) / r.requests).toFixed(1), "non2xx", r.non2xx);
  }
} finally {
  await children.stopAll();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
