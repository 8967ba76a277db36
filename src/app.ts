import uWS from "uWebSockets.js";
import type { Redis } from "ioredis";
import { queueConnection } from "./store/redis-client.js";
import { warnIfRedisEvicts, warnIfRedisForgets } from "./store/durability-check.js";
import { LogThrottle } from "./log-throttle.js";
import type { Logger } from "pino";
import type { Clock } from "./clock.js";
import type { CompiledTenant } from "./config/compiled.js";
import { getClockHandler, setClockHandler } from "./api/admin-clock.js";
import { recordEventHandler } from "./api/events.js";
import { DEFAULT_HEALTH_TIMEOUT_MS, healthHandler } from "./api/health.js";
import { grantFreezesHandler, restoreStreaksHandler } from "./api/admin-streaks.js";
import { BATCH_BODY_FACTOR, batchEventsHandler } from "./api/batch-events.js";
import { createBoostHandler, endBoostHandler, globalBoostsHandler, listUserBoostsHandler, userBoostsHandler } from "./api/boosts.js";
import { completeAchievementHandler } from "./api/complete.js";
import { getLeaderboardHandler, listLeaderboardsHandler, userLeaderboardHandler } from "./api/leaderboards.js";
import { levelsHandler, pointsSystemHandler, userPointsHandler } from "./api/points.js";
import {
  createUserHandler,
  getPreferencesHandler,
  getUserHandler,
  identifyUserHandler,
  patchPreferencesHandler,
  updateUserHandler,
} from "./api/users.js";
import { ManualClock } from "./clock.js";
import { TimeTriggers } from "./jobs/time-triggers.js";
import { StreakExpiry } from "./jobs/streak-expiry.js";
import { RunRetention } from "./jobs/run-retention.js";
import { Router } from "./http/router.js";
import { assertNativeUws, listenedPort, listenOn } from "./http/listen.js";
// issue 4 (read endpoints, stream worker lag): begin
import { registerReadRoutes } from "./api/read-routes.js";
// issue 4: end
import { Tenants } from "./tenants.js";
// issue 6 (outbound events): begin
import { registerWebhookRoutes } from "./api/webhooks.js";
import { Webhooks, type WebhookStartOptions } from "./jobs/webhooks/index.js";
// issue 6: end

export interface AppOptions {
  tenants: CompiledTenant[];
  redis: Redis;
  clock: Clock;
  logger: Logger;
  host?: string;
  /** 0 picks a free port. */
  port: number;
  /**
   * Share the port with other processes listening on it (SO_REUSEPORT: the kernel spreads the
   * connections among them). Off by default: a second process started on a taken port (an old
   * instance left running, another config) fails to start instead of silently taking half the
   * traffic, which uWS would otherwise let it do.
   */
  reusePort?: boolean;
  maxBodyBytes?: number;
  /** Run the background workers (time triggers) in this process; default true. */
  jobs?: boolean;
  /** How often leaderboard thresholds are recomputed (wall-clock ms); 0: only when the manual clock moves. */
  thresholdRefreshMs?: number;
  /**
   * How long close() waits for the requests already taken to be answered (Router.drain).
   * @default 10000
   */
  drainMs?: number;
  /**
   * How long a read (GET) waits for Redis before it is answered 503 (src/http/read-deadline.ts);
   * 0: for as long as Redis takes. Writes always wait.
   * @default 2000 (LAUREL_READ_TIMEOUT)
   */
  readTimeoutMs?: number;
  /**
   * How long /healthz waits for Redis's PING, and /metrics for its reads of Redis, before
   * answering "down" (src/api/health.ts). Tests set a large one: a loaded box must not make them
   * see a Redis that answers as down.
   * @default 1000 (LAUREL_HEALTH_TIMEOUT)
   */
  healthTimeoutMs?: number;
  /**
   * How long close() keeps the connections open, within drainMs, though no request is in flight
   * (Router.drain): for connections accepted just before the listen socket closed, whose first
   * request has not arrived yet. Tests' in-process apps set 0.
   * @default 1000
   */
  lingerMs?: number;
  // issue 6 (outbound events): begin
  /** Webhook delivery and timeline settings (tests shorten the backoff and the locks). */
  webhooks?: WebhookStartOptions["options"];
  // issue 6: end
}

export interface RunningApp {
  port: number;
  tenants: Tenants;
  // issue 6 (outbound events): begin
  /** Outbound events (null with jobs: false). The stream consumer's loop is started by main.ts. */
  webhooks: Webhooks | null;
  // issue 6: end
  close(): Promise<void>;
}

