import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Redis } from "ioredis";
import { pino, type Logger } from "pino";
import { inject } from "vitest";
import { startApp, type AppOptions, type RunningApp } from "../../src/app.js";
import { ManualClock, SystemClock, type Clock } from "../../src/clock.js";
import type { CompiledTenant } from "../../src/config/compiled.js";
import { loadConfigText } from "../../src/config/load.js";
import { createRedisClient } from "../../src/store/redis-client.js";
import { startTestRedis } from "./redis-server.js";

/** The tests' bound on /healthz's and /metrics's waits for Redis (TestAppOptions.healthTimeoutMs; runService's LAUREL_HEALTH_TIMEOUT). */
export const TEST_HEALTH_TIMEOUT_MS = 60_000;

export const DEMO_YAML = readFileSync(new URL("../../config/demo.yaml", import.meta.url), "utf8");

/** A tenant id no other test uses, so tests can share the run's Redis. */
export function uniqueTenantId(prefix = "t"): string {
  return `${prefix}${randomBytes(5).toString("hex")}`;
}

/** The demo config under a fresh tenant id (keys stay demo-key / demo-admin-key). */
export function demoConfig(tenantId = uniqueTenantId()): { yaml: string; tenantId: string } {
  return { yaml: DEMO_YAML.replace(/^(\s*- id: )demo$/m, `$1${tenantId}`), tenantId };
}

export interface TestApp {
  url: string;
  app: RunningApp;
  redis: Redis;
  clock: Clock;
  tenants: CompiledTenant[];
  apiKey: string;
  adminKey: string;
  /** JSON request helper: returns status and parsed body. */
  call(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any }>;
  /** Sets the manual clock through the admin API. */
  setClock(iso: string): Promise<void>;
  close(): Promise<void>;
}

export interface TestAppOptions {
  yaml?: string;
  manualClock?: boolean | string;
  redisUrl?: string;
  maxBodyBytes?: number;
  /** Run the background workers (time triggers); default true. */
  jobs?: boolean;
  /** Leaderboard threshold refresh period (ms of wall time); tests default to 0: refreshed when the manual clock moves. */
  thresholdRefreshMs?: number;
  /** Webhook settings (issue 6): tests shorten the backoff and the locks. */
  webhooks?: AppOptions["webhooks"];
  /** The app's logger (default: silent, or TEST_LOG_LEVEL), for a test that reads what is logged. */
  logger?: Logger;
  /** AppOptions.lingerMs: 0 unless set, so that closing a test app takes no second (the built service's stop tests keep the default). */
  lingerMs?: number;
  /**
   * AppOptions.readTimeoutMs: 0 (reads wait) unless set. The production bound (2 s) is the
   * machine's to meet: on a loaded box a test's read could be answered 503 by it (the tests of
   * the bound set it; the built service's tests keep the default).
   */
  readTimeoutMs?: number;
  /**
   * AppOptions.healthTimeoutMs: a minute unless set. The production bound (1 s) is the machine's
   * to meet: a redis-server starved of CPU for a second on a loaded box made /healthz and /metrics
   * say "down" to a test that expected "up" (the tests of the bound set a small one).
   */
  healthTimeoutMs?: number;
}

