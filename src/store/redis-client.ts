import { Redis, type RedisOptions } from "ioredis";
// ioredis' own handler of a closed socket (no exports map: its built files are its API for this).
import { closeHandler } from "ioredis/built/redis/event_handler.js";
import { RedisConnection, createIORedisClient, type ConnectionOptions } from "bullmq";
import type { Logger } from "pino";
import { withPasswordFile } from "./redis-password.js";
import { redisRefusalOf } from "./redis-refusals.js";
import { SENTINEL_PASSWORD_FILE, sentinelAuthRefusal, sentinelPasswordSetting } from "./redis-sentinel.js";
import { clientCertificateRefusal, redisTlsFiles, tlsCertificateProblem } from "./redis-tls.js";
import { boundOfflineWait } from "./offline-wait.js";
import { RESENDS_ABANDONED, boundResendWait, resendWaitMs } from "./resend-wait.js";
import { isStreamGuard, keepStreamErrorsHeard } from "./stream-errors.js";
import { coalesceWrites } from "./write-coalescing.js";

/**
 * The Redis client of a Laurel process (service, worker, tests, the bench's baseline), so that
 * all of them talk to Redis the same way. Environment:
 *   LAUREL_COALESCE=off      one socket write per command (ioredis' default) instead of one per
 *                            turn of the event loop (write-coalescing.ts)
 *   LAUREL_AUTOPIPELINE=1    ioredis auto-pipelining (measured no better here: bench/README.md)
 *   LAUREL_REDIS_TLS_*       a rediss:// URL's client certificate and CA (redis-tls.ts)
 *   LAUREL_REDIS_PASSWORD_FILE  the password, from a file taken again when rotated (redis-password.ts)
 *   LAUREL_RESEND_WAIT       seconds a command on the wire at a dropped connection waits to be sent again (resend-wait.ts)
 */
export function createRedisClient(url: string | undefined, options: RedisOptions = {}, env: NodeJS.ProcessEnv = process.env): Redis {
  // A rediss:// URL alone gives ioredis `tls: true`; the files, when set, are its TLS options
  // (and the data nodes' through Sentinel: ioredis applies `tls` to them). The copies, the job
  // queues' (queueConnection) and duplicate()'s, take them from these options.
  const files = url?.startsWith("rediss://") ? redisTlsFiles(env) : {};
  const tls = Object.keys(files).length > 0 ? { tls: files } : {};
  // The password file's password is one object every copy of these options shares (the copies
  // below, BullMQ's), so that a rotation reaches them all.
  const auth = withPasswordFile(url, env);
  const settings: RedisOptions = { maxRetriesPerRequest: 3, enableAutoPipelining: env.LAUREL_AUTOPIPELINE === "1", reconnectOnError: reconnectWhenReadOnly, ...tls, ...auth.options, ...options };
  // Without a URL (Redis through sentinels alone: redis-sentinel.ts), the options say it all.
  const redis = auth.url === undefined ? new Redis(settings) : new Redis(auth.url, settings);
  keepStreamErrorsHeard(redis);
  return withClientHabits(redis, env);
}

/**
 * What is wrong with REDIS_URL when ioredis cannot read it (a port past 65535, a "%" not followed
 * by two hex digits, a character a URL may not hold), for checkEnvironmentOrExit's line: the
 * parser's reason, never the URL, which holds the password. Unchecked, the start failed on
 * Node's URL error, which carries the text it refused as its `input`, and the start's fatal line
 * (or check-config's print of the error) wrote REDIS_URL whole. Read by ioredis itself, on a
 * client that never connects (lazyConnect), so that what passes here is what the start reads.
 */
