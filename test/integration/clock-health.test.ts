import { execFileSync } from "node:child_process";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_HEALTH_TIMEOUT_MS } from "../../src/api/health.js";
import { startTestApp, type TestApp } from "../helpers/app.js";
import { startTestRedis } from "../helpers/redis-server.js";
import { waitFor } from "../helpers/service-process.js";

describe("manual clock (LAUREL_CLOCK=manual)", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ manualClock: "2026-03-02T12:00:00Z" });
  });
  afterAll(async () => t.close());

  it("sets and reads the service time with the admin key", async () => {
    const set = await t.call("POST", "/admin/v1/clock", { now: "2026-07-01T08:30:00+02:00" }, { "x-api-key": t.adminKey });
    expect(set).toEqual({ status: 200, body: { now: "2026-07-01T06:30:00.000Z" } });
    expect((await t.call("GET", "/admin/v1/clock", undefined, { "x-api-key": t.adminKey })).body).toEqual({ now: "2026-07-01T06:30:00.000Z" });
    const event = await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "clocked" }, value: 1 });
    expect(event.body.achievements[0].achievedAt).toBe("2026-07-01T06:30:00.000Z");
    expect(event.body.points.xp.awards[0].date).toBe("2026-07-01T06:30:00.000Z");
    // /healthz tells the service's time, the manual clock's, not the wall clock's.
    expect(await t.call("GET", "/healthz", undefined, {})).toEqual({ status: 200, body: { status: "ok", redis: "ok", now: "2026-07-01T06:30:00.000Z" } });
  });

  it("takes the ISO 8601 forms with a zone: minutes alone, an offset without its colon, up to 9 digits of a second (kept to the millisecond)", async () => {
    const set = async (now: string) => (await t.call("POST", "/admin/v1/clock", { now }, { "x-api-key": t.adminKey })).body;
    expect(await set("2026-07-01T08:30+02:00")).toEqual({ now: "2026-07-01T06:30:00.000Z" });
    expect(await set("2026-07-01T08:30:00+0200")).toEqual({ now: "2026-07-01T06:30:00.000Z" });
    // Python's isoformat() writes microseconds.
    expect(await set("2026-07-01T06:30:00.123456+00:00")).toEqual({ now: "2026-07-01T06:30:00.123Z" });
    expect(await set("2026-07-01T06:30:00.123456789Z")).toEqual({ now: "2026-07-01T06:30:00.123Z" });
    expect(await set("2026-07-01T06:30:00.5-03:30")).toEqual({ now: "2026-07-01T10:00:00.500Z" });
    await t.setClock("2026-07-01T06:30:00Z");
  });

  it("refuses instants without a zone, nonsense and wrong keys", async () => {
    // Beyond 2199 or before 1970 the service's dates and board members would not be well formed.
    // A time of day that does not exist (hour 25, minute 60) has the pattern's shape and a real date: Date.parse refuses it.
    for (const now of ["2026-07-01T08:30:00", "yesterday", "2026-02-30T00:00:00Z", "", "9999-12-31T23:00:00Z", "2200-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "2026-07-01T25:00:00Z", "2026-07-01T12:60:00Z"]) {
      const res = await t.call("POST", "/admin/v1/clock", { now }, { "x-api-key": t.adminKey });
      expect(res.status, now).toBe(422);
      expect(typeof res.body.error).toBe("string");
    }
    // Each message says what is wrong: a day that does not exist is not "an instant without a zone";
    // a key spelt almost like the missing field is named (typia names the missing field alone).
    expect((await t.call("POST", "/admin/v1/clock", { now: "2027-02-30T15:00:00Z" }, { "x-api-key": t.adminKey })).body).toEqual({ error: "now names a day that does not exist (2027-02-30)" });
    expect((await t.call("POST", "/admin/v1/clock", { now: "2027-02-01T15:00:00" }, { "x-api-key": t.adminKey })).body).toEqual({ error: "now must be an ISO 8601 instant with a zone, e.g. 2026-03-29T01:30:00Z" });
    expect(await t.call("POST", "/admin/v1/clock", { Now: "2027-02-01T15:00:00Z" }, { "x-api-key": t.adminKey })).toEqual({ status: 400, body: { error: 'body.now must be string (got nothing); "Now" beside it is not a known field' } });
    expect(await t.call("POST", "/admin/v1/clock", { time: "2027-02-01T15:00:00Z" }, { "x-api-key": t.adminKey })).toEqual({ status: 400, body: { error: "body.now must be string (got nothing)" } });
    const edges = await t.call("POST", "/admin/v1/clock", { now: "2199-12-31T23:59:59.999Z" }, { "x-api-key": t.adminKey });
    expect(edges.status).toBe(200);
    expect((await t.call("POST", "/admin/v1/clock", { now: "1970-01-01T00:00:00Z" }, { "x-api-key": t.adminKey })).status).toBe(200);
    expect((await t.call("POST", "/admin/v1/clock", { now: 5 }, { "x-api-key": t.adminKey })).status).toBe(400);
    expect((await t.call("POST", "/admin/v1/clock", { now: "2026-07-01T00:00:00Z" }, { "x-api-key": "nope" })).status).toBe(401);
    // Reading it needs the admin key too: a wrong key, or a tenant's API key, is refused.
    for (const key of ["nope", t.apiKey]) expect((await t.call("GET", "/admin/v1/clock", undefined, { "x-api-key": key })).status, key).toBe(401);
    expect((await t.call("GET", "/admin/v1/clock", undefined, { "x-api-key": t.adminKey })).body.now).toBe("1970-01-01T00:00:00.000Z");
    await t.setClock("2026-07-01T06:30:00Z");
  });
});

