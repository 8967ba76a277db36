// node bench/soak.mjs [minutes]   (after npm run build)
//
// Memory and the event loop over time, under traffic of every kind: does the service hold on to
// what it served? One service process (config/demo.yaml: its points systems, boards,
// achievements and streaks; the stream worker in the process, as `npm start` runs it) on a
// scratch redis-server (no persistence), driven for `minutes` (10) by autocannon with
// SOAK_CONNECTIONS connections (50), one run a minute. Each minute's users are SOAK_USERS ids
// (20 000), half of them new (minute m posts events for users m·U/2 .. m·U/2 + U - 1, and reads
// users seen the minute before), so a per-user cache that never lets go grows as a leak would.
// The mix: events of both metrics (half of the lessons with an Idempotency-Key, fresh each minute,
// which the prebuilt requests replay within the minute: 202s), the metering read and the other
// per-user reads (points, metrics, streak, achievements, a board's entry, the profile), the
// tenant-wide reads (a board's page, the summaries, the streak rankings), and requests refused
// (400 wrong type, 422 unknown zone, 404 unknown metric, 401 wrong key).
//
// Every SOAK_SCRAPE_S seconds (5) it reads the service's GET /metrics (its resident memory, V8's
// heap and external memory, the event loop's delay since the previous scrape) and Redis's
// used_memory. Prints a line a minute: requests a second, answers by status class, resident
// memory, the heap's lowest use in the minute (its live set, near enough: each scrape finds it
// somewhere between two collections, and the lowest of twelve is close to after one), the heap
// reserved, external memory, the event loop's worst p99 and max, and Redis's memory. Last, the
// growth of the heap's low and of the resident memory from the second minute (the first warms
// the JIT and fills the award id table) to the last, per million requests; and each route's
// answers, mean and p99 over the whole soak, from the service's latency histogram.
//   node bench/soak.mjs 10
//   SOAK_USERS=5000 SOAK_CONNECTIONS=20 node bench/soak.mjs 3
// Reports; never gates (exit 0 whatever the figures; 1 only when it could not run).
import { runBench, serviceOnScratchRedis } from "./processes.mjs";
import { load, seedUsers, userId } from "./workload.mjs";

const minutes = Number(process.argv[2] ?? 10);
const USERS = Number(process.env.SOAK_USERS ?? 20_000);
const CONNECTIONS = Number(process.env.SOAK_CONNECTIONS ?? 50);
const SCRAPE_S = Number(process.env.SOAK_SCRAPE_S ?? 5);
const ZONES = ["UTC", "Europe/London", "America/New_York", "Asia/Tokyo", "Australia/Sydney"];

let service = null;
const cleanup = async () => service?.stop();

/** The requests of minute m: [weight, draw(pick a user)] pairs. */
function minuteTraffic(m) {
  const base = m * (USERS / 2);
  const poster = () => base + Math.floor(Math.random() * USERS);
  const reader = () => userId(base + Math.floor((Math.random() * USERS) / 2));
  const event = (metric, n, headers) => ({
    method: "POST",
    path: `/v1/metrics/${metric}/event`,
    body: JSON.stringify({ user: { id: userId(n), email: `${userId(n)}@example.com`, tz: ZONES[n % ZONES.length] }, value: 1 }),
    headers,
  });
  let key = 0;
  const mix = [
    [20, () => event("lessons", poster())],
    [10, () => event("lessons", poster(), { "idempotency-key": `soak-${m}-${key++ % 50_000}` })],
    [15, () => event("api-calls", poster())],
    [15, () => ({ method: "GET", path: `/v1/users/${reader()}/points/energy` })],
    [5, () => ({ method: "GET", path: `/v1/users/${reader()}/points/xp?awards=10` })],
    [4, () => ({ method: "GET", path: `/v1/users/${reader()}/metrics/lessons` })],
    [4, () => ({ method: "GET", path: `/v1/users/${reader()}/streak` })],
    [4, () => ({ method: "GET", path: `/v1/users/${reader()}/achievements` })],
    [3, () => ({ method: "GET", path: `/v1/users/${reader()}/leaderboards/xp-all-time` })],
    [3, () => ({ method: "GET", path: `/v1/users/${reader()}` })],
    [3, () => ({ method: "GET", path: `/v1/users/${reader()}/metrics` })],
    [2, () => ({ method: "GET", path: "/v1/leaderboards/xp-all-time?limit=20" })],
    [1, () => ({ method: "GET", path: "/v1/points/xp/summary" })],
    [1, () => ({ method: "GET", path: "/v1/points/xp/level-summary" })],
    [1, () => ({ method: "GET", path: "/v1/streaks/rankings" })],
    [1, () => ({ method: "GET", path: "/v1/achievements" })],
    [2, () => ({ method: "POST", path: "/v1/metrics/lessons/event", body: JSON.stringify({ user: { id: userId(poster()) }, value: "one" }) })],
    [2, () => ({ method: "POST", path: "/v1/metrics/lessons/event", body: JSON.stringify({ user: { id: userId(poster()), tz: "Mars/Olympus" }, value: 1 }) })],
    [2, () => ({ method: "POST", path: "/v1/metrics/no-such-metric/event", body: JSON.stringify({ user: { id: userId(poster()) }, value: 1 }) })],
    [2, () => ({ method: "GET", path: `/v1/users/${reader()}/points/xp`, headers: { "x-api-key": "not-a-key" } })],
  ];
  const total = mix.reduce((sum, [w]) => sum + w, 0);
  return {
    draw() {
      let r = Math.random() * total;
      for (const [w, draw] of mix) if ((r -= w) < 0) return draw();
      return mix[0][1]();
    },
  };
}

