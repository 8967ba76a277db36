import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Logger } from "pino";
import { ConfigError } from "./config/compile.js";
import type { CompiledTenant } from "./config/compiled.js";
import { loadConfigFile } from "./config/load.js";

/** The repository root (dist/.. or src/..), where config/ and data/ live by default. */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** LAUREL_CONFIG (default config/demo.yaml), or exit 1 with the bad field named (README: The tenant file). */
export function loadTenantsOrExit(logger: Logger): CompiledTenant[] {
  const configPath = resolve(process.env.LAUREL_CONFIG ?? resolve(ROOT, "config/demo.yaml"));
  try {
    return loadConfigFile(configPath);
  } catch (err) {
    if (err instanceof ConfigError) {
      logger.fatal(`invalid configuration ${configPath}: ${err.message}`);
      process.exit(1);
    }
    throw err;
  }
}

/** On SIGINT or SIGTERM (once): log, run `close`, exit 0. */
export function stopOnSignals(logger: Logger, close: () => Promise<void>): void {
  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "stopping");
    await close();
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
}
