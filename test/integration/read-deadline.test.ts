import { execFileSync } from "node:child_process";
import { connect } from "node:net";
import { performance } from "node:perf_hooks";
import { TrophyApiClient } from "@trophyso/node";
import { Redis } from "ioredis";
import pino from "pino";
import uWS from "uWebSockets.js";
import { describe, expect, it } from "vitest";
import { startTestApp } from "../helpers/app.js";
import { startTestRedis } from "../helpers/redis-server.js";
import { portOutsideEphemeralRange } from "../helpers/ports.js";
import { errorBody, rejection } from "../helpers/sdk.js";
import { runService, waitFor } from "../helpers/service-process.js";
import type { ReadDeadline } from "../../src/http/read-deadline.js";
import { Router } from "../../src/http/router.js";
import { LaurelError } from "../../src/domain/errors.js";
import { registerWebhookRoutes } from "../../src/api/webhooks.js";
import { loadConfigText } from "../../src/config/load.js";
import { Tenants } from "../../src/tenants.js";
import { DEMO_YAML } from "../helpers/app.js";

/**
 * LAUREL_READ_TIMEOUT (src/http/read-deadline.ts): a read (GET) Redis keeps waiting is answered
 * 503 once it has waited the bound; a write waits for Redis and is answered, applied, when it
 * resumes. Redis is stalled for as long as the test needs with SIGSTOP (it keeps the connections
 * and answers nothing), so no answer here depends on how fast the box is: the reads' 503s come
 * while Redis cannot answer at all.
 */

const lesson = { user: { id: "gate", tz: "UTC" }, value: 1 };

async function redisPid(info: string): Promise<number> {
  return Number(/process_id:(\d+)/.exec(info)![1]);
}