export function redisUrlProblems(env: NodeJS.ProcessEnv = process.env): string[] {
  const url = env.REDIS_URL;
  if (!url) return [];
  try {
    const client = new Redis(url, { lazyConnect: true });
    client.disconnect();
    // ioredis reads a URL of another scheme (http://, valkey://, a one-slash redis:/) as a Unix
    // socket path, the whole text after the scheme's colon: its userinfo, the password, became
    // the path that "waiting for Redis at ..." and "connect ENOENT ..." printed. Only a text
    // written as a path (or unix:///path, which can hold no userinfo) is one.
    if (client.options.path && !url.startsWith("/") && !/^unix:\/\/\//i.test(url)) {
      return ["REDIS_URL is not a redis:// or rediss:// URL (nor a Unix socket's path, /run/redis/redis.sock) and would be read as a socket path (the URL not shown: it may hold the password): write it redis://[user:password@]host:port[/db] (rediss:// for TLS)"];
    }
    return [];
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    return [`REDIS_URL cannot be read (${reason}; the URL not shown: it holds the password): write it redis://[user:password@]host:port[/db] (rediss:// for TLS), the port from 1 to 65535, reserved characters of the user and password percent-encoded`];
  }
}

/**
 * ioredis' reconnectOnError: the server this connection reached was demoted to a replica (a
 * failover) while the address in REDIS_URL may lead to the new primary by now (a managed
 * service's endpoint, a virtual IP, DNS). Without a new connection every write failed until the
 * process restarted. 1: reconnect, and fail the refused command (the request answers 503, and
 * the SDK retries it), rather than 2, send it again: on an address that still leads to a replica
 * that loops, connection after connection, for as long as the request waits. Commands sent
 * behind it on the old connection are sent again on the new one (ioredis' re-send of the
 * unanswered, which the event call handles: redis-script.ts MayHaveRun).
 */
function reconnectWhenReadOnly(err: Error): 1 | false {
  return redisRefusalOf(err)?.cause === "read-only" ? 1 : false;
}

/**
 * A second connection with the client's options and the same write coalescing, for work that
 * must not queue ahead of the event path's calls on one socket (the webhook consumer).
 */
export function duplicateClient(redis: Redis, env: NodeJS.ProcessEnv = process.env): Redis {
  return withClientHabits(quietDuplicate(redis), env);
}

/** `redis.duplicate()` with the client's logging listeners (ioredis copies options, not listeners). */
export function quietDuplicate(redis: Redis): Redis {
  const copy = redis.duplicate();
  keepStreamErrorsHeard(copy);
  for (const event of ["error", RESENDS_ABANDONED]) {
    for (const listener of redis.listeners(event)) if (!isStreamGuard(listener)) copy.on(event, listener as (...args: unknown[]) => void);
  }
  return copy;
}

/**
 * Connection errors go to the log, once per outage (at start too, before the first connection): without an "error" listener ioredis prints
 * every failed reconnect attempt to stderr, and with one that logs each, an outage writes a
 * line every retry. The first error after the connection was ready is a warning; the next
 * "ready" says it is back.
 */
