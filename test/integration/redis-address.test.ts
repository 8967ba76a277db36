import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEmbeddedRedis, type EmbeddedRedis } from "../../src/embedded-redis.js";
import { setprivDeathSignal, waitForRedis } from "../../src/redis-child.js";
import { pino } from "pino";
import { warnIfRedisEvicts, warnIfRedisForgets } from "../../src/store/durability-check.js";
import { createRedisClient, logConnectionErrors, queueConnection } from "../../src/store/redis-client.js";
import { portOutsideEphemeralRange } from "../helpers/ports.js";
import { startTestRedis } from "../helpers/redis-server.js";
import { demoConfig, dumpTenant, startTestApp, type TestApp } from "../helpers/app.js";
import { waitFor } from "../helpers/service-process.js";

/**
 * REDIS_URL may name a Unix socket (`/var/run/redis/redis-server.sock`) or a TLS server
 * (`rediss://`). The scheduled and retried work (BullMQ) must reach the same server the same way
 * as the event path: before, its connection was rebuilt from host and port alone, so with a
 * socket it went to localhost:6379 (whatever Redis runs there), and with rediss:// it dropped TLS.
 */

describe("queueConnection", () => {
  it("keeps a rediss:// URL's TLS, credentials and database", () => {
    const redis = createRedisClient("rediss://ops:s3cret@redis.example:6390/2", { lazyConnect: true });
    const connection = queueConnection(redis) as Record<string, unknown>;
    expect(connection).toMatchObject({ host: "redis.example", port: 6390, username: "ops", password: "s3cret", db: 2 });
    expect(connection.tls).toBeTruthy();
    expect(connection.tls).toEqual(redis.options.tls);
    redis.disconnect();
  });

  it("reconnects as the service's client does when the server turns out a read-only replica (redis-failover.test.ts)", () => {
    for (const url of ["redis://127.0.0.1:6390", "/run/redis/redis.sock"]) {
      const redis = createRedisClient(url, { lazyConnect: true });
      const { reconnectOnError } = queueConnection(redis) as { reconnectOnError: (err: Error) => unknown };
      expect(reconnectOnError(new Error("READONLY You can't write against a read only replica."))).toBe(1);
      expect(reconnectOnError(new Error("OOM command not allowed when used memory > 'maxmemory'."))).toBe(false);
      redis.disconnect();
    }
  });

  it("keeps a socket path, with no host or port to fall back to", () => {
    const redis = createRedisClient("/run/redis/redis.sock?db=3", { lazyConnect: true });
    const connection = queueConnection(redis) as Record<string, unknown>;
    expect(connection).toMatchObject({ path: "/run/redis/redis.sock", db: 3 });
    expect(connection.host).toBeUndefined();
    expect(connection.port).toBeUndefined();
    redis.disconnect();
  });
});

describe("createRedisClient", () => {
  it("gives a command up after 3 retries (README: a 503 once ioredis gave up), and pipelines automatically only with LAUREL_AUTOPIPELINE=1", () => {
    for (const [env, pipelined] of [[{}, false], [{ LAUREL_AUTOPIPELINE: "1" }, true]] as const) {
      const redis = createRedisClient("redis://127.0.0.1:1", { lazyConnect: true }, env);
      expect(redis.options).toMatchObject({ maxRetriesPerRequest: 3, enableAutoPipelining: pipelined });
      redis.disconnect();
    }
    // The caller's options win (the test apps give up after 1).
    const own = createRedisClient("redis://127.0.0.1:1", { lazyConnect: true, maxRetriesPerRequest: 1 }, {});
    expect(own.options.maxRetriesPerRequest).toBe(1);
    own.disconnect();
  });
});

