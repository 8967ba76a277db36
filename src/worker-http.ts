import uWS from "uWebSockets.js";
import type { Redis } from "ioredis";
import type { Logger } from "pino";
import { DEFAULT_HEALTH_TIMEOUT_MS, healthHandler } from "./api/health.js";
import { prometheusHandler } from "./api/prometheus.js";
import { SystemClock } from "./clock.js";
import type { CompiledTenant } from "./config/compiled.js";
import { assertNativeUws, listenedPort, listenOn } from "./http/listen.js";
import { Router } from "./http/router.js";
import type { Webhooks } from "./jobs/webhooks/index.js";

export interface WorkerHttpOptions {
  port: number;
  host?: string;
  redis: Redis;
  tenants: readonly CompiledTenant[];
  webhooks: Webhooks | null;
  logger: Logger;
  /**
   * How long /healthz and /metrics wait for Redis (src/api/health.ts).
   * @default 1000 (LAUREL_HEALTH_TIMEOUT)
   */
  healthTimeoutMs?: number;
}

export interface WorkerHttp {
  port: number;
  close(): void;
}

/**
 * What `node dist/worker.js` serves on LAUREL_WORKER_PORT: `GET /healthz` (Redis answering, as the
 * service's, for a probe that restarts a worker cut off from it) and `GET /metrics` (the service's
 * series as this process has them: the consumers' lag and the deliveries, its own CPU, memory and
 * event loop). Nothing else: the worker serves no API, and every other path is a 404.
 */
export async function startWorkerHttp(opts: WorkerHttpOptions): Promise<WorkerHttp> {
  assertNativeUws();
  const app = uWS.App();
  // No route takes a body.
  const router = new Router(app, { maxBodyBytes: 1024, logger: opts.logger });
  const healthTimeoutMs = opts.healthTimeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS;
  router.add("get", "/healthz", 0, healthHandler(opts.redis, new SystemClock(), healthTimeoutMs), { ownDeadline: true });
  router.add("get", "/metrics", 0, prometheusHandler(opts.redis, opts.tenants, opts.webhooks, router.stats, opts.logger, healthTimeoutMs), { ownDeadline: true });
  router.fallback();
  const socket = await listenOn(app, opts.host ?? "0.0.0.0", opts.port, false);
  return {
    port: listenedPort(socket),
    close() {
      uWS.us_listen_socket_close(socket);
      (app as unknown as { close?: () => void }).close?.();
      router.close();
    },
  };
}