export const DEFAULT_MAX_BODY_BYTES = 64 * 1024;

/** LAUREL_READ_TIMEOUT's default: how long a read waits for a stalled Redis before its 503. */
export const DEFAULT_READ_TIMEOUT_MS = 2_000;

/** LAUREL_DRAIN's default: how long a stop waits for the requests already taken to be answered. */
export const DEFAULT_DRAIN_MS = 10_000;

/**
 * How long a stop keeps its connections at least (AppOptions.lingerMs). Without it, a stop with
 * nothing in flight closed every connection at once, and a client whose request was already on
 * its way (a kept-alive connection, or one accepted just before the listen socket closed) got a
 * reset. Clients on kept-alive connections (fetch, as the official SDK) lost 22-37 requests a
 * stop under load without it, none with it (`node bench/handover.mjs`, bench/README.md "The
 * forty-first stop").
 */
export const DEFAULT_LINGER_MS = 1_000;

/** The HTTP service: every route of the API on one uWS app. */
export async function startApp(opts: AppOptions): Promise<RunningApp> {
  assertNativeUws();
  await Promise.all([warnIfRedisEvicts(opts.redis, opts.logger), warnIfRedisForgets(opts.redis, opts.logger)]);
  const tenants = await Tenants.create(opts.redis, opts.tenants, opts.clock.now());
  const connection = queueConnection(opts.redis);
  // issue 6 (outbound events): begin
  // First: it creates the webhook groups (and moves an earlier version's records) before anything here writes.
  const webhooks =
    opts.jobs === false
      ? null
      : await Webhooks.start({ redis: opts.redis, connection, contexts: tenants.all, clock: opts.clock, logger: opts.logger, options: opts.webhooks });
  // issue 6: end
  const jobOptions = { redis: opts.redis, connection, tenants, clock: opts.clock, logger: opts.logger };
  const timeTriggers = opts.jobs === false ? null : await TimeTriggers.start(jobOptions);
  if (timeTriggers && opts.clock instanceof ManualClock) opts.clock.onChange(() => timeTriggers.runAll());
  const streakExpiry = opts.jobs === false ? null : await StreakExpiry.start(jobOptions);
  if (streakExpiry && opts.clock instanceof ManualClock) opts.clock.onChange(() => streakExpiry.runAll());
  const runRetention = opts.jobs === false ? null : await RunRetention.start(jobOptions);
  if (runRetention && opts.clock instanceof ManualClock) opts.clock.onChange(() => runRetention.runAll());
  const refreshThresholds = async (): Promise<void> => {
    for (const { store } of tenants.all) await store.thresholds.refresh(opts.clock.now(), () => opts.clock.highest());
  };
  await refreshThresholds();
  if (opts.clock instanceof ManualClock) opts.clock.onChange(refreshThresholds);
  const refreshEvery = opts.thresholdRefreshMs ?? 1000;
  // Fails every second while Redis is down: logged once per 30 s.
  const refreshFailures = new LogThrottle();
  const refreshTimer =
    refreshEvery > 0 && tenants.all.some((c) => c.tenant.leaderboards.length > 0)
      ? setInterval(() => refreshThresholds().catch((err) => refreshFailures.run((unlogged) => opts.logger.error({ err, unlogged }, "threshold refresh failed"))), refreshEvery)
      : null;
  refreshTimer?.unref();
  // issue 6 (outbound events): begin
  // After the time triggers: what they paid (level changes) is delivered too.
  if (webhooks && opts.clock instanceof ManualClock) opts.clock.onChange(() => webhooks.runDue());
  // issue 6: end
  const app = uWS.App();
  const router = new Router(app, { maxBodyBytes: opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES, logger: opts.logger, readTimeoutMs: opts.readTimeoutMs ?? DEFAULT_READ_TIMEOUT_MS });

  const recordEvent = recordEventHandler(tenants, opts.clock, opts.logger);
  router.add("post", "/v1/metrics/:key/event", 1, recordEvent);
  router.add("post", "/api/metrics/:key/event", 1, recordEvent);
  router.add("get", "/v1/users/:id/points/:key", 2, userPointsHandler(tenants));
  router.add("get", "/v1/points/:key", 1, pointsSystemHandler(tenants));
  router.add("get", "/v1/points/:key/levels", 1, levelsHandler(tenants));
  router.add("get", "/v1/points/:key/boosts", 1, globalBoostsHandler(tenants, opts.clock));
  router.add("get", "/v1/users/:id/points/:key/boosts", 2, userBoostsHandler(tenants, opts.clock));
  router.add("post", "/v1/users", 0, createUserHandler(tenants, opts.clock));
  router.add("get", "/v1/users/:id", 1, getUserHandler(tenants));
  router.add("put", "/v1/users/:id", 1, identifyUserHandler(tenants, opts.clock));
  router.add("patch", "/v1/users/:id", 1, updateUserHandler(tenants, opts.clock));
  router.add("get", "/v1/users/:id/preferences", 1, getPreferencesHandler(tenants));
  router.add("patch", "/v1/users/:id/preferences", 1, patchPreferencesHandler(tenants, opts.clock));
  router.add("post", "/v1/achievements/:key/complete", 1, completeAchievementHandler(tenants, opts.clock, opts.logger));
  router.add("post", "/admin/v1/points/:key/boosts", 1, createBoostHandler(tenants, opts.clock));
  router.add("get", "/admin/v1/points/:key/boosts", 1, listUserBoostsHandler(tenants, opts.clock));
  router.add("del", "/admin/v1/points/:key/boosts/:id", 2, endBoostHandler(tenants, opts.clock));
  // Failures inside a batch (its events, its users) logged as the router logs a request's.
  const logFailure: Router["logFailure"] = (err, answer, fields, message) => router.logFailure(err, answer, fields, message);
  router.add("post", "/admin/v1/metrics/events", 0, batchEventsHandler(tenants, opts.clock, opts.logger, logFailure), {
    maxBodyBytes: BATCH_BODY_FACTOR * (opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES),
  });
  router.add("post", "/admin/v1/streaks/freezes", 0, grantFreezesHandler(tenants, opts.clock, logFailure));
  router.add("post", "/admin/v1/streaks/restore", 0, restoreStreaksHandler(tenants, opts.clock, logFailure));
  router.add("get", "/v1/leaderboards", 0, listLeaderboardsHandler(tenants, opts.clock));
  router.add("get", "/v1/leaderboards/:key", 1, getLeaderboardHandler(tenants, opts.clock));
  router.add("get", "/v1/users/:id/leaderboards/:key", 2, userLeaderboardHandler(tenants, opts.clock));
  // Only a manual clock has these paths: otherwise any request to them is the plain 404 of a
  // path that does not exist (before its body or content type is looked at).
  if (opts.clock instanceof ManualClock) {
    router.add("post", "/admin/v1/clock", 0, setClockHandler(tenants, opts.clock));
    router.add("get", "/admin/v1/clock", 0, getClockHandler(tenants, opts.clock));
  }
  // Its own bound (LAUREL_HEALTH_TIMEOUT), and its own body for a Redis that does not answer.
  const healthTimeoutMs = opts.healthTimeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS;
  router.add("get", "/healthz", 0, healthHandler(opts.redis, opts.clock, healthTimeoutMs), { ownDeadline: true });
  // issue 4 (read endpoints, stream worker lag): begin
  registerReadRoutes(router, tenants, opts.clock, opts.redis, opts.tenants, webhooks, opts.logger, healthTimeoutMs);
  // issue 4: end
  // issue 6 (outbound events): begin
  registerWebhookRoutes(router, tenants, webhooks);
  // issue 6: end
  router.fallback();

  const listenSocket = await listenOn(app, opts.host ?? "0.0.0.0", opts.port, opts.reusePort ?? false);
  const port = listenedPort(listenSocket);
  return {
    port,
    tenants,
    webhooks,
    async close() {
      // No new connections; then the requests already taken, and those of connections accepted
      // just before, are answered before the connections close (Router.drain), up to drainMs.
      uWS.us_listen_socket_close(listenSocket);
      const drainMs = opts.drainMs ?? DEFAULT_DRAIN_MS;
      const unanswered = await router.drain(drainMs, opts.lingerMs ?? DEFAULT_LINGER_MS);
      if (unanswered > 0) opts.logger.warn({ unanswered }, `stopping with requests still unanswered after ${drainMs} ms`);
      // Present at runtime though missing from this build's types (STACK.md §2): closes open connections too.
      (app as unknown as { close?: () => void }).close?.();
      if (refreshTimer) clearInterval(refreshTimer);
      router.close();
      await timeTriggers?.close();
      await streakExpiry?.close();
      await runRetention?.close();
      await webhooks?.close();
    },
  };
}