/** The value of a per-process series in a /metrics text (the first line of that name). */
function series(text, name) {
  const line = text.split("\n").find((l) => l.startsWith(`${name}{`));
  return line === undefined ? NaN : Number(line.slice(line.lastIndexOf(" ") + 1));
}

const MB = (bytes) => (bytes / 2 ** 20).toFixed(1);

/**
 * Each route's answers over the whole soak, from the service's latency histogram
 * (laurel_http_request_duration_seconds): count, mean, and the bucket bounds its p99 and its
 * slowest answer fall under (the router's time: arrival to answer, Redis included).
 */
function printRouteLatencies(text) {
  const routes = new Map();
  for (const line of text.split("\n")) {
    const m = /^laurel_http_request_duration_seconds_(bucket|sum|count)\{.*method="([^"]+)",route="([^"]+)"(?:,le="([^"]+)")?\} (\S+)$/.exec(line);
    if (!m) continue;
    const [, kind, method, route, le, value] = m;
    const key = `${method} ${route}`;
    const r = routes.get(key) ?? { buckets: [], sum: 0, count: 0 };
    if (kind === "bucket") r.buckets.push([le === "+Inf" ? Infinity : Number(le), Number(value)]);
    else r[kind] = Number(value);
    routes.set(key, r);
  }
  const under = (r, share) => {
    const bound = r.buckets.find(([, n]) => n >= r.count * share)?.[0];
    return bound === Infinity ? "> 2.5 s" : `≤ ${bound * 1000} ms`;
  };
  console.log("\nroute                                                   answers   mean ms  p99       slowest");
  for (const [key, r] of [...routes].sort((a, b) => b[1].count - a[1].count)) {
    if (r.count === 0) continue;
    console.log(`${key.padEnd(54)}  ${String(r.count).padStart(8)}  ${((r.sum / r.count) * 1000).toFixed(2).padStart(7)}  ${under(r, 0.99).padEnd(8)}  ${under(r, 1)}`);
  }
}

async function main() {
  service = await serviceOnScratchRedis("laurel-soak-", { LAUREL_CONFIG: "config/demo.yaml", LOG_LEVEL: "warn" });
  const { url, redis } = service;
  console.log(`soak: ${minutes} min, ${USERS} users a minute (half new), ${CONNECTIONS} connections, /metrics every ${SCRAPE_S} s, service ${url}, redis ${service.redisUrl}`);
  await seedUsers(url, { users: USERS, connections: CONNECTIONS });

  let samples = [];
  const scrape = async () => {
    const text = await (await fetch(`${url}/metrics`)).text();
    const info = await redis.info("memory");
    samples.push({
      rss: series(text, "process_resident_memory_bytes"),
      heapUsed: series(text, "nodejs_heap_size_used_bytes"),
      heapTotal: series(text, "nodejs_heap_size_total_bytes"),
      external: series(text, "nodejs_external_memory_bytes"),
      lagP99: series(text, "nodejs_eventloop_lag_p99_seconds"),
      lagMax: series(text, "nodejs_eventloop_lag_max_seconds"),
      redis: Number(/used_memory:(\d+)/.exec(info)[1]),
    });
  };
  await scrape(); // starts the event loop's window
  samples = [];

  const rows = [];
  let requests = 0;
  console.log("\nminute  req/s  2xx      4xx     5xx/err  rss MB  heap low MB  heap MB  external MB  loop p99/max ms  redis MB");
  for (let m = 0; m < minutes; m++) {
    const timer = setInterval(() => void scrape().catch((err) => console.error(`scrape failed: ${err.message}`)), SCRAPE_S * 1000);
    const result = await load(url, minuteTraffic(m), { connections: CONNECTIONS, duration: 60 });
    clearInterval(timer);
    await scrape();
    requests += result.requests;
    const byClass = { "2xx": 0, "4xx": 0, other: result.errors };
    for (const [code, n] of Object.entries(result.statusCodes)) byClass[code.startsWith("2") ? "2xx" : code.startsWith("4") ? "4xx" : "other"] += n;
    const low = Math.min(...samples.map((s) => s.heapUsed));
    const last = samples.at(-1);
    const row = { m, rps: result.rps, requests, low, rss: last.rss, lagP99: Math.max(...samples.map((s) => s.lagP99)), lagMax: Math.max(...samples.map((s) => s.lagMax)) };
    rows.push(row);
    console.log(
      `${String(m + 1).padStart(6)}  ${String(Math.round(result.rps)).padStart(5)}  ${String(byClass["2xx"]).padEnd(7)}  ${String(byClass["4xx"]).padEnd(6)}  ${String(byClass.other).padEnd(7)}  ${MB(last.rss).padStart(6)}  ${MB(low).padStart(11)}  ${MB(last.heapTotal).padStart(7)}  ${MB(last.external).padStart(11)}  ${`${(row.lagP99 * 1000).toFixed(1)}/${(row.lagMax * 1000).toFixed(1)}`.padStart(15)}  ${MB(last.redis).padStart(8)}`,
    );
    samples = [];
  }
  printRouteLatencies(await (await fetch(`${url}/metrics`)).text());
  if (rows.length >= 3) {
    const from = rows[1];
    const to = rows.at(-1);
    const millions = (to.requests - rows[0].requests) / 1e6;
    console.log(
      `\nfrom minute 2 to minute ${rows.length} (${millions.toFixed(2)} M requests): heap low ${MB(from.low)} → ${MB(to.low)} MB (${MB((to.low - from.low) / millions)} MB per million requests), resident ${MB(from.rss)} → ${MB(to.rss)} MB (${MB((to.rss - from.rss) / millions)} MB per million)`,
    );
  }
}

await runBench(main, cleanup);