describe("the read deadline (LAUREL_READ_TIMEOUT)", () => {
  it("answers the reads a stalled Redis keeps waiting with 503, while a write waits and is applied when Redis resumes", async () => {
    const server = await startTestRedis();
    const lines: Array<{ level: number; msg: string; reads?: number }> = [];
    // /healthz's and /metrics's own bound (LAUREL_HEALTH_TIMEOUT) set small too, as the reads':
    // the answers that expect Redis down come while it is stopped, those that expect it up are waited for.
    const t = await startTestApp({ redisUrl: server.url, jobs: false, readTimeoutMs: 300, healthTimeoutMs: 200, logger: pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) }) });
    const pid = await redisPid(await t.redis.info("server"));
    try {
      expect((await t.call("POST", "/v1/metrics/lessons/event", lesson)).status).toBe(201);
      process.kill(pid, "SIGSTOP");
      let event: Promise<{ status: number; body: any }>;
      let eventAnswered = false;
      try {
        event = t.call("POST", "/v1/metrics/lessons/event", lesson);
        void event.then(() => (eventAnswered = true));
        const timedOut = { status: 503, body: { error: "Redis did not answer within 300 ms; retry later" } };
        // The metering read and a read through a script, each answered while Redis is stopped.
        expect(await t.call("GET", "/v1/users/gate/points/xp")).toEqual(timedOut);
        expect(await t.call("GET", "/v1/users/gate/streak")).toEqual(timedOut);
        // Through the official SDK (one attempt: it retries a 503 twice at once, each waiting for
        // the next sweep): a TrophyApiError with the status and the message.
        const trophy = new TrophyApiClient({ apiKey: t.apiKey, environment: { api: `${t.url}/v1`, admin: `${t.url}/admin/v1` } });
        const err = await rejection(trophy.users.points("gate", "xp", {}, { maxRetries: 0 }));
        expect(err.statusCode).toBe(503);
        expect(errorBody(err)).toBe("Redis did not answer within 300 ms; retry later");
        // A read that needs no Redis is answered as ever.
        expect((await t.call("GET", "/v1/points/xp")).status).toBe(200);
        // /healthz keeps its own bound and its own body.
        expect(await t.call("GET", "/healthz", undefined, {})).toEqual({ status: 503, body: { error: "Redis is not reachable", status: "degraded", redis: "down" } });
        // GET /metrics keeps its own bound too, and answers without the series it reads from
        // Redis: the reads answered 503 are there to be seen while Redis is stalled.
        const stalled = await t.call("GET", "/metrics", undefined, {});
        expect(stalled.status).toBe(200);
        expect(stalled.body).toMatch(/^laurel_read_timeouts_total\{process="[^"]*"\} 3$/m);
        expect(stalled.body).toMatch(/^laurel_redis_up\{process="[^"]*"\} 0$/m);
        // The event waiting for Redis, and this scrape: the timed-out reads are answered.
        expect(stalled.body).toMatch(/^laurel_http_requests_in_flight\{process="[^"]*"\} 2$/m);
        expect(stalled.body).not.toMatch(/^laurel_stream_entries\{/m);
        // Said (the first time) before the answer.
        expect(lines.filter((l) => l.msg === "GET /metrics: the series read from Redis were left out")).toHaveLength(1);
        // The event sent before the reads is still waiting for Redis: never answered early.
        expect(eventAnswered).toBe(false);
      } finally {
        process.kill(pid, "SIGCONT");
      }
      expect((await event).status).toBe(201);
      // Read until answered: on a loaded box a Redis just resumed can still miss the 300 ms bound;
      // each such 503 is counted in the figures below (`late`), so they stay exact.
      let late = 0;
      let read = await t.call("GET", "/v1/users/gate/points/xp");
      await waitFor(async () => {
        if (read.status !== 503) return true;
        late++;
        read = await t.call("GET", "/v1/users/gate/points/xp");
        return false;
      }, "a read answered once Redis resumed");
      expect(read.status).toBe(200);
      expect(read.body.total).toBe(20);
      // A scrape with the series read from Redis: waited for, as the 200 ms bound may pass on a loaded box.
      let metrics = "";
      await waitFor(async () => /^laurel_redis_up\{process="[^"]*"\} 1$/m.test((metrics = (await t.call("GET", "/metrics", undefined, {})).body as string)), "a scrape with laurel_redis_up 1");
      expect(metrics).toMatch(new RegExp(`^laurel_read_timeouts_total\\{process="[^"]*"\\} ${3 + late}$`, "m"));
      expect(metrics).toMatch(/^laurel_http_requests_in_flight\{process="[^"]*"\} 1$/m);
      expect(metrics).toMatch(/^laurel_stream_entries\{tenant="[^"]+",shard="0",group="buckets"\} \d+$/m);
      expect(metrics).toMatch(new RegExp(`^laurel_http_requests_total\\{process="[^"]*",method="GET",route="/v1/users/:id/points/:key",status="503"\\} ${2 + late}$`, "m"));
      // The timed-out read's own answer, which its handler gave once Redis resumed (before the read
      // above: Redis answers in order), was neither sent nor counted: one answer a request.
      expect(metrics).toMatch(/^laurel_http_requests_total\{process="[^"]*",method="GET",route="\/v1\/users\/:id\/points\/:key",status="200"\} 1$/m);
      // Said once for all three (throttled), as a warning.
      const said = lines.filter((l) => l.msg.startsWith("Redis did not answer reads in time"));
      expect(said).toHaveLength(1);
      expect(said[0]!.level).toBe(40);
      // Redis gone (the connection down): /metrics answers at once, with this process's series.
      await server.stop();
      await waitFor(() => t.redis.status !== "ready", "the client to see the connection go");
      const down = await t.call("GET", "/metrics", undefined, {});
      expect(down.status).toBe(200);
      expect(down.body).toMatch(/^laurel_redis_up\{process="[^"]*"\} 0$/m);
      expect(down.body).toMatch(new RegExp(`^laurel_read_timeouts_total\\{process="[^"]*"\\} ${3 + late}$`, "m"));
    } finally {
      await t.close();
      await server.stop().catch(() => undefined);
    }
  });

  it("serves a read whose answer came in time while this process was not running: the sweep runs after the sockets are read", async () => {
    // A process that does not run for a while (a loaded host, a long GC) finds the sweep's timer
    // due before it reads its sockets. Here a read waits on a stopped Redis; Redis is resumed and
    // answers it while this process is held (synchronously: redis-cli calls, until one sees the
    // read's LRANGE done and another, on a later turn of Redis's loop, finds its answer written),
    // and held on until the read has waited past the bound and the sweep is overdue. The answer
    // came in time: it is what the client gets, not the bound's 503. (The sweep run at the
    // timer itself answered 503.) The 5 s bound is the set-up's margin, which needs milliseconds.
    const bound = 5_000;
    const server = await startTestRedis();
    const t = await startTestApp({ redisUrl: server.url, jobs: false, readTimeoutMs: bound });
    const cli = (...args: string[]) => execFileSync("redis-cli", ["-u", server.url, ...args], { encoding: "utf8" });
    const lranges = () => Number(/cmdstat_lrange:calls=(\d+)/.exec(cli("INFO", "commandstats"))?.[1] ?? 0);
    const pid = await redisPid(cli("INFO", "server"));
    try {
      expect((await t.call("POST", "/v1/metrics/lessons/event", lesson)).status).toBe(201);
      // The system seen for the user: the metering read is one LRANGE (store/award-presence.ts).
      expect((await t.call("GET", "/v1/users/gate/points/xp")).status).toBe(200);
      const before = lranges();
      process.kill(pid, "SIGSTOP");
      let resumed = false;
      try {
        const began = performance.now();
        const read = t.call("GET", "/v1/users/gate/points/xp");
        // The read's LRANGE sent (the client holds it as awaiting its answer), its batch written.
        const sent = (t.redis as unknown as { commandQueue: { length: number } }).commandQueue;
        await waitFor(() => sent.length > 0, "the read's LRANGE sent");
        await new Promise((r) => setImmediate(r));
        expect(performance.now() - began).toBeLessThan(bound); // the set-up's margin held
        process.kill(pid, "SIGCONT");
        resumed = true;
        // Bounded (a synchronous loop holds the test's own timeout off): ~10-20 s of redis-cli calls.
        for (let asked = 0; lranges() === before; asked++) if (asked > 2_000) throw new Error("Redis never ran the read's LRANGE");
        lranges();
        // The bound and a sweep's interval (a quarter of it, at most 1 s) past, and some.
        while (performance.now() - began < bound + 1_000 + 100);
        expect(await read).toMatchObject({ status: 200, body: { total: 10 } });
      } finally {
        if (!resumed) process.kill(pid, "SIGCONT");
      }
    } finally {
      await t.close();
      await server.stop();
    }
  });

  it("the built service bounds reads by LAUREL_READ_TIMEOUT (seconds), and 0 lets them wait", async () => {
    const server = await startTestRedis();
    const port = await portOutsideEphemeralRange();
    const bounded = runService({ PORT: String(port), REDIS_URL: server.url, LAUREL_WORKER: "off", LAUREL_READ_TIMEOUT: "0.2" });
    const unboundedPort = await portOutsideEphemeralRange();
    const unbounded = runService({ PORT: String(unboundedPort), REDIS_URL: server.url, LAUREL_WORKER: "off", LAUREL_READ_TIMEOUT: "0" });
    const admin = new Redis(server.url);
    const pid = await redisPid(await admin.info("server"));
    const get = (p: number) => fetch(`http://127.0.0.1:${p}/v1/users/gate/points/xp`, { headers: { "x-api-key": "demo-key" } });
    try {
      await waitFor(() => bounded.output().includes("laurel listening") && unbounded.output().includes("laurel listening"), "both listening", bounded.exited);
      expect((await fetch(`http://127.0.0.1:${port}/v1/metrics/lessons/event`, { method: "POST", headers: { "x-api-key": "demo-key", "content-type": "application/json" }, body: JSON.stringify(lesson) })).status).toBe(201);
      process.kill(pid, "SIGSTOP");
      let waiting: Promise<Response>;
      let waitingAnswered = false;
      try {
        waiting = get(unboundedPort);
        void waiting.then(() => (waitingAnswered = true));
        const res = await get(port);
        expect(res.status).toBe(503);
        expect(await res.json()).toEqual({ error: "Redis did not answer within 200 ms; retry later" });
        // The service with 0 has answered nothing: its read waits for Redis.
        expect(waitingAnswered).toBe(false);
      } finally {
        process.kill(pid, "SIGCONT");
      }
      const late = await waiting;
      expect(late.status).toBe(200);
      expect(((await late.json()) as { total: number }).total).toBe(10);
    } finally {
      admin.disconnect();
      bounded.child.kill("SIGKILL");
      unbounded.child.kill("SIGKILL");
      await Promise.all([bounded.exited, unbounded.exited]);
      await server.stop();
    }
  });
});

describe("the read deadline in the router (src/http/router.ts)", () => {
  /**
   * The router's own wiring of the deadline: a read Redis answered ends the stalled mode (Redis
   * answers again); one whose client went away, or that its handler refused on the request before
   * calling Redis, does not (it says nothing of Redis). A Router on a uWS app of the test's, GET
   * routes on a real Redis stopped with SIGSTOP, real HTTP requests and a real closed connection.
   * The bound is an hour and the periodic sweep is stopped (Router.close): the test sweeps
   * itself, with the time it chooses (ReadDeadline.sweep(now)), so no answer depends on how fast
   * the box is.
   */
  const bound = 3_600_000;
  const timedOut = { status: 503, body: { error: `Redis did not answer within ${bound} ms; retry later` } };

  async function stalledRouter() {
    const server = await startTestRedis();
    const redis = new Redis(server.url);
    const pid = await redisPid(await redis.info("server"));
    const app = uWS.App();
    const router = new Router(app, { maxBodyBytes: 1024, logger: pino({ level: "silent" }), readTimeoutMs: bound });
    router.close();
    const deadline = (router as unknown as { readDeadline: ReadDeadline }).readDeadline;
    // A read of Redis; refused on the request (401, as a handler's key check) before any call to
    // Redis when the request has no key.
    router.add("get", "/read", 0, async (req) => {
      if (req.apiKey === "") throw new LaurelError("UNAUTHORIZED");
      return { status: 200, body: { value: await redis.get("k") } };
    });
    // A read through a call Redis may refuse (a write, as a read script's may be).
    router.add("get", "/write", 0, async () => ({ status: 200, body: { value: await redis.set("k", "v") } }));
    // Laurel's webhook listings, for a tenant without a delivery queue (webhooks off): answered without Redis.
    registerWebhookRoutes(router, await Tenants.create(redis, loadConfigText(DEMO_YAML, "demo.yaml"), Date.now()), null);
    const listenSocket = await new Promise<uWS.us_listen_socket>((resolve, reject) => app.listen("127.0.0.1", 0, (socket) => (socket ? resolve(socket) : reject(new Error("listen failed")))));
    const port = uWS.us_socket_local_port(listenSocket as unknown as uWS.us_socket);
    let stopped = false;
    const get = (path: string, key = "k") => fetch(`http://127.0.0.1:${port}${path}`, { headers: { "x-api-key": key } }).then(async (res) => ({ status: res.status, body: await res.json() }));
    return {
      redis,
      router,
      deadline,
      port,
      get,
      read: () => get("/read"),
      waitingReads: (n: number) => waitFor(() => router.stats.inFlight === n, `${n} read(s) in flight`),
      stopRedis: () => (process.kill(pid, "SIGSTOP"), (stopped = true)),
      resumeRedis: () => (process.kill(pid, "SIGCONT"), (stopped = false)),
      /** Stalled mode on: a read waits the bound (the sweep's clock an hour on) and is answered 503. */
      async stall(): Promise<void> {
        const before = router.stats.readTimeouts;
        const a = get("/read");
        await this.waitingReads(1);
        deadline.sweep(performance.now() + bound);
        expect(router.stats.readTimeouts).toBe(before + 1);
        expect(await a).toEqual(timedOut);
      },
      /** Whether a young read waiting now is answered by a sweep now (stalled mode), else answered when Redis resumes. */
      async youngReadAnsweredBySweep(): Promise<boolean> {
        const before = router.stats.readTimeouts;
        const c = get("/read");
        await this.waitingReads(1);
        deadline.sweep(performance.now());
        const answered = router.stats.readTimeouts === before + 1;
        if (!answered) this.resumeRedis();
        expect(await c).toEqual(answered ? timedOut : { status: 200, body: { value: null } });
        return answered;
      },
      async close(): Promise<void> {
        if (stopped) process.kill(pid, "SIGCONT");
        uWS.us_listen_socket_close(listenSocket);
        (app as unknown as { close?: () => void }).close?.();
        redis.disconnect();
        await server.stop();
      },
    };
  }

  it("a read whose client went away while Redis is stalled keeps the stalled mode; a read answered by its handler ends it", async () => {
    const r = await stalledRouter();
    try {
      expect(await r.read()).toEqual({ status: 200, body: { value: null } });
      r.stopRedis();
      await r.stall();
      // B: its client closes the connection while it waits for the stopped Redis.
      const socket = connect(r.port, "127.0.0.1");
      await new Promise<void>((resolve) => socket.once("connect", resolve));
      await new Promise<void>((resolve) => socket.write("GET /read HTTP/1.1\r\nHost: x\r\nX-API-KEY: k\r\n\r\n", () => resolve()));
      await r.waitingReads(1);
      socket.destroy();
      // The close reached the router (onAborted): B is no longer in flight, and counted aborted.
      await r.waitingReads(0);
      expect(r.router.stats.routes[0]!.statuses.get("aborted")).toBe(1);
      // C: Redis is still taken for stalled (B said nothing of it), so the next sweep answers C at
      // once, young as it is. Were B's end taken for an answer of Redis's, C would wait the hour.
      expect(await r.youngReadAnsweredBySweep()).toBe(true);
      // D: Redis resumes and answers D through its handler: that ends the stalled mode.
      r.resumeRedis();
      expect(await r.read()).toEqual({ status: 200, body: { value: null } });
      // E: Redis stopped again; a sweep now leaves E waiting (not stalled, and E is young).
      r.stopRedis();
      expect(await r.youngReadAnsweredBySweep()).toBe(false);
    } finally {
      await r.close();
    }
  });

  it("a webhook listing of a tenant without a delivery queue, answered without Redis, keeps the stalled mode", async () => {
    const r = await stalledRouter();
    try {
      r.stopRedis();
      await r.stall();
      const admin = "demo-admin-key";
      expect(await r.get("/admin/v1/webhooks", admin)).toMatchObject({ status: 200, body: { endpoints: [], deliveries: { pending: 0, dead: 0 } } });
      expect(await r.get("/admin/v1/webhooks/deliveries", admin)).toEqual({ status: 200, body: { deliveries: [] } });
      // Redis is still taken for stalled: the next sweep answers a young read at once.
      expect(await r.youngReadAnsweredBySweep()).toBe(true);
    } finally {
      await r.close();
    }
  });

  it("a read its handler refused on the request (before any call to Redis) keeps the stalled mode; Redis's refusal ends it", async () => {
    const r = await stalledRouter();
    try {
      r.stopRedis();
      await r.stall();
      // Answered at once by its handler, Redis stopped as it is: it says nothing of Redis.
      expect(await r.get("/read", "")).toEqual({ status: 401, body: { error: "Missing or invalid API key" } });
      expect(await r.youngReadAnsweredBySweep()).toBe(true);
      // Redis answers again, with a refusal (too few replicas for a write): it answers.
      r.resumeRedis();
      await r.redis.config("SET", "min-replicas-to-write", "1");
      expect((await r.get("/write")).status).toBe(503);
      await r.redis.config("SET", "min-replicas-to-write", "0");
      r.stopRedis();
      expect(await r.youngReadAnsweredBySweep()).toBe(false);
    } finally {
      await r.close();
    }
  });
});