export async function startTestApp(opts: TestAppOptions = {}): Promise<TestApp> {
  const yaml = opts.yaml ?? demoConfig().yaml;
  const tenants = loadConfigText(yaml, "test.yaml", {});
  const redis = createRedisClient(opts.redisUrl ?? inject("redisUrl"), { maxRetriesPerRequest: 1 });
  const clock: Clock = opts.manualClock
    ? new ManualClock(typeof opts.manualClock === "string" ? Date.parse(opts.manualClock) : Date.parse("2026-03-02T12:00:00Z"))
    : new SystemClock();
  const logger = opts.logger ?? pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" });
  // A first attempt's 2 s timeout and 500 ms "slow" mark are the machine's to meet: past them
  // (a loaded box), a delivery was counted failed and waited 30 s for its retry, or the
  // endpoint's next deliveries went through the queue, and a test that looked at the receiver,
  // a delivery's attempts or its log right after a drain saw something else. Tests meet neither
  // unless they set them. And an endpoint sent through the queue after a failed or slow first
  // attempt stays so for 10 minutes, not 30 s of the wall clock that a slow test could outlast.
  const delivery = opts.webhooks?.delivery;
  // A stop cuts the attempts in flight at once unless a test sets a grace (the production 2 s
  // would make a stop's tests with a hanging receiver wait for it).
  const webhooks = { ...opts.webhooks, delivery: { stopGraceMs: 0, ...delivery, firstAttempt: { timeoutMs: 600_000, slowMs: 600_000, pauseMs: 600_000, ...delivery?.firstAttempt } } };
  const app = await startApp({ tenants, redis, clock, logger, host: "127.0.0.1", port: 0, maxBodyBytes: opts.maxBodyBytes, jobs: opts.jobs, thresholdRefreshMs: opts.thresholdRefreshMs ?? 0, webhooks, lingerMs: opts.lingerMs ?? 0, readTimeoutMs: opts.readTimeoutMs ?? 0, healthTimeoutMs: opts.healthTimeoutMs ?? TEST_HEALTH_TIMEOUT_MS }).catch(
    async (err: unknown) => {
      redis.disconnect();
      throw err;
    },
  );
  const url = `http://127.0.0.1:${app.port}`;
  const call: TestApp["call"] = async (method, path, body, headers = {}) => {
    const init: RequestInit = { method, headers: { "x-api-key": "demo-key", ...headers } };
    if (body !== undefined) {
      init.body = typeof body === "string" ? body : JSON.stringify(body);
      (init.headers as Record<string, string>)["content-type"] ??= "application/json";
    }
    const res = await fetch(url + path, init);
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* keep the text */
    }
    return { status: res.status, body: parsed };
  };
  return {
    url,
    app,
    redis,
    clock,
    tenants,
    apiKey: "demo-key",
    adminKey: "demo-admin-key",
    call,
    async setClock(iso: string) {
      const res = await call("POST", "/admin/v1/clock", { now: iso }, { "x-api-key": "demo-admin-key" });
      if (res.status !== 200) throw new Error(`clock: ${res.status} ${JSON.stringify(res.body)}`);
    },
    async close() {
      await app.close();
      await redis.quit();
    },
  };
}

/** Runs `body` against an app started with `opts`, and closes the app however `body` ends. */
export async function withTestApp<T>(opts: TestAppOptions, body: (t: TestApp) => Promise<T>): Promise<T> {
  const t = await startTestApp(opts);
  try {
    return await body(t);
  } finally {
    await t.close();
  }
}

/** Every key of a tenant with its value, for "nothing changed" assertions. */
export async function dumpTenant(redis: Redis, tenantId: string): Promise<Record<string, unknown>> {
  return dumpKeys(redis, `{${tenantId}*`);
}

/** Every key matching a SCAN pattern with its value (streams by length). */
export async function dumpKeys(redis: Redis, match: string): Promise<Record<string, unknown>> {
  const keys: string[] = [];
  let cursor = "0";
  do {
    const [next, batch] = await redis.scan(cursor, "MATCH", match, "COUNT", 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== "0");
  const out: Record<string, unknown> = {};
  for (const key of keys.sort()) {
    const type = await redis.type(key);
    if (type === "hash") out[key] = await redis.hgetall(key);
    else if (type === "set") out[key] = (await redis.smembers(key)).sort();
    else if (type === "list") out[key] = await redis.lrange(key, 0, -1);
    else if (type === "zset") out[key] = await redis.zrange(key, 0, -1, "WITHSCORES");
    else if (type === "stream") out[key] = (await redis.xrange(key, "-", "+")).length;
    else if (type === "string") out[key] = await redis.get(key);
    else out[key] = type;
  }
  return out;
}

/**
 * A test app on its own redis-server (tests that FLUSHDB between runs, or count commands), with
 * no background jobs. close() stops the app and then the server; a failed start stops the
 * server before it throws, so no redis-server outlives the run.
 */
export async function startAppOnOwnRedis(opts: TestAppOptions): Promise<{ t: TestApp; close: () => Promise<void> }> {
  const redis = await startTestRedis();
  let t: TestApp;
  try {
    t = await startTestApp({ ...opts, redisUrl: redis.url, jobs: false });
  } catch (err) {
    await redis.stop();
    throw err;
  }
  return {
    t,
    close: async () => {
      try {
        await t.close();
      } finally {
        await redis.stop();
      }
    },
  };
}
