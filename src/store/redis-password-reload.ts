import type { Redis } from "ioredis";
import type { Logger } from "pino";
import { watchFiles, type FilesWatch } from "../file-watch.js";
import { readPasswordFile, type RedisPassword } from "./password-file.js";
import { redisPassword } from "./redis-password.js";
import { sentinelAuthRefusal, sentinelPassword } from "./redis-sentinel.js";

/**
 * Rotated password files taken without a restart: LAUREL_REDIS_PASSWORD_FILE (the data nodes')
 * and LAUREL_REDIS_SENTINEL_PASSWORD_FILE (the sentinels' own). Connections already open stay
 * authenticated (Redis does not close them when a password changes); every new one (a reconnect,
 * a job queue's, one through a sentinel after a failover, each question to a sentinel) sends the
 * password the file holds then (password-file.ts RedisPassword). Before, a rotation took a
 * restart with a new REDIS_URL (or REDIS_SENTINEL_PASSWORD), and until then every reconnect was
 * refused (WRONGPASS).
 *
 * A file is read again when it changes (file-watch.ts: its directory watched, and a check every
 * minute, as the TLS files are), and at once when its password is refused: by Redis, to a
 * connection of the client (WRONGPASS), or by a sentinel the client asks for the primary (its
 * "sentinelError"). A rotation where the server changed first is then seen before the next
 * reconnect, even where the file system sends no notification, and a start during one takes the
 * new file as soon as it is written (boot.ts waitForRedisOrExit). A file that cannot be used
 * (empty: a write half done) is not taken, said once, and the password in use is kept until the
 * file passes.
 */

/** Reads the file into `password` when it changed and passes, saying so (never the password). */
export function passwordFileCheck(password: RedisPassword, logger: Logger): () => void {
  const { variable, whose } = password.file;
  // The last refusal said, so that it is said once, not at every check.
  let refused: string | null = null;
  return () => {
    const read = readPasswordFile(password.file, password.path);
    if ("problem" in read) {
      if (read.problem !== refused) logger.warn({ problem: read.problem }, `${variable} changed but cannot be used; new connections keep sending the password read before`);
      refused = read.problem;
      return;
    }
    refused = null;
    if (password.take(read.text)) logger.info({ file: password.path }, `read the new ${whose} from ${variable}: new connections send it`);
  };
}

/**
 * Runs `check` when `redis` emits `event` with an error `refused` says is its password refused,
 * ioredis emitting it before it schedules the next attempt, so that the attempt sends what the
 * file holds now. Copies of the client made after (duplicateClient) take this listener with the
 * others; the job queues' connections share the password itself (password-file.ts).
 */
function rereadOn(redis: Redis, event: "error" | "sentinelError", refused: (err: Error) => boolean, check: () => void): () => void {
  const onError = (err: Error): void => {
    if (refused(err)) check();
  };
  redis.on(event, onError);
  return () => redis.removeListener(event, onError);
}

/** Runs `check` when a connection of `redis` is refused its password (WRONGPASS, the refused AUTH's error). */
export function rereadOnRefusal(redis: Redis, check: () => void): () => void {
  return rereadOn(redis, "error", (err) => err.message.startsWith("WRONGPASS"), check);
}

/**
 * Runs `check` when a sentinel refuses the password of a connection `redis` opens to ask it for
 * the primary: ioredis' SentinelConnector emits it on the client as "sentinelError" and asks the
 * next sentinel, then all of them again, each with a new connection.
 */
export function rereadOnSentinelRefusal(redis: Redis, check: () => void): () => void {
  return rereadOn(redis, "sentinelError", (err) => sentinelAuthRefusal(err) !== null, check);
}

/** Starts taking `password`'s file again when it changes or when `rereadOn` sees it refused. */
function watchPasswordFile(password: RedisPassword, logger: Logger, redis: Redis, reread: (redis: Redis, check: () => void) => () => void): FilesWatch {
  const check = passwordFileCheck(password, logger);
  const stopRereading = reread(redis, check);
  const watch = watchFiles([password.path], check, logger, password.file.variable);
  return {
    check,
    stop() {
      stopRereading();
      watch.stop();
    },
  };
}

/**
 * Starts taking the process's password files (LAUREL_REDIS_PASSWORD_FILE,
 * LAUREL_REDIS_SENTINEL_PASSWORD_FILE) again when they change or are refused; null without either.
 */
export function watchRedisPasswordFiles(logger: Logger, redis: Redis, env: NodeJS.ProcessEnv = process.env): FilesWatch | null {
  const data = redisPassword(env);
  const sentinels = sentinelPassword(env);
  const watches = [data && watchPasswordFile(data, logger, redis, rereadOnRefusal), sentinels && watchPasswordFile(sentinels, logger, redis, rereadOnSentinelRefusal)].filter((watch): watch is FilesWatch => watch !== null);
  if (watches.length === 0) return null;
  return {
    check: () => watches.forEach((watch) => watch.check()),
    stop: () => watches.forEach((watch) => watch.stop()),
  };
}