describe("logConnectionErrors", () => {
  it("says nothing of a first connection that succeeds: no error, and no 'restored' for a connection never lost", async () => {
    const server = await startTestRedis();
    const lines: Array<{ level: number; msg: string }> = [];
    const redis = logConnectionErrors(createRedisClient(server.url), pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) }));
    try {
      expect(await redis.ping()).toBe("PONG");
      expect(redis.status).toBe("ready");
      expect(lines).toEqual([]);
    } finally {
      redis.disconnect();
      await server.stop();
    }
  });
});

describe("a service on a Redis reached only by its Unix socket", () => {
  let dir: string;
  let server: ChildProcess;
  let socket: string;
  let t: TestApp;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "laurel-sock-"));
    socket = join(dir, "redis.sock");
    // --port 0: no TCP listener at all, so nothing can silently reach another server instead.
    // With the death signal, as every server of the run (src/redis-child.ts): a run cut short leaves it not running.
    const args = ["--port", "0", "--unixsocket", socket, "--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir", dir];
    server = setprivDeathSignal() ? spawn("setpriv", ["--pdeathsig", "TERM", "--", "redis-server", ...args], { stdio: "ignore" }) : spawn("redis-server", args, { stdio: "ignore" });
    await waitForRedis(socket, server);
    t = await startTestApp({ redisUrl: socket, manualClock: "2026-03-02T12:00:00Z" });
  });

  afterAll(async () => {
    await t?.close();
    server?.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  });

  it("records an event and keeps its scheduled work on that server", async () => {
    const res = await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "sock" }, value: 1 });
    expect(res.status).toBe(201);
    expect(res.body.total).toBe(1);
    // The time-trigger queues (BullMQ) wrote their keys to the socket's server.
    const jobs = await t.redis.keys("{laurel-jobs}*");
    expect(jobs.length).toBeGreaterThan(0);
  });
});

describe("a service whose Redis went away", () => {
  let dir: string;
  let server: EmbeddedRedis;
  let t: TestApp;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "laurel-gone-"));
    // Started again on its port by the test: a port no other test's freePort() can be given.
    server = await startEmbeddedRedis({ dir, appendOnly: true, port: await portOutsideEphemeralRange() });
    t = await startTestApp({ redisUrl: server.url, manualClock: "2026-03-02T12:00:00Z", jobs: false });
  });

  afterAll(async () => {
    await t?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const lesson = () => t.call("POST", "/v1/metrics/lessons/event", { user: { id: "gone" }, value: 1 });

  it("answers 503 with {error} while Redis is down, and serves again once it is back; the log says so once", async () => {
    const lines: Array<{ level: number; msg: string }> = [];
    logConnectionErrors(t.redis, pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) }));
    expect((await lesson()).status).toBe(201);
    await server.stop();
    const refused = await lesson();
    expect(refused.status).toBe(503);
    expect(refused.body).toEqual({ error: expect.stringContaining("Redis is not reachable") });
    const read = await t.call("GET", "/v1/users/gone/points/xp");
    expect(read.status).toBe(503);
    // A read changes nothing either way: its message does not speak of retrying a write.
    expect(read.body).toEqual({ error: "Redis is not reachable; retry later" });
    // The same port and data directory: the AOF brings the first event back.
    server = await startEmbeddedRedis({ dir, appendOnly: true, port: Number(new URL(server.url).port) });
    await waitFor(() => t.redis.status === "ready", "the client to reconnect");
    const after = await lesson();
    expect(after.status).toBe(201);
    // Redis was stopped before the refused event was sent: only the two others count.
    expect(after.body.total).toBe(2);
    // Every failed reconnect attempt was an error event; the log has one warning and one recovery.
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [40, "redis not reachable; retrying"],
      [30, "redis connection restored"],
    ]);
  });
});

/**
 * Drives a Redis that refuses writes for a cause (`refuse` brings it about, `allow` ends it):
 * three events answered 503 with `message`, nothing written, a metering read answered, one log
 * line naming the cause and none of a failed request; then an event recorded (the user's second).
 */