export function logConnectionErrors(redis: Redis, logger: Logger, name = "redis"): Redis {
  let down = false;
  let everReady = false;
  redis.on("error", (err: Error) => {
    // Credentials refused, a certificate not trusted, or the client's refused, before the first
    // connection: the start says so itself, in one line (boot.ts waitForRedisOrExit), and exits;
    // "not reachable" would be wrong besides.
    if (down || (!everReady && (isAuthError(err) || tlsCertificateProblem(err) !== null || clientCertificateRefusal(err) !== null))) return;
    down = true;
    logger.warn({ err: err.message, connection: name }, "redis not reachable; retrying");
  });
  redis.on(RESENDS_ABANDONED, (failed: number, waitedMs: number) => {
    logger.warn(
      { connection: name, commands: failed, waitedMs },
      "commands on their way when the Redis connection dropped were failed (503) without a connection to send them again on within LAUREL_RESEND_WAIT; whether they took effect is unknown",
    );
  });
  // A sentinel refusing the password (ioredis says only "All sentinels are unreachable" on the
  // client, at first without why): said once until the connection is back. Before the first
  // connection the start says it (boot.ts waitForRedisOrExit).
  let sentinelRefusalSaid = false;
  redis.on("sentinelError", (err: Error) => {
    const refusal = sentinelAuthRefusal(err);
    if (refusal === null || sentinelRefusalSaid || !everReady) return;
    sentinelRefusalSaid = true;
    const setting = sentinelPasswordSetting(redis.options);
    const line =
      setting === null
        ? `sentinel ${refusal.sentinel} asks for a password (${refusal.code}): set ${SENTINEL_PASSWORD_FILE} or REDIS_SENTINEL_PASSWORD; retrying`
        : `sentinel ${refusal.sentinel} refused the password in ${setting} (${refusal.code}); retrying${setting === SENTINEL_PASSWORD_FILE ? ", the file read again at each refusal" : ""}`;
    logger.warn({ sentinel: refusal.sentinel, err: refusal.code, connection: name }, line);
  });
  redis.on("ready", () => {
    everReady = true;
    sentinelRefusalSaid = false;
    if (!down) return;
    down = false;
    logger.info({ connection: name }, "redis connection restored");
  });
  return redis;
}

/** NOAUTH (a password is required), WRONGPASS (the user or password is wrong), NOPERM (the user may not PING or INFO). */
export function isAuthError(err: unknown): err is Error {
  return err instanceof Error && /^(?:NOAUTH|WRONGPASS|NOPERM)\b/.test(err.message);
}

/** What every client of the event path's kind gets: write coalescing, and bounds on the waits for a connection. */
function withClientHabits(redis: Redis, env: NodeJS.ProcessEnv): Redis {
  if (env.LAUREL_COALESCE !== "off") coalesceWrites(redis);
  return boundOfflineWait(boundResendWait(redis, resendWaitMs(env)));
}

/**
 * BullMQ's connection options for the Redis a client talks to: its address (TCP host and port,
 * a Unix socket path, or the sentinels and the group they name the primary of), credentials,
 * database and TLS settings, its waits between attempts to connect, and its reconnect on a
 * read-only replica, so that the queues reach
 * the same server the same way (a rediss:// URL keeps its TLS, a socket path its socket, and
 * with sentinels the queues follow a failover as the event path does, over TLS to the sentinels
 * and the primary when the process's client uses it).
 */
export function queueConnection(redis: Redis): ConnectionOptions {
  hearQueueSocketErrors();
  const { host, port, path, username, password, db, tls, reconnectOnError, retryStrategy, sentinels, name, sentinelPassword, enableTLSForSentinelMode, sentinelTLS, Connector } = redis.options;
  // The client's own waits between attempts to connect (ioredis' default: 50 ms more each time,
  // at most 2 s), not BullMQ's (e^n s, at most 20 s): after Redis came back, the job workers
  // (streak expiry, time triggers, webhook retries) sat up to 20 s before they reconnected.
  const common = { username, password, db, reconnectOnError, retryStrategy: retryStrategy as ((times: number) => number) | undefined };
  if (sentinels && sentinels.length > 0) return { ...common, tls, sentinels, name, sentinelPassword, enableTLSForSentinelMode, sentinelTLS, Connector };
  return path ? { path, ...common } : { host, port, ...common, tls };
}

/**
 * BullMQ's Redis client, its scripts defined on the class's prototype, once for all its
 * clients, instead of on each client. BullMQ defines ~50 scripts on every client it makes
 * (RedisConnection.loadCommands; ioredis' defineCommand: a method and its Buffer twin each), and
 * ~100 own properties put each client in V8's dictionary mode. ioredis' methods are shared by
 * every client of the process, the event path's included (sendCommand, the reply handler): once
 * one receiver of their property loads was a dictionary-mode object, they were all generic loads,
 * for every client. That cost the metering read ~2k instructions (bench/read-cost.mjs: ioredis'
 * sendCommand 7.2k inclusive a read, 5.2k with these clients, 4.8k with no BullMQ client at all).
 * BullMQ asks a client for a script before it defines it, so a later client finds them all on the
 * prototype, and its pipelines in the shared scriptsSet (ioredis' Pipeline copies them from
 * there). The scripts are defined with no keyPrefix: BullMQ refuses a client with one.
 */
