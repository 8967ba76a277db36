import type { Redis } from "ioredis";
import type { Logger } from "pino";
import { watchFiles, type FilesWatch } from "../file-watch.js";
import { PASSWORD_FILE, readPasswordFile, redisPassword, type RedisPassword } from "./redis-password.js";

/**
 * A rotated LAUREL_REDIS_PASSWORD_FILE taken without a restart. Connections already open stay
 * authenticated (Redis does not close them when a password changes); every new one (a
 * reconnect, a job queue's, one through a sentinel after a failover) sends the password the file
 * holds then (redis-password.ts RedisPassword). Before, a rotation took a restart with a new
 * REDIS_URL, and until then every reconnect was refused (WRONGPASS).
 *
 * The file is read again when it changes (file-watch.ts: its directory watched, and a check
 * every minute, as the TLS files are), and at once when Redis refuses a connection's password
 * (WRONGPASS): a rotation where the server changed first, seen before the next reconnect even
 * where the file system sends no notification. A file that cannot be used (empty: a write half
 * done) is not taken, said once, and the password in use is kept until the file passes.
 */

/** Reads the file into `password` when it changed and passes, saying so (never the password). */
export function passwordFileCheck(password: RedisPassword, logger: Logger): () => void {
  // The last refusal said, so that it is said once, not at every check.
  let refused: string | null = null;
  return () => {
    const read = readPasswordFile(password.path);
    if ("problem" in read) {
      if (read.problem !== refused) logger.warn({ problem: read.problem }, `${PASSWORD_FILE} changed but cannot be used; new connections keep sending the password read before`);
      refused = read.problem;
      return;
    }
    refused = null;
    if (password.take(read.text)) logger.info({ file: password.path }, `read the new Redis password from ${PASSWORD_FILE}: new connections send it`);
  };
}

/**
 * Runs `check` when a connection of `redis` is refused its password. ioredis emits the refused
 * AUTH's error (WRONGPASS) before it schedules the reconnect, so the reconnect sends what the
 * file holds now. Copies of the client made after (duplicateClient) take this listener with the
 * others; the job queues' connections share the password itself (redis-password.ts).
 */
export function rereadOnRefusal(redis: Redis, check: () => void): () => void {
  const onError = (err: Error): void => {
    if (err.message.startsWith("WRONGPASS")) check();
  };
  redis.on("error", onError);
  return () => redis.removeListener("error", onError);
}

/** Starts taking the process's LAUREL_REDIS_PASSWORD_FILE again when it changes or is refused; null without it. */
export function watchRedisPasswordFile(logger: Logger, redis: Redis, env: NodeJS.ProcessEnv = process.env): FilesWatch | null {
  const password = redisPassword(env);
  if (password === null) return null;
  const check = passwordFileCheck(password, logger);
  const stopRereading = rereadOnRefusal(redis, check);
  const watch = watchFiles([password.path], check, logger, PASSWORD_FILE);
  return {
    check,
    stop() {
      stopRereading();
      watch.stop();
    },
  };
}