describe("system clock", () => {
  it("has no clock endpoint (404) and a health check", async () => {
    const t = await startTestApp();
    try {
      const res = await t.call("POST", "/admin/v1/clock", { now: "2026-07-01T00:00:00Z" }, { "x-api-key": t.adminKey });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: "Not found" });
      // The path does not exist: the same 404 for a read, and whatever key is sent (an unknown
      // route says nothing about keys), before the body is looked at.
      for (const headers of [{ "x-api-key": t.adminKey }, { "x-api-key": t.apiKey }, { "x-api-key": "" }, { "x-api-key": "wrong" }]) {
        expect(await t.call("GET", "/admin/v1/clock", undefined, headers), JSON.stringify(headers)).toEqual({ status: 404, body: { error: "Not found" } });
        expect(await t.call("POST", "/admin/v1/clock", { now: "nonsense" }, headers), JSON.stringify(headers)).toEqual({ status: 404, body: { error: "Not found" } });
      }
      // Nor its content type (was 415: the body's type was checked before the route's absence).
      const form = await fetch(`${t.url}/admin/v1/clock`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "now=2026" });
      expect([form.status, await form.json()]).toEqual([404, { error: "Not found" }]);
      const health = await t.call("GET", "/healthz", undefined, {});
      expect(health.status).toBe(200);
      expect(health.body).toMatchObject({ status: "ok", redis: "ok" });
    } finally {
      await t.close();
    }
  });
});

describe("the status line and content type of answers (respond.ts writes them as bytes encoded once)", () => {
  it("carry each status's reason phrase and the JSON type, or the type a handler names", async () => {
    const t = await startTestApp();
    try {
      const answer = async (method: string, path: string, headers: Record<string, string>, body?: unknown) => {
        const res = await fetch(`${t.url}${path}`, { method, headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) }, body: body === undefined ? undefined : JSON.stringify(body) });
        await res.arrayBuffer();
        return [res.status, res.statusText, res.headers.get("content-type")];
      };
      const key = { "x-api-key": t.apiKey };
      expect(await answer("GET", "/healthz", {})).toEqual([200, "OK", "application/json"]);
      expect(await answer("POST", "/v1/metrics/lessons/event", key, { user: { id: "status-line" }, value: 1 })).toEqual([201, "Created", "application/json"]);
      expect(await answer("GET", "/v1/users/status-line/points/xp", { "x-api-key": "wrong" })).toEqual([401, "Unauthorized", "application/json"]);
      expect(await answer("GET", "/v1/users/nobody/points/xp", key)).toEqual([404, "Not Found", "application/json"]);
      expect(await answer("GET", "/v1/users/status-line/points/xp?awards=0", key)).toEqual([422, "Unprocessable Entity", "application/json"]);
      expect(await answer("GET", "/metrics", {})).toEqual([200, "OK", "text/plain; version=0.0.4; charset=utf-8"]);
    } finally {
      await t.close();
    }
  });
});

/**
 * The bound itself (LAUREL_HEALTH_TIMEOUT; the test apps' is a minute unless set): the production
 * second, set here. A Redis that answers may then be answered "down" on a loaded box, so the
 * answers that expect it up are waited for; those that expect it down come while it cannot answer.
 */
