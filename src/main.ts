import "./v8-tuning.js";
import type { Logger } from "pino";
import { DEFAULT_DRAIN_MS, startApp } from "./app.js";
import { ListenError } from "./http/listen.js";
import { applyAwardIdSlots, CLOSE_TIMEOUT_MS, checkEnvironmentOrExit, dataDirectory, envMilliseconds, exitIfPortTaken, exitOnConfigError, exitOnSignalsWhileStarting, listenPort, loadTenantsOrExit, stopOnSignals, waitForRedisOrExit, warnFsyncNotApplied, runEntry } from "./boot.js";
import { ManualClock, SystemClock, type Clock } from "./clock.js";
import { startEmbeddedRedis, type EmbeddedRedis } from "./embedded-redis.js";
import { StreamWorker } from "./jobs/stream-worker.js";
import { watchRedisTlsFiles } from "./store/redis-tls-reload.js";
import { watchRedisPasswordFiles } from "./store/redis-password-reload.js";
import { createRedisClient, logConnectionErrors } from "./store/redis-client.js";
import { guardStateSlots } from "./store/slots-guard.js";
import { sentinelOptions, usesSentinels } from "./store/redis-sentinel.js";

/**
 * `node dist/main.js` (what `npm start` runs). Environment:
 *   PORT            HTTP port (default 3000)
 *   REDIS_URL       Redis to use; unset (and no REDIS_SENTINELS) → an embedded redis-server with data in ./data/redis
 *   REDIS_SENTINELS, REDIS_SENTINEL_NAME, REDIS_SENTINEL_PASSWORD (or LAUREL_REDIS_SENTINEL_PASSWORD_FILE): Redis through Sentinel (src/store/redis-sentinel.ts)
 *   LAUREL_REDIS_TLS_CERT, LAUREL_REDIS_TLS_KEY, LAUREL_REDIS_TLS_CA: a rediss:// REDIS_URL's client certificate and CA (src/store/redis-tls.ts)
 *   LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE: a file holding the passphrase of an encrypted LAUREL_REDIS_TLS_KEY (src/store/redis-tls.ts)
 *   LAUREL_REDIS_PASSWORD_FILE: a file holding the Redis password, taken again when rotated (src/store/redis-password.ts)
 *   LAUREL_CONFIG   tenant file (default config/demo.yaml)
 *   LAUREL_CLOCK    "manual" enables POST /admin/v1/clock; default: the system clock
 *   LAUREL_DATA_DIR where the embedded redis-server keeps its AOF (default ./data/redis)
 *   LAUREL_FSYNC    the embedded redis-server's AOF fsync: "everysec" (default) or "always"
 *   LAUREL_WORKER   "off": no stream worker in this process (run `node dist/worker.js` instead)
 *   LAUREL_DELIVERIES "off": this process queues webhook deliveries but does not send them
 *                   (`node dist/worker.js` processes do): the event path never shares its CPU with the sending
 *   LAUREL_COALESCE "off": one socket write per Redis command (src/store/write-coalescing.ts)
 *   LAUREL_LUA      "eval": scripts by EVALSHA instead of Redis Functions (FCALL, the default)
 *   LAUREL_AUTOPIPELINE "1": ioredis auto-pipelining for the plain commands of reads and jobs
 *   LAUREL_REUSE_PORT "1": share PORT with other processes that set it (SO_REUSEPORT)
 *   LAUREL_REDIS_WAIT seconds to wait at start for a REDIS_URL that does not answer yet (default 60)
 *   LAUREL_DRAIN    seconds a stop waits for the requests already taken to be answered (default 10)
 *   LAUREL_READ_TIMEOUT seconds a read waits for a stalled Redis before its 503 (default 2; 0: no bound)
 *   LAUREL_RESEND_WAIT seconds a call on the wire at a dropped Redis connection waits to be sent again before its 503 (default 60; 0: no bound)
 *   LAUREL_HEALTH_TIMEOUT seconds /healthz and /metrics wait for Redis before saying it is down (default 1)
 *   LAUREL_AWARD_IDS award ids remembered (a power of two, default 262144, 13 MB; 0: none)
 *   LOG_LEVEL       pino level (default info)
 */
