import type { Redis } from "ioredis";
import type { Logger } from "pino";
import type { Clock } from "../clock.js";
import type { CompiledTenant } from "../config/compiled.js";
import type { Router } from "../http/router.js";
import type { Tenants } from "../tenants.js";
import { allAchievementsHandler, userAchievementsHandler } from "./achievements.js";
import { metricEventSummaryHandler, pointsEventSummaryHandler } from "./event-summary.js";
import { levelSummaryHandler, pointsSummaryHandler } from "./points-summary.js";
import type { Webhooks } from "../jobs/webhooks/index.js";
import { prometheusHandler } from "./prometheus.js";
import { lostStreaksBacklog, streakRankingsHandler, streaksListHandler, userStreakHandler } from "./streaks.js";
import { userMetricHandler, userMetricsHandler } from "./user-metrics.js";
import { wrappedHandler } from "./wrapped.js";

/**
 * The read endpoints of issue 4 (README, API reference) and the worker's lag (GET /metrics, whose
 * reads of Redis wait `healthTimeoutMs` at most: LAUREL_HEALTH_TIMEOUT).
 */
export function registerReadRoutes(router: Router, tenants: Tenants, clock: Clock, redis: Redis, configured: readonly CompiledTenant[], webhooks: Webhooks | null, logger: Logger, healthTimeoutMs: number): void {
  const backlog = lostStreaksBacklog(logger);
  router.add("get", "/v1/users/:id/metrics", 1, userMetricsHandler(tenants));
  router.add("get", "/v1/users/:id/metrics/:key", 2, userMetricHandler(tenants));
  router.add("get", "/v1/users/:id/metrics/:key/event-summary", 2, metricEventSummaryHandler(tenants));
  router.add("get", "/v1/users/:id/points/:key/event-summary", 2, pointsEventSummaryHandler(tenants));
  router.add("get", "/v1/users/:id/achievements", 1, userAchievementsHandler(tenants));
  router.add("get", "/v1/achievements", 0, allAchievementsHandler(tenants));
  router.add("get", "/v1/users/:id/streak", 1, userStreakHandler(tenants, clock, backlog));
  router.add("get", "/v1/streaks", 0, streaksListHandler(tenants, clock));
  router.add("get", "/v1/streaks/rankings", 0, streakRankingsHandler(tenants, clock, backlog));
  router.add("get", "/v1/points/:key/summary", 1, pointsSummaryHandler(tenants));
  router.add("get", "/v1/points/:key/level-summary", 1, levelSummaryHandler(tenants));
  router.add("get", "/v1/users/:id/wrapped", 1, wrappedHandler(tenants, clock));
  // Its own bound on Redis (healthTimeoutMs): answered without the Redis series rather than 503.
  router.add("get", "/metrics", 0, prometheusHandler(redis, configured, webhooks, router.stats, logger, healthTimeoutMs), { ownDeadline: true });
}