async function refusedWrites(cause: {
  refuse: (t: TestApp, dir: string) => Promise<void>;
  allow: (t: TestApp) => Promise<void>;
  message: string;
  log: string;
  /** The cause's label on GET /metrics (laurel_redis_refusals_total). */
  cause: string;
  /** More checks while writes are refused, with the tenant's keys as they were before (`before`). */
  meanwhile?: (t: TestApp, before: Record<string, unknown>, lesson: () => Promise<{ status: number; body: any }>) => Promise<void>;
}): Promise<void> {
  const server = await startTestRedis();
  const lines: Array<{ level: number; msg: string; unlogged?: number }> = [];
  const { yaml, tenantId } = demoConfig();
  const t = await startTestApp({ yaml, redisUrl: server.url, manualClock: "2026-03-02T12:00:00Z", jobs: false, logger: pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) }) });
  const lesson = () => t.call("POST", "/v1/metrics/lessons/event", { user: { id: "refused" }, value: 1 });
  try {
    expect((await lesson()).status).toBe(201);
    await cause.refuse(t, server.dir);
    const before = await dumpTenant(t.redis, tenantId);
    for (let i = 0; i < 3; i++) expect(await lesson()).toEqual({ status: 503, body: { error: cause.message } });
    expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
    const read = await t.call("GET", "/v1/users/refused/points/xp");
    expect(read.status).toBe(200);
    expect(read.body.total).toBe(10);
    expect(lines.filter((l) => l.msg === cause.log)).toEqual([expect.objectContaining({ level: 50, unlogged: 0 })]);
    expect(lines.filter((l) => l.msg === "request failed")).toEqual([]);
    // Counted for an alert, each of the three (a cause not met reads 0).
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    expect(metrics).toMatch(new RegExp(`^laurel_redis_refusals_total\\{process="[^"]*",cause="${cause.cause}"\\} 3$`, "m"));
    expect(metrics).toMatch(/^laurel_redis_refusals_total\{process="[^"]*",cause="busy"\} 0$/m);
    await cause.meanwhile?.(t, before, lesson);
    await cause.allow(t);
    const after = await lesson();
    expect(after.status).toBe(201);
    expect(after.body.total).toBe(2);
  } finally {
    await t.redis.config("SET", "save", "");
    await t.close();
    await server.stop();
  }
}