describe("GET /healthz while Redis is stalled or gone", () => {
  it("answers 200 when Redis answered in time but the process ran late (a loaded host): its timer is then due before it reads the answer", async () => {
    const server = await startTestRedis();
    const t = await startTestApp({ redisUrl: server.url, jobs: false, healthTimeoutMs: DEFAULT_HEALTH_TIMEOUT_MS });
    const observer = new Redis(server.url);
    const pings = async () => Number(/cmdstat_ping:calls=(\d+)/.exec(await observer.info("commandstats"))?.[1] ?? 0);
    // Another process, run while this one is held: it returns once Redis has run a PING after
    // `before` (and answered it: one more round trip, Redis writes its replies between them).
    const waitForPing = `import { Redis } from "ioredis";
      const redis = new Redis(process.env.URL);
      const pings = async () => Number(/cmdstat_ping:calls=(\\d+)/.exec(await redis.info("commandstats"))?.[1] ?? 0);
      while ((await pings()) <= Number(process.env.BEFORE)) await new Promise((r) => setTimeout(r, 10));
      await redis.ping();
      redis.disconnect();`;
    const send = t.redis.sendCommand;
    try {
      const before = await pings();
      t.redis.sendCommand = ((command, stream) => {
        const sent = send.call(t.redis, command, stream);
        if (command.name === "ping") {
          t.redis.sendCommand = send;
          // After the turn's writes (write-coalescing.ts): the PING is on its way. This process
          // then runs nothing past the health check's timeout, and until Redis has answered.
          setImmediate(() => {
            const start = Date.now();
            while (Date.now() - start <= DEFAULT_HEALTH_TIMEOUT_MS) {
              // busy, as a process starved of CPU is late
            }
            // Bounded by the clock, as waitFor is (a synchronous wait holds vitest's own timeout off).
            execFileSync(process.execPath, ["--input-type=module", "-e", waitForPing], { env: { ...process.env, URL: server.url, BEFORE: String(before) }, timeout: 240_000 });
          });
        }
        return sent;
      }) as typeof send;
      expect(await t.call("GET", "/healthz", undefined, {})).toMatchObject({ status: 200, body: { status: "ok", redis: "ok" } });
    } finally {
      t.redis.sendCommand = send;
      observer.disconnect();
      await t.close();
      await server.stop();
    }
  });

  it("answers 503 within its PING timeout (LAUREL_HEALTH_TIMEOUT), not when Redis comes back, and 503 without a connection", async () => {
    const server = await startTestRedis();
    const t = await startTestApp({ redisUrl: server.url, jobs: false, healthTimeoutMs: DEFAULT_HEALTH_TIMEOUT_MS });
    const pid = Number(/process_id:(\d+)/.exec(await t.redis.info("server"))![1]);
    const down = { error: "Redis is not reachable", status: "degraded", redis: "down" };
    const healthy = async () => (await t.call("GET", "/healthz", undefined, {})).status === 200;
    try {
      await waitFor(healthy, "/healthz to answer 200");
      // Stopped, Redis keeps the connection and answers nothing: the probe waited for it, then said ok.
      process.kill(pid, "SIGSTOP");
      try {
        expect(await t.call("GET", "/healthz", undefined, {})).toEqual({ status: 503, body: down });
      } finally {
        process.kill(pid, "SIGCONT");
      }
      await waitFor(healthy, "/healthz to answer 200 once Redis resumed");
      // Gone: the connection is down (answered without a PING, which ioredis would hold through
      // its reconnection backoff: 1.5-7.5 s in an audit).
      await server.stop();
      // Once the client knows (waited for, not timed), the check sends no PING at all.
      await waitFor(() => t.redis.status !== "ready", "the client to see the connection go");
      const sent: string[] = [];
      const send = t.redis.sendCommand;
      t.redis.sendCommand = ((command, stream) => (sent.push(command.name), send.call(t.redis, command, stream))) as typeof send;
      try {
        expect(await t.call("GET", "/healthz", undefined, {})).toEqual({ status: 503, body: down });
      } finally {
        t.redis.sendCommand = send;
      }
      expect(sent).not.toContain("ping");
    } finally {
      await t.close().catch(() => undefined);
      await server.stop().catch(() => undefined);
    }
  });
});
