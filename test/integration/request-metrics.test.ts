import { closeSync, openSync, readdirSync, readFileSync } from "node:fs";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LATENCY_BOUNDS_MS } from "../../src/http/request-stats.js";
import { PROCESS_NAME } from "../../src/process-name.js";
import { startTestApp, type TestApp } from "../helpers/app.js";
import { startTestRedis } from "../helpers/redis-server.js";
import { waitFor } from "../helpers/service-process.js";

// GET /metrics: this process's answers per route (README, GET /metrics). Each test app has its
// own router, so its counts start at zero.

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ manualClock: "2026-03-02T12:00:00Z", jobs: false });
});
afterAll(() => t?.close());

const scrape = async (): Promise<string> => (await t.call("GET", "/metrics")).body as string;

/** The value of one series line, or null when /metrics has no such line. */
function series(text: string, name: string, labels: Record<string, string>): number | null {
  const rendered = Object.entries({ process: PROCESS_NAME, ...labels })
    .map(([k, v]) => `${k}="${v}"`)
    .join(",");
  const line = text.split("\n").find((l) => l.startsWith(`${name}{${rendered}} `));
  return line === undefined ? null : Number(line.slice(line.lastIndexOf(" ") + 1));
}

const EVENT_ROUTE = { method: "POST", route: "/v1/metrics/:key/event" };

describe("request metrics", () => {
  it("count each route's answers by status, and time them in a cumulative histogram", async () => {
    const lesson = (key?: string) => t.call("POST", "/v1/metrics/lessons/event", { user: { id: "counted" }, value: 1 }, key ? { "idempotency-key": key } : {});
    expect((await lesson("a")).status).toBe(201);
    expect((await lesson("b")).status).toBe(201);
    expect((await lesson("a")).status).toBe(202);
    expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "counted" }, value: "x" })).status).toBe(400);
    expect((await t.call("GET", "/v1/users/counted/points/xp")).status).toBe(200);
    expect((await t.call("GET", "/no/such/path")).status).toBe(404);
    expect((await t.call("DELETE", "/another/path")).status).toBe(404);
    expect((await t.call("GET", "/v1/metrics/lessons/event")).status).toBe(405);
    expect((await fetch(`${t.url}/healthz`, { method: "HEAD" })).status).toBe(200);

    const text = await scrape();
    expect(text).toContain("# TYPE laurel_http_requests_total counter");
    expect(text).toContain("# TYPE laurel_http_request_duration_seconds histogram");
    const count = (labels: Record<string, string>) => series(text, "laurel_http_requests_total", labels);
    expect(count({ ...EVENT_ROUTE, status: "201" })).toBe(2);
    expect(count({ ...EVENT_ROUTE, status: "202" })).toBe(1);
    expect(count({ ...EVENT_ROUTE, status: "400" })).toBe(1);
    expect(count({ method: "GET", route: "/v1/users/:id/points/:key", status: "200" })).toBe(1);
    // Paths no route serves share one series, whatever the method: a scan of random paths makes no new ones.
    expect(count({ method: "ANY", route: "unmatched", status: "404" })).toBe(2);
    expect(count({ method: "ANY", route: "unmatched", status: "405" })).toBe(1);
    // A GET route's HEAD is its own series.
    expect(count({ method: "HEAD", route: "/healthz", status: "200" })).toBe(1);
    // A route no request reached has no series yet; this scrape is counted after it answers.
    expect(count({ method: "POST", route: "/api/metrics/:key/event", status: "201" })).toBeNull();
    expect(count({ method: "GET", route: "/metrics", status: "200" })).toBeNull();

    const buckets = LATENCY_BOUNDS_MS.map((bound) => series(text, "laurel_http_request_duration_seconds_bucket", { ...EVENT_ROUTE, le: String(bound / 1000) })!);
    const inf = series(text, "laurel_http_request_duration_seconds_bucket", { ...EVENT_ROUTE, le: "+Inf" });
    expect(inf).toBe(4);
    expect(series(text, "laurel_http_request_duration_seconds_count", EVENT_ROUTE)).toBe(4);
    // Cumulative: each bucket holds the ones below it.
    for (let i = 1; i < buckets.length; i++) expect(buckets[i]).toBeGreaterThanOrEqual(buckets[i - 1]!);
    expect(buckets.at(-1)).toBeLessThanOrEqual(4);
    expect(series(text, "laurel_http_request_duration_seconds_sum", EVENT_ROUTE)).toBeGreaterThan(0);

    // The next scrape counts this one.
    expect(series(await scrape(), "laurel_http_requests_total", { method: "GET", route: "/metrics", status: "200" })).toBe(1);
  });

  it("count a request whose client left before its answer as aborted", async () => {
    const socket = connect(Number(new URL(t.url).port), "127.0.0.1");
    await new Promise<void>((resolve) => socket.once("connect", resolve));
    // Half of the announced body, then the connection closes: uWS reports the request aborted.
    // Destroyed once the bytes are handed to the kernel: destroyed at once, unwritten bytes would be dropped.
    await new Promise<void>((resolve) => socket.write("POST /v1/metrics/api-calls/event HTTP/1.1\r\nHost: x\r\nX-API-KEY: demo-key\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"user\":", () => resolve()));
    socket.destroy();
    const aborted = { method: "POST", route: "/v1/metrics/:key/event", status: "aborted" };
    // Waits for the effect (the close reaches the server), not for a time.
    await waitFor(async () => series(await scrape(), "laurel_http_requests_total", aborted) !== null, "the aborted request counted");
    expect(series(await scrape(), "laurel_http_requests_total", aborted)).toBe(1);
  });
});

