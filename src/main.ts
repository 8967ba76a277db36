import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { pino } from "pino";
import { startApp } from "./app.js";
import { ManualClock, SystemClock, type Clock } from "./clock.js";
import { ConfigError } from "./config/compile.js";
import { loadConfigFile } from "./config/load.js";
import { startEmbeddedRedis, type EmbeddedRedis } from "./embedded-redis.js";

/**
 * `node dist/main.js` (what `npm start` runs). Environment:
 *   PORT            HTTP port (default 3000)
 *   REDIS_URL       Redis to use; unset → an embedded redis-server with data in ./data/redis
 *   LAUREL_CONFIG   tenant file (default config/demo.yaml)
 *   LAUREL_CLOCK    "manual" enables POST /admin/v1/clock; default: the system clock
 *   LAUREL_DATA_DIR where the embedded redis-server keeps its AOF (default ./data/redis)
 *   LOG_LEVEL       pino level (default info)
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

async function main(): Promise<void> {
  const logger = pino({ level: process.env.LOG_LEVEL ?? "info" });
  const configPath = resolve(process.env.LAUREL_CONFIG ?? resolve(ROOT, "config/demo.yaml"));
  let tenants;
  try {
    tenants = loadConfigFile(configPath);
  } catch (err) {
    if (err instanceof ConfigError) {
      logger.fatal(`invalid configuration ${configPath}: ${err.message}`);
      process.exit(1);
    }
    throw err;
  }
  const clock: Clock = process.env.LAUREL_CLOCK === "manual" ? new ManualClock() : new SystemClock();

  const dataDir = resolve(process.env.LAUREL_DATA_DIR ?? resolve(ROOT, "data/redis"));
  let embedded: EmbeddedRedis | null = null;
  let redisUrl = process.env.REDIS_URL;
  if (!redisUrl) {
    try {
      embedded = await startEmbeddedRedis({ dir: dataDir });
    } catch (err) {
      logger.fatal((err as Error).message);
      process.exit(1);
    }
    redisUrl = embedded.url;
    logger.info({ redis: redisUrl, dir: dataDir }, "started embedded redis-server (AOF on)");
  }
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 3, enableAutoPipelining: process.env.LAUREL_AUTOPIPELINE === "1" });

  const port = Number(process.env.PORT ?? 3000);
  const app = await startApp({ tenants, redis, clock, logger, port });
  logger.info({ port: app.port, tenants: tenants.map((t) => t.id), clock: clock.manual ? "manual" : "system" }, "laurel listening");

  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "stopping");
    await app.close();
    await redis.quit().catch(() => undefined);
    await embedded?.stop();
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
