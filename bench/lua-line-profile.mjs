// node bench/lua-line-profile.mjs <redis-server built with bench/lua-line-profile.patch> [config] [metric] [events]
//
// Where the event script's Lua VM instructions go, line by line. callgrind (bench/script-cost.mjs)
// sees Redis's C functions, and the Lua interpreter as one of them (luaV_execute): it cannot say
// which line of a script costs what. A redis-server 7.0.15 patched with lua-line-profile.patch
// (Debian's source: `apt-get source redis`, `patch -p1 < bench/lua-line-profile.patch`, `make
// USE_SYSTEM_JEMALLOC=yes USE_JEMALLOC=yes BUILD_TLS=no`, with libjemalloc-dev) counts, when
// LAUREL_LUA_PROFILE names a file, every VM instruction of the function libraries by source line
// (a count hook on every instruction: slow, for this only) and writes the counts at exit.
// This runs the service (dist/, LAUREL_WORKER=off) on such a server twice: seed users only, then
// the same seed and `events` more events of `metric` for the seeded users; the difference,
// divided by `events`, is per event of a returning user, printed with the library's lines.
// Every library's lines count in one table (Redis names them all "user_function"), so run one
// metric; the counts are exact and repeatable. VM instructions are not machine instructions: one
// costs the interpreter ~45 of them, and the C the script calls (commands, cmsgpack, struct,
// string.format) is not counted here (bench/README.md, the twenty-third stop).
// Defaults: bench/core-tenant.yaml, lessons, 5000 events, 2000 users (LP_USERS). Reports; never gates.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { freePort } from "../dist/embedded-redis.js";

const [server, config = "bench/core-tenant.yaml", metric = "lessons", eventsText = "5000"] = process.argv.slice(2);
if (!server) {
  console.error("usage: node bench/lua-line-profile.mjs <patched redis-server> [config] [metric] [events]");
  process.exit(2);
}
const events = Number(eventsText);
const users = Number(process.env.LP_USERS ?? 2000);
const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** One run: seed, then `extra` events; returns the line counts and the event library's text. */
async function run(extra) {
  const dir = mkdtempSync(join(tmpdir(), "laurel-lua-profile-"));
  const countsFile = join(dir, "counts.txt");
  const redisPort = await freePort();
  const servicePort = await freePort();
  const redis = spawn(server, ["--port", String(redisPort), "--save", "", "--appendonly", "no", "--dir", dir], {
    env: { ...process.env, LAUREL_LUA_PROFILE: countsFile },
    stdio: "ignore",
  });
  const client = new Redis({ port: redisPort, lazyConnect: true, retryStrategy: () => null });
  // The server may not listen yet: the loop below retries; the failed attempts are not errors.
  client.on("error", () => undefined);
  for (let i = 0; i < 100; i++) {
    try {
      await client.connect();
      break;
    } catch {
      await wait(50);
    }
  }
  const service = spawn("node", ["dist/main.js"], {
    env: { ...process.env, PORT: String(servicePort), REDIS_URL: `redis://127.0.0.1:${redisPort}`, LAUREL_CONFIG: config, LAUREL_WORKER: "off" },
    stdio: ["ignore", "ignore", "inherit"],
  });
  for (let i = 0; i < 200; i++) {
    try {
      await fetch(`http://127.0.0.1:${servicePort}/healthz`);
      break;
    } catch {
      await wait(100);
    }
  }
  const post = (u) =>
    fetch(`http://127.0.0.1:${servicePort}/v1/metrics/${metric}/event`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": "demo-key" },
      body: JSON.stringify({ user: { id: `user-${u}`, email: `user-${u}@example.com`, tz: "Europe/Berlin" }, value: 1 }),
    }).then((res) => res.text());
  // 20 at a time, in a fixed order: the counts depend on the events, not on their timing.
  for (let u = 0; u < users; u += 20) await Promise.all(Array.from({ length: Math.min(20, users - u) }, (_, k) => post(u + k)));
  for (let i = 0; i < extra; i += 20) await Promise.all(Array.from({ length: Math.min(20, extra - i) }, (_, k) => post((i * 7 + k * 131) % users)));
  const libraries = await client.call("FUNCTION", "LIST", "WITHCODE");
  const code = libraries.map((lib) => lib[lib.indexOf("library_code") + 1]).find((text) => text.includes("Records one metric event") && text.includes(`mf="m:${metric}"`));
  client.disconnect();
  service.kill("SIGTERM");
  await new Promise((resolve) => service.once("exit", resolve));
  redis.kill("SIGTERM");
  await new Promise((resolve) => redis.once("exit", resolve));
  const counts = new Map();
  for (const line of readFileSync(countsFile, "utf8").split("\n").filter(Boolean)) {
    const [at, count] = line.split(" ").map(Number);
    counts.set(at, count);
  }
  rmSync(dir, { recursive: true, force: true });
  return { counts, code: code ?? "" };
}

const seedOnly = await run(0);
const withEvents = await run(events);
const lines = withEvents.code.split("\n");
const perEvent = [...withEvents.counts].map(([at, count]) => [at, (count - (seedOnly.counts.get(at) ?? 0)) / events]).filter(([, n]) => n > 0);
const total = perEvent.reduce((sum, [, n]) => sum + n, 0);
console.log(`Lua VM instructions per ${metric} event of a returning user (${config}, ${users} users, ${events} events): ${total.toFixed(1)}`);
console.log("per event  line  source");
for (const [at, n] of perEvent.sort((a, b) => b[1] - a[1]).slice(0, Number(process.env.LP_TOP ?? 40))) {
  console.log(`${n.toFixed(1).padStart(9)}  ${String(at).padStart(4)}  ${(lines[at - 1] ?? "?").trim().slice(0, 110)}`);
}