// The answering process's own CPU, memory, descriptors and event-loop delay (src/api/process-metrics.ts).
// The test app answers in this process, so its figures are this process's, read here beside the scrape.
describe("process metrics", () => {
  const value = (text: string, name: string): number => {
    const v = series(text, name, {});
    if (v === null) throw new Error(`no ${name} in /metrics`);
    return v;
  };

  it("give the CPU time spent, between this process's own readings before and after the scrape", async () => {
    const before = process.cpuUsage();
    const text = await scrape();
    const after = process.cpuUsage();
    expect(text).toContain("# TYPE process_cpu_seconds_total counter");
    const user = value(text, "process_cpu_user_seconds_total");
    const system = value(text, "process_cpu_system_seconds_total");
    expect(user).toBeGreaterThanOrEqual(before.user / 1e6);
    expect(user).toBeLessThanOrEqual(after.user / 1e6);
    expect(system).toBeGreaterThanOrEqual(before.system / 1e6);
    expect(system).toBeLessThanOrEqual(after.system / 1e6);
    expect(value(text, "process_cpu_seconds_total")).toBeCloseTo(user + system, 6);
  });

  it("give the resident memory and V8's heap as the process measures them", async () => {
    const text = await scrape();
    const own = process.memoryUsage();
    const rss = value(text, "process_resident_memory_bytes");
    // Read a moment apart: the same within a quarter (the heap is a fraction of the resident set, not a quarter off it).
    expect(rss).toBeGreaterThan(own.rss * 0.75);
    expect(rss).toBeLessThan(own.rss * 1.25);
    const used = value(text, "nodejs_heap_size_used_bytes");
    const total = value(text, "nodejs_heap_size_total_bytes");
    expect(used).toBeGreaterThan(0);
    expect(used).toBeLessThanOrEqual(total);
    expect(total).toBeGreaterThan(own.heapTotal * 0.5);
    expect(total).toBeLessThan(own.heapTotal * 2);
    expect(value(text, "nodejs_external_memory_bytes")).toBeGreaterThan(0);
  });

  it("give when the process started, and the Node.js version it runs", async () => {
    const text = await scrape();
    // From the kernel: the process's start in clock ticks after boot (/proc/self/stat's 22nd field), and the boot time.
    const stat = readFileSync("/proc/self/stat", "utf8");
    const ticks = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]);
    const boot = Number(/^btime (\d+)/m.exec(readFileSync("/proc/stat", "utf8"))![1]);
    // Linux's USER_HZ is 100 on every architecture Node runs on. The kernel's is the fork, from a
    // boot time cut to whole seconds; the process's, Node's start after it (a second or more
    // later on a loaded box): near, not equal.
    const kernelStart = boot + ticks / 100;
    expect(value(text, "process_start_time_seconds")).toBeGreaterThan(kernelStart - 1);
    expect(value(text, "process_start_time_seconds")).toBeLessThan(kernelStart + 6);
    const [major, minor, patch] = process.versions.node.split(".");
    expect(text).toContain(`nodejs_version_info{process="${PROCESS_NAME}",version="${process.version}",major="${major}",minor="${minor}",patch="${patch}"} 1`);
  });

  it("count the open file descriptors, and give their limit", async () => {
    const opened = (): number => value(text, "process_open_fds");
    let text = await scrape();
    const before = opened();
    expect(Math.abs(before - readdirSync("/proc/self/fd").length)).toBeLessThanOrEqual(8);
    const soft = /^Max open files\s+(\d+)/m.exec(readFileSync("/proc/self/limits", "utf8"))![1];
    expect(value(text, "process_max_fds")).toBe(Number(soft));
    const held = Array.from({ length: 50 }, () => openSync("/dev/null", "r"));
    try {
      text = await scrape();
      // 50 more, give or take the sockets the scrapes themselves open and close.
      expect(opened() - before).toBeGreaterThanOrEqual(42);
      expect(opened() - before).toBeLessThanOrEqual(58);
    } finally {
      held.forEach(closeSync);
    }
  });

  it("show a stall of the event loop in the next scrape's delays", async () => {
    await scrape();
    // A scrape restarts the window, and the monitor's first tick after it only marks the time:
    // a stall before that tick is not seen (README, GET /metrics). Let it tick.
    await new Promise((resolve) => setTimeout(resolve, 30));
    // 300 ms of synchronous work: the monitor's 10-ms timer fires ~300 ms late.
    const until = performance.now() + 300;
    while (performance.now() < until);
    // The monitor records the delay when its timer runs, after the stall: let it run.
    await new Promise((resolve) => setTimeout(resolve, 30));
    const text = await scrape();
    const max = value(text, "nodejs_eventloop_lag_max_seconds");
    expect(max).toBeGreaterThanOrEqual(0.25);
    expect(value(text, "nodejs_eventloop_lag_p99_seconds")).toBeLessThanOrEqual(max);
    expect(value(text, "nodejs_eventloop_lag_mean_seconds")).toBeGreaterThan(0);
  });
});

// Redis's memory against its maxmemory (README, GET /metrics): the figures INFO memory gives, on a
// redis-server of this test's own (its maxmemory is set here).
describe("Redis's memory", () => {
  it("is given as Redis counts it, with its maxmemory", async () => {
    const server = await startTestRedis();
    const own = await startTestApp({ redisUrl: server.url, manualClock: "2026-03-02T12:00:00Z", jobs: false });
    try {
      await own.redis.config("SET", "maxmemory", String(3 * 2 ** 30));
      const text = (await own.call("GET", "/metrics")).body as string;
      const info = await own.redis.info("memory");
      const used = Number(/^used_memory:(\d+)/m.exec(info)![1]);
      const line = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, "m").exec(text)?.[1]);
      expect(line("laurel_redis_maxmemory_bytes")).toBe(3 * 2 ** 30);
      // Read a moment apart, by two clients: the same within a tenth.
      expect(line("laurel_redis_used_memory_bytes")).toBeGreaterThan(used * 0.9);
      expect(line("laurel_redis_used_memory_bytes")).toBeLessThan(used * 1.1);
    } finally {
      await own.close();
      await server.stop();
    }
  });
});
