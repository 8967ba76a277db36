import "./v8-tuning.js";
import type { Logger } from "pino";
import {
  checkEnvironmentOrExit,
  envMilliseconds,
  exitOnConfigError,
  exitOnSignalsWhileStarting,
  loadTenantsOrExit,
  stopOnSignals,
  waitForRedisOrExit,
  warnFsyncNotApplied,
  warnManualClockNotApplied,
  runEntry,
  workerPort,
} from "./boot.js";
import { ListenError } from "./http/listen.js";
import { startWorkerHttp, type WorkerHttp } from "./worker-http.js";
import { checkFixedSettings } from "./store/fixed-settings.js";
import { StreamWorker } from "./jobs/stream-worker.js";
import { watchRedisTlsFiles } from "./store/redis-tls-reload.js";
import { watchRedisPasswordFiles } from "./store/redis-password-reload.js";
import { createRedisClient, logConnectionErrors, queueConnection } from "./store/redis-client.js";
import { sentinelOptions, usesSentinels } from "./store/redis-sentinel.js";
import { guardStateSlots } from "./store/slots-guard.js";
// issue 6 (outbound events): begin
import { SystemClock } from "./clock.js";
import { Webhooks } from "./jobs/webhooks/index.js";
import { TenantStore } from "./store/tenant-store.js";
// issue 6: end

/**
 * `node dist/worker.js`: the stream worker as its own process (src/jobs/stream-worker.ts),
 * for when the service runs with LAUREL_WORKER=off or several workers share the streams (each
 * script call applies the next records after the shard's watermark, atomically, so they never
 * count twice). It also runs the
 * outbound events (src/jobs/webhooks): their consumer group, deliveries and timeline. Environment:
 *   REDIS_URL       the service's Redis (required, or REDIS_SENTINELS: the embedded Redis belongs to the service)
 *   REDIS_SENTINELS, REDIS_SENTINEL_NAME, REDIS_SENTINEL_PASSWORD (or LAUREL_REDIS_SENTINEL_PASSWORD_FILE): Redis through Sentinel (src/store/redis-sentinel.ts)
 *   LAUREL_REDIS_TLS_CERT, LAUREL_REDIS_TLS_KEY, LAUREL_REDIS_TLS_CA: a rediss:// REDIS_URL's client certificate and CA (src/store/redis-tls.ts)
 *   LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE: a file holding the passphrase of an encrypted LAUREL_REDIS_TLS_KEY (src/store/redis-tls.ts)
 *   LAUREL_REDIS_PASSWORD_FILE: a file holding the Redis password, taken again when rotated (src/store/redis-password.ts)
 *   LAUREL_CONFIG   the same tenant file as the service (default config/demo.yaml)
 *   LAUREL_REDIS_WAIT seconds to wait at start for Redis to answer (default 60)
 *   LAUREL_RESEND_WAIT seconds a call on the wire at a dropped Redis connection waits to be sent again (default 60; src/store/resend-wait.ts)
 *   LAUREL_WORKER_PORT serve GET /healthz and GET /metrics on this port (unset: no HTTP; src/worker-http.ts)
 *   LAUREL_HEALTH_TIMEOUT seconds those two wait for Redis before saying it is down (default 1)
 *   LOG_LEVEL       pino level (default info)
 */
async function main(logger: Logger): Promise<void> {
  checkEnvironmentOrExit(logger);
  const tenants = await loadTenantsOrExit(logger);
  const url = process.env.REDIS_URL || undefined;
  if (!url && !usesSentinels()) {
    logger.fatal("REDIS_URL (or REDIS_SENTINELS) is required: the worker works on the service's Redis");
    process.exit(1);
  }
  warnFsyncNotApplied(logger);
  warnManualClockNotApplied(logger);
  // A stop signal during the start (waiting for Redis, the webhooks' start) exits at once.
  exitOnSignalsWhileStarting(logger);
  const redis = logConnectionErrors(createRedisClient(url, sentinelOptions()), logger);
  // Renewed TLS files and rotated password files are taken without a restart (store/redis-tls-reload.ts,
  // store/redis-password-reload.ts): before the copies of the client are made, which take its listeners.
  const tlsWatch = watchRedisTlsFiles(logger);
  const passwordWatch = watchRedisPasswordFiles(logger, redis);
  await waitForRedisOrExit(redis, logger);
  // The same refusal as the service's (store/fixed-settings.ts): a worker reading the streams by
  // another shard count would leave shards unread.
  for (const [index, tenant] of tenants.entries()) {
    await checkFixedSettings(redis, tenant, index).catch((err: unknown) => exitOnConfigError(logger, err));
  }
  // issue 6 (outbound events): begin
  // The webhook consumer, deliveries and timeline run here too (the queues share the work with the service's).
  const contexts = await Promise.all(tenants.map(async (tenant) => ({ tenant, store: await TenantStore.open(redis, tenant) })));
  const webhooks = await Webhooks.start({ redis, connection: queueConnection(redis), contexts, clock: new SystemClock(), logger });
  // issue 6: end
  // The state registry written back after Redis lost its data, or a fatal exit on a conflict
  // (store/slots-guard.ts): the webhook payloads are read by these stores' positions.
  const slotsGuard = guardStateSlots({
    redis,
    stores: contexts.map((context) => context.store),
    logger,
    exit: () => void redis.quit().catch(() => undefined).finally(() => process.exit(1)),
  });
  // Its probe and scrape port, before any record is worked on: a port it cannot take stops the start.
  const port = workerPort();
  let http: WorkerHttp | null = null;
  if (port !== null) {
    http = await startWorkerHttp({ port, redis, tenants, webhooks, logger, healthTimeoutMs: envMilliseconds("LAUREL_HEALTH_TIMEOUT") }).catch(async (err: unknown) => {
      if (!(err instanceof ListenError)) throw err;
      logger.fatal(`cannot listen on LAUREL_WORKER_PORT ${port} (is the port taken?)`);
      slotsGuard.stop();
      await webhooks.close();
      await redis.quit().catch(() => undefined);
      process.exit(1);
    });
  }
  const worker = new StreamWorker({ redis, tenants, logger });
  // Everything is up: the stop takes over from the start's exit, before the stream worker starts,
  // so that a signal sent once its work shows finds the stop (not Node's default, which ended the
  // process unstopped).
  stopOnSignals(logger, async () => {
    http?.close();
    slotsGuard.stop();
    tlsWatch?.stop();
    passwordWatch?.stop();
    await worker.stop();
    await webhooks.close();
    await redis.quit().catch(() => undefined);
  });
  worker.start();
  webhooks.startConsumer(); // issue 6 (outbound events)
  logger.info({ tenants: tenants.map((t) => t.id), ...(http ? { port: http.port } : {}) }, "laurel stream worker running");
}

runEntry(main);