class QueueRedis extends Redis {
  /** A client as ioredis makes it, sharing the scripts. */
  static make(url: string | undefined, options: RedisOptions): QueueRedis {
    const redis = url === undefined ? new QueueRedis(options) : new QueueRedis(url, options);
    (redis as unknown as { scriptsSet: typeof queueScripts }).scriptsSet = queueScripts;
    return redis;
  }

  override defineCommand(name: string, definition: { lua: string; numberOfKeys?: number; readOnly?: boolean }): void {
    Redis.prototype.defineCommand.call(QueueRedis.prototype, name, definition);
  }

  /**
   * ioredis' disconnect(), and the client ended when it was waiting to connect again. There,
   * ioredis clears the wait's timer and closes nothing (there is no socket), so the client never
   * reaches "end" (redis/ioredis#1247), and BullMQ's Worker.close() waits for its blocking
   * client's "end" without a bound: a stop within the wait after a dropped connection (up to 20 s
   * with BullMQ's own reconnect delays) hung there, and the steps after it (the webhook consumer's
   * stop, its first attempts' grace) never ran. The close handler is what ioredis runs when a
   * socket closes; after a manual disconnect it ends the client and fails its queued commands.
   */
  override disconnect(reconnect = false): void {
    const waitingToReconnect = !reconnect && this.status === "reconnecting";
    super.disconnect(reconnect);
    if (!(waitingToReconnect && this.status === "reconnecting")) return;
    closeHandler(this)();
    // The commands on the wire at the drop wait apart to be sent again (prevCommandQueue; the
    // close handler fails them only while they share the command queue, until a connect): ended,
    // nothing would send them, nor settle their promises.
    const stranded = (this as unknown as { prevCommandQueue: { shift(): { command: { reject(err: Error): void } } | undefined } | null }).prevCommandQueue;
    (this as unknown as { prevCommandQueue: null }).prevCommandQueue = null;
    for (let item = stranded?.shift(); item !== undefined; item = stranded?.shift()) item.command.reject(new Error("Connection is closed."));
  }

  /** As ioredis' (a client of these options and the override's), a QueueRedis: BullMQ duplicates some of its clients. */
  override duplicate(override?: Partial<RedisOptions>): Redis {
    return QueueRedis.make(undefined, { ...this.options, ...override });
  }
}

/** What ioredis' defineCommand reads of its `this` besides (each client has its own, which shadow these). */
const queueScripts: Record<string, unknown> = {};
Object.defineProperty(QueueRedis.prototype, "options", { value: {}, writable: true, configurable: true });
Object.defineProperty(QueueRedis.prototype, "scriptsSet", { value: queueScripts, writable: true, configurable: true });

/**
 * BullMQ's own clients (its workers', queue events' and schedulers' connections, made from
 * queueConnection's options) made as BullMQ makes them, each socket's errors heard
 * (keepStreamErrorsHeard): a second error of one of their sockets, as a TLS client certificate
 * refused mid-run brings about, ended the process too. BullMQ's hook for this is process-wide
 * (RedisConnection.clientFactory); set by every queueConnection, which each process asks for
 * before its first queue.
 */
function hearQueueSocketErrors(): void {
  RedisConnection.clientFactory ??= (opts) => {
    const { url, ...rest } = opts as RedisOptions & { url?: string };
    const redis = QueueRedis.make(url, rest);
    keepStreamErrorsHeard(redis);
    return createIORedisClient(redis);
  };
}
