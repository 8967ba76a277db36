import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LATENCY_BOUNDS_MS } from "../../src/http/request-stats.js";
import { PROCESS_NAME } from "../../src/process-name.js";
import { startTestApp, type TestApp } from "../helpers/app.js";

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
    while (series(await scrape(), "laurel_http_requests_total", aborted) === null) await new Promise((r) => setTimeout(r, 20));
    expect(series(await scrape(), "laurel_http_requests_total", aborted)).toBe(1);
  });
});