async function main(logger: Logger): Promise<void> {
  checkEnvironmentOrExit(logger, process.env, { port: true });
  applyAwardIdSlots();
  const tenants = await loadTenantsOrExit(logger);
  const port = listenPort();
  const reusePort = process.env.LAUREL_REUSE_PORT === "1";
  await exitIfPortTaken(logger, port, reusePort);
  const clock: Clock = process.env.LAUREL_CLOCK === "manual" ? new ManualClock() : new SystemClock();

  const dataDir = dataDirectory();
  const fsync = process.env.LAUREL_FSYNC === "always" ? "always" : "everysec"; // checked by checkEnvironmentOrExit
  // A Ctrl-C from here until stopOnSignals takes over (below) exits at once, and stops an embedded
  // redis-server already spawned (in a session of its own, the Ctrl-C does not reach it).
  exitOnSignalsWhileStarting(logger);
  let embedded: EmbeddedRedis | null = null;
  // Set first thing in a stop: the embedded redis-server's exit is then part of the stop, not a
  // failure (it runs in a session of its own, so a Ctrl-C reaches the service alone, which stops
  // the server last; a signal sent to the server directly still ends it first).
  let stopping = false;
  let redisUrl = process.env.REDIS_URL || undefined;
  // Neither an address nor sentinels: the service runs its own redis-server.
  if (!redisUrl && !usesSentinels()) {
    try {
      // A redis-server that dies under the service (a crash, the OOM killer) takes its data with it
      // until restarted: the service says so and exits 1, for whatever restarts it (the AOF brings
      // every acknowledged event back), rather than answer 503 with nothing to bring Redis back.
      embedded = await startEmbeddedRedis({
        dir: dataDir,
        fsync,
        ownSession: true,
        // What Redis warns of while it runs (a slow disk holding back its AOF's fsync, a SHUTDOWN
        // someone sent it) reaches the service's log: its stdout was dropped.
        onLog: (line) => logger.warn({ redisLog: line }, "the embedded redis-server logged a warning"),
        onExit: ({ code, signal }) => {
          if (stopping) return;
          logger.fatal({ code, signal, dir: dataDir }, "the embedded redis-server exited; stopping (start Laurel again: its AOF brings the data back)");
          process.exit(1);
        },
      });
    } catch (err) {
      logger.fatal((err as Error).message);
      process.exit(1);
    }
    redisUrl = embedded.url;
    if (embedded.replacedOrphan !== null) {
      logger.warn({ redisPid: embedded.replacedOrphan, dir: dataDir }, "stopped the embedded redis-server an earlier Laurel left running on this data directory (that service was killed without stopping it)");
    }
    logger.info({ redis: redisUrl, dir: dataDir, fsync }, "started embedded redis-server (AOF on)");
  } else {
    warnFsyncNotApplied(logger);
  }
  const redis = logConnectionErrors(createRedisClient(redisUrl, sentinelOptions()), logger);
  // Renewed TLS files and rotated password files are taken without a restart (store/redis-tls-reload.ts,
  // store/redis-password-reload.ts): before the copies of the client are made, which take its listeners.
  const tlsWatch = watchRedisTlsFiles(logger);
  const passwordWatch = watchRedisPasswordFiles(logger, redis);
  await waitForRedisOrExit(redis, logger);

  const drainMs = envMilliseconds("LAUREL_DRAIN");
  const readTimeoutMs = envMilliseconds("LAUREL_READ_TIMEOUT");
  const healthTimeoutMs = envMilliseconds("LAUREL_HEALTH_TIMEOUT");
  // The Redis client, then the embedded server: the end of a failed start and of a stop.
  const cleanup = async (): Promise<void> => {
    await redis.quit().catch(() => undefined);
    await embedded?.stop();
  };
  const app = await startApp({ tenants, redis, clock, logger, port, reusePort, drainMs, readTimeoutMs, healthTimeoutMs, webhooks: { deliveryWorkers: process.env.LAUREL_DELIVERIES !== "off" } }).catch(async (err: unknown) => {
    // A port it cannot listen on: said in one line, not a stack.
    if (err instanceof ListenError) {
      logger.fatal(err.message);
      await cleanup();
      process.exit(1);
    }
    // A config the stored data cannot be read with (store/fixed-settings.ts): named, not a stack.
    return exitOnConfigError(logger, err, cleanup);
  });
  // Redis losing its data under the service: the state registry written back, or, when another
  // process registered other positions first, a fatal exit (store/slots-guard.ts) through the
  // failed start's path (the Redis client closed, the embedded server stopped).
  const slotsGuard = guardStateSlots({
    redis,
    stores: app.tenants.all.map((context) => context.store),
    logger,
    exit: () => {
      stopping = true;
      void cleanup().finally(() => process.exit(1));
    },
  });
  // The stream worker (daily buckets for the event summaries) runs here unless it runs alone.
  const worker = process.env.LAUREL_WORKER === "off" ? null : new StreamWorker({ redis, tenants, logger });
  worker?.start();
  // issue 6 (outbound events): begin
  // The webhook consumer goes with the stream worker; deliveries and the timeline run in every service process.
  if (worker) app.webhooks?.startConsumer();
  // issue 6: end

  // The drain's time, then CLOSE_TIMEOUT_MS for the connections (boot.ts). Before the line that
  // says the service listens: a signal sent on reading it finds the stop.
  stopOnSignals(
    logger,
    async () => {
      stopping = true;
      slotsGuard.stop();
      tlsWatch?.stop();
      passwordWatch?.stop();
      await app.close();
      await worker?.stop();
      await cleanup();
    },
    (drainMs ?? DEFAULT_DRAIN_MS) + CLOSE_TIMEOUT_MS,
  );
  logger.info({ port: app.port, tenants: tenants.map((t) => t.id), clock: clock.manual ? "manual" : "system" }, "laurel listening");
}

runEntry(main);