describe("a Redis that refuses writes for a while", () => {
  it("at its maxmemory: 503, nothing written, logged once; reads go on (by script too), and writes resume when memory is freed", async () => {
    await refusedWrites({
      // noeviction (the default, and what the README asks for): every write is refused before it runs.
      refuse: async (t) => void (await t.redis.config("SET", "maxmemory", "1")),
      allow: async (t) => void (await t.redis.config("SET", "maxmemory", "0")),
      message: "Redis is out of memory (maxmemory) and refused this write; nothing was recorded",
      log: "redis is out of memory (maxmemory): writes are refused",
      cause: "out-of-memory",
      meanwhile: async (t, before, lesson) => {
        // Reads by script too: their functions carry the no-writes flag (without it Redis refused
        // them as writes: 503 "refused this write" for a read).
        for (const path of ["/v1/users/refused", "/v1/users/refused/achievements", "/v1/users/refused/streak", "/v1/users/refused/metrics", "/v1/points/xp/summary", "/v1/streaks/rankings"]) {
          const res = await t.call("GET", path);
          expect(res.status, `${path} ${JSON.stringify(res.body)}`).toBe(200);
        }
        expect((await fetch(`${t.url}/metrics`)).status).toBe(200);
        // Scripts Redis does not hold (a restart, a failover) cannot be loaded at maxmemory: a 503
        // that says so, for a read and a write alike (the retry's "Function not found" was a 500).
        await t.redis.config("SET", "maxmemory", "0");
        await t.redis.function("FLUSH");
        await t.redis.config("SET", "maxmemory", "1");
        expect(await t.call("GET", "/v1/users/refused")).toEqual({ status: 503, body: { error: "Redis is out of memory (maxmemory) and refused to load the script this read needs; retry later" } });
        expect(await lesson()).toEqual({ status: 503, body: { error: "Redis is out of memory (maxmemory) and refused this write; nothing was recorded" } });
        expect(await dumpTenant(t.redis, t.tenants[0]!.id)).toEqual(before);
      },
    });
  });

  it("cannot write to its disk (MISCONF): 503, nothing written, logged once; reads go on, and writes resume once the operator acts", async () => {
    await refusedWrites({
      // A snapshot that fails (its directory gone, as a full disk fails it) with snapshots
      // configured: Redis then refuses every write (stop-writes-on-bgsave-error, on by default),
      // as it does when an AOF write fails. Waited on as a state: the snapshot's end, failed.
      refuse: async (t, dir) => {
        await t.redis.config("SET", "save", "3600 1");
        rmSync(dir, { recursive: true });
        await t.redis.bgsave();
        await waitFor(async () => {
          const info = await t.redis.info("persistence");
          return info.includes("rdb_bgsave_in_progress:0") && info.includes("rdb_last_bgsave_status:err");
        }, "the snapshot to fail");
      },
      // The operator turns snapshots off (or frees the disk and a snapshot succeeds). The stop
      // takes none either (a failing one keeps Redis from exiting).
      allow: async (t) => void (await t.redis.config("SET", "save", "")),
      message: "Redis cannot write to its disk (MISCONF) and refused this write; nothing was recorded; retry",
      log: "redis cannot write to its disk (MISCONF): writes are refused until it can",
      cause: "disk-error",
    });
  });

  it("has too few replicas in sync (min-replicas-to-write, README: Persistence): the same, until a replica syncs or the setting goes", async () => {
    await refusedWrites({
      refuse: async (t) => void (await t.redis.config("SET", "min-replicas-to-write", "1")),
      allow: async (t) => void (await t.redis.config("SET", "min-replicas-to-write", "0")),
      message: "Redis refused this write: too few replicas are in sync (min-replicas-to-write); nothing was recorded; retry",
      log: "redis has too few replicas in sync (min-replicas-to-write): writes are refused",
      cause: "too-few-replicas",
    });
  });
});

describe("a Redis whose password changed under the service", () => {
  it("WRONGPASS at the reconnects: 503 that says nothing was recorded, nothing written, logged once, counted; requests pass again once the password is back", async () => {
    const server = await startTestRedis();
    const admin = createRedisClient(server.url);
    await admin.call("ACL", "SETUSER", "laurel", "on", ">first-pass-7Qz", "~*", "&*", "+@all");
    const lines: Array<{ level: number; msg: string; unlogged?: number }> = [];
    const { yaml, tenantId } = demoConfig();
    const url = new URL(server.url);
    url.username = "laurel";
    url.password = "first-pass-7Qz";
    const t = await startTestApp({ yaml, redisUrl: url.toString(), manualClock: "2026-03-02T12:00:00Z", jobs: false, logger: pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) }) });
    // As the service does (main.ts): the client's own errors (each refused AUTH) logged, once per outage.
    logConnectionErrors(t.redis, pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) }));
    const lesson = () => t.call("POST", "/v1/metrics/lessons/event", { user: { id: "rotated" }, value: 1 });
    const refusedWrite = { status: 503, body: { error: "Redis refused the service's credentials (WRONGPASS) and this request was not sent to it; nothing was recorded; retry" } };
    try {
      expect((await lesson()).status).toBe(201);
      // A rotation on the server only: every reconnect's AUTH is refused from now on.
      await admin.call("ACL", "SETUSER", "laurel", "resetpass", ">second-pass-8Wy");
      await admin.client("KILL", "USER", "laurel");
      const before = await dumpTenant(admin, tenantId);
      // Each request is answered 503: as a refusal when ioredis rejects it with the refused AUTH's
      // error, as the connection's loss when it gives it up first (maxRetriesPerRequest, every
      // fourth reconnect), which of the two depending on when it came. Sent until three refusals.
      const unreachable = { status: 503, body: { error: "Redis is not reachable; whether this request took effect is unknown (an event is safe to send again with the same Idempotency-Key)" } };
      for (let refusals = 0; refusals < 3; ) {
        const answer = await lesson();
        expect([refusedWrite, unreachable]).toContainEqual(answer);
        if (answer.body.error === refusedWrite.body.error) refusals++;
      }
      // A read alike, in its own words (nothing to retry of a write).
      expect([
        { status: 503, body: { error: "Redis refused the service's credentials (WRONGPASS); retry later" } },
        { status: 503, body: { error: "Redis is not reachable; retry later" } },
      ]).toContainEqual(await t.call("GET", "/v1/users/rotated/points/xp"));
      // Not healthy: a balancer takes such an instance out (every instance alike, since they share REDIS_URL).
      expect((await fetch(`${t.url}/healthz`)).status).toBe(503);
      expect(await dumpTenant(admin, tenantId)).toEqual(before);
      expect(lines.filter((l) => l.msg.startsWith("redis refused the credentials in REDIS_URL (WRONGPASS"))).toEqual([expect.objectContaining({ level: 50, unlogged: 0 })]);
      expect(lines.filter((l) => l.msg === "request failed")).toEqual([]);
      const metrics = await (await fetch(`${t.url}/metrics`)).text();
      const counted = Number(/^laurel_redis_refusals_total\{process="[^"]*",cause="credentials-refused"\} (\d+)$/m.exec(metrics)?.[1]);
      expect(counted).toBeGreaterThanOrEqual(3);
      // The password back: the client's next reconnect authenticates, and the event counts.
      await admin.call("ACL", "SETUSER", "laurel", "resetpass", ">first-pass-7Qz");
      let after: Awaited<ReturnType<typeof lesson>> | undefined;
      await waitFor(async () => (after = await lesson()).status === 201, "an event taken after the password came back");
      expect(after!.body.total).toBe(2);
    } finally {
      await t.close();
      admin.disconnect();
      await server.stop();
    }
  });
});

describe("a Redis that may evict keys", () => {
  it("is named in a warning at start; noeviction is not", async () => {
    const server = await startTestRedis();
    const redis = createRedisClient(server.url);
    try {
      const lines: Array<{ level: number; msg: string; maxmemoryPolicy?: string }> = [];
      const logger = pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) });
      expect(await warnIfRedisEvicts(redis, logger)).toBe("noeviction");
      expect(lines).toEqual([]);
      // Every policy but noeviction deletes keys under pressure, the volatile ones too (Laurel sets TTLs).
      const evicting = ["allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"];
      for (const policy of evicting) {
        await redis.config("SET", "maxmemory-policy", policy);
        expect(await warnIfRedisEvicts(redis, logger)).toBe(policy);
      }
      expect(lines.map((l) => l.maxmemoryPolicy)).toEqual(evicting);
      expect(lines[0]).toMatchObject({ level: 40, maxmemoryPolicy: "allkeys-lru", msg: expect.stringContaining("set maxmemory-policy noeviction") });
    } finally {
      redis.disconnect();
      await server.stop();
    }
  });
});

describe("a Redis without its append-only file", () => {
  it("is named in a warning at start; one with AOF is not", async () => {
    const lines: Array<{ level: number; msg: string; aofEnabled?: boolean }> = [];
    const logger = pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) });
    for (const appendOnly of [false, true]) {
      const server = await startTestRedis({ appendOnly });
      const redis = createRedisClient(server.url);
      try {
        expect(await warnIfRedisForgets(redis, logger)).toBe(appendOnly);
        // The warning is the first server's: written by its check, none by the second's.
        expect(lines).toHaveLength(1);
      } finally {
        redis.disconnect();
        await server.stop();
      }
    }
    expect(lines[0]).toMatchObject({ level: 40, aofEnabled: false, msg: expect.stringContaining("set appendonly yes") });
  });
});
