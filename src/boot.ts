import { createServer } from "node:net";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Redis } from "ioredis";
import { pino, type Logger } from "pino";
import { MAX_HEALTH_TIMEOUT_MS } from "./api/health.js";
import { ConfigError } from "./config/compile.js";
import type { CompiledTenant } from "./config/compiled.js";
import { loadConfigFile } from "./config/load.js";
import { answeredWithin } from "./deadline.js";
import { isAwardIdSlots, MAX_AWARD_ID_SLOTS, setAwardIdSlots } from "./domain/award-ids.js";
import { redactCredentials } from "./redact.js";
import { redisUrlProblems } from "./store/redis-client.js";
import { redisPasswordProblems } from "./store/redis-password.js";
import { watchFirstConnection } from "./store/redis-first-connection.js";
import { noPermission, redisRefusalOf } from "./store/redis-refusals.js";
import { redisAddress, sentinelProblems } from "./store/redis-sentinel.js";
import { redisTlsProblems } from "./store/redis-tls.js";

/** The repository root (dist/.. or src/..), where config/ and data/ live by default. */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** The tenant file: LAUREL_CONFIG, default config/demo.yaml. */
// `||`, not `??`: an empty variable counts as unset (README), where "" would resolve to the
// working directory (an AOF written there, or a directory read as the tenant file).
export const configPath = (env: NodeJS.ProcessEnv = process.env): string => resolve(env.LAUREL_CONFIG || resolve(ROOT, "config/demo.yaml"));

/** LAUREL_DATA_DIR: where the embedded redis-server keeps its AOF, default data/redis in the project. */
export const dataDirectory = (env: NodeJS.ProcessEnv = process.env): string => resolve(env.LAUREL_DATA_DIR || resolve(ROOT, "data/redis"));

/**
 * Exit 1 naming the tenant file and the bad field when `err` is a ConfigError: a file that does
 * not validate, or one the stored data cannot be read with (store/fixed-settings.ts). Anything
 * else is thrown on. `cleanup` runs first (the service stops its embedded Redis).
 */
export async function exitOnConfigError(logger: Logger, err: unknown, cleanup: () => Promise<void> = async () => undefined): Promise<never> {
  if (!(err instanceof ConfigError)) throw err;
  logger.fatal(`invalid configuration ${configPath()}: ${err.message}`);
  await cleanup();
  return process.exit(1);
}

/** LAUREL_CONFIG (default config/demo.yaml), or exit 1 with the bad field named (README: The tenant file). */
export async function loadTenantsOrExit(logger: Logger): Promise<CompiledTenant[]> {
  try {
    return loadConfigFile(configPath());
  } catch (err) {
    return exitOnConfigError(logger, err);
  }
}

/**
 * How long a stop waits for the process's connections to close once its requests are answered.
 * With Redis unreachable they never do (a BullMQ worker's and queue-events' close waits for a
 * connection that is not coming back), and a process left running after SIGTERM holds a rolling
 * deploy until its orchestrator's SIGKILL. Nothing is lost by leaving then: an acknowledged event
 * is in Redis already, and a job cut off is taken again by another process once its lock expires.
 */
export const CLOSE_TIMEOUT_MS = 5_000;

/**
 * On SIGINT, SIGTERM or SIGHUP (once): log, run `close`, exit 0 (1 if it failed). `timeoutMs` bounds the
 * whole of `close`: when it passes first, the process says so and exits without waiting further.
 * SIGQUIT (Ctrl-\ in a terminal) quits at once, without the stop's drain, but through
 * process.exit, so the embedded redis-server is sent SIGTERM on the way out (Node's default
 * action ends the process without its exit handlers, and the server ran on).
 */
export function stopOnSignals(logger: Logger, close: () => Promise<void>, timeoutMs: number = CLOSE_TIMEOUT_MS): void {
  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "stopping");
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timed out">((resolve) => {
      timer = setTimeout(() => resolve("timed out"), timeoutMs);
    });
    const closed = close().then(
      () => "closed" as const,
      (err: unknown) => {
        logger.error({ err }, "stopping failed");
        return "failed" as const;
      },
    );
    const outcome = await Promise.race([closed, timedOut]);
    clearTimeout(timer);
    if (outcome === "timed out") logger.warn({ timeoutMs }, "stopping without waiting longer for connections to close (is Redis reachable?)");
    // The log's last word on a stop that finished: "stopping" alone does not say it did.
    else if (outcome === "closed") logger.info({ signal }, "stopped");
    process.exit(outcome === "failed" ? 1 : 0);
  };
  onSignals((signal) => {
    // Ctrl-\ (SIGQUIT) quits at once; so does a second Ctrl-C while a stop waits for its drain,
    // as a terminal user pressing it again expects (it did nothing). A repeated SIGTERM or SIGHUP
    // does not cut the drain: supervisors send one, then SIGKILL.
    if (signal === "SIGQUIT" || (stopping && signal === "SIGINT")) {
      logger.warn({ signal }, stopping ? "quitting without waiting for the stop to finish" : "quitting without a stop");
      process.exit(1);
    }
    void stop(signal);
  });
}

/**
 * The signals that stop the service: SIGINT (a Ctrl-C), SIGTERM (a supervisor), SIGHUP (the
 * terminal closed; by default it ended the service without a stop, leaving the embedded
 * redis-server, in a session of its own, running).
 */
export const STOP_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

/** What a signal the process handles does now: set by exitOnSignalsWhileStarting, then stopOnSignals. */
let signalAction: ((signal: NodeJS.Signals) => void) | null = null;

/**
 * Sets what STOP_SIGNALS and SIGQUIT do. The listeners are installed by the first call and stay;
 * a later call changes what they run. Swapping the listeners instead lost signals: removing a
 * signal's last listener closes its libuv handle, and a signal caught but not dispatched yet goes
 * with it (a SIGTERM sent as the service logged "laurel listening", while the start's listeners
 * gave way to the stop's, left it running).
 */
function onSignals(action: (signal: NodeJS.Signals) => void): void {
  if (signalAction === null) for (const signal of [...STOP_SIGNALS, "SIGQUIT"] as const) process.on(signal, (s) => signalAction!(s));
  signalAction = action;
}

/**
 * Until stopOnSignals takes over: a stop signal during the start (waiting for Redis, an AOF
 * loading) exits at once, through process.exit, so that an embedded redis-server already spawned
 * is stopped with it (its exit handler).
 */
export function exitOnSignalsWhileStarting(logger: Logger): void {
  onSignals((signal) => {
    logger.info({ signal }, "stopping during the start");
    process.exit(0);
  });
}

/**
 * At start, Redis may not be up yet (a container started beside it, a failover in progress):
 * waits for a PING answer up to LAUREL_REDIS_WAIT seconds (default 60), saying once that it
 * waits, then exits 1 with a message naming the address instead of a stack trace. Credentials it
 * refuses stop the start at once (waiting would not change them), and so does a TLS certificate
 * the process does not trust (rediss://: a private CA given in neither LAUREL_REDIS_TLS_CA nor
 * NODE_EXTRA_CA_CERTS, a host name the certificate does not carry, an expired one), which
 * otherwise looked like a Redis not answering for LAUREL_REDIS_WAIT, then "not reachable", and a
 * client certificate the server refuses, or the lack of one where it asks for one (its
 * tls-auth-clients): store/redis-first-connection.ts, whose lines `npm run check-config` says
 * too. A Redis older than 7 (Ubuntu 22.04's is 6.0) stops the start too, saying so, instead of a
 * stack trace from the first FUNCTION LOAD.
 *
 * Except a password from a file (LAUREL_REDIS_PASSWORD_FILE, LAUREL_REDIS_SENTINEL_PASSWORD_FILE)
 * refused: a process started during a rotation, the server's password changed and the file not
 * yet, exited 1 where a few seconds later it would have started. The file is read again at each
 * refusal (store/redis-password-reload.ts, watching since before this wait), so the start waits
 * for it as for a Redis not answering, saying so once, and exits naming the refusal only when
 * LAUREL_REDIS_WAIT has passed.
 */
export async function waitForRedisOrExit(redis: Redis, logger: Logger): Promise<void> {
  const seconds = Number(process.env.LAUREL_REDIS_WAIT || 60); // checked by checkEnvironmentOrExit
  const giveUpAt = Date.now() + seconds * 1000;
  const address = redisAddress(redis.options);
  const watch = watchFirstConnection(redis);
  let saidRefused = false;
  for (let attempt = 0; ; attempt++) {
    let tooOld: RedisTooOld | null;
    try {
      // Each PING bounded (a second at most, and the wait's end): ioredis holds a command without
      // end while the server takes the connection but never answers (stopped, paused) or while
      // no sentinel answers (it asks them again and again), and the start waited past its limit.
      await answeredWithin(redis.ping(), Math.max(1, Math.min(1000, giveUpAt - Date.now())));
      if (attempt > 0) logger.info({ redis: address }, "redis is reachable");
      tooOld = await redisTooOld(redis, address);
    } catch (err) {
      // Refused credentials, a certificate not accepted, a client certificate refused or
      // required: said at once, waiting would not change them. A password file's refused: the
      // file may be written any moment (a rotation half done), read again at each refusal.
      const refusal = await watch.refusal(err);
      if (refusal !== null && refusal.rereadFile === undefined) {
        logger.fatal({ redis: address, err: refusal.err }, refusal.line);
        process.exit(1);
      }
      if (Date.now() >= giveUpAt) {
        if (refusal !== null) logger.fatal({ redis: address, err: refusal.err }, `${refusal.line} (still refused after ${seconds} s, LAUREL_REDIS_WAIT, the file read again at each refusal)`);
        else logger.fatal({ redis: address, err: (err as Error).message }, `Redis at ${address} is not reachable (waited ${seconds} s, LAUREL_REDIS_WAIT); ${watch.notAnswering()}`);
        process.exit(1);
      }
      if (refusal !== null && !saidRefused) {
        saidRefused = true;
        logger.warn({ redis: address, err: refusal.err }, `${refusal.line}; waiting for ${refusal.rereadFile} to hold the password it takes (a rotation half done?), read again at each refusal (up to ${seconds} s, LAUREL_REDIS_WAIT)`);
      } else if (attempt === 0) logger.warn({ redis: address }, `waiting for Redis at ${address} (up to ${seconds} s, LAUREL_REDIS_WAIT)`);
      await new Promise((r) => setTimeout(r, 500));
      continue;
    }
    if (tooOld !== null) {
      logger.fatal({ redis: address, version: tooOld.version }, tooOld.line);
      process.exit(1);
    }
    watch.stop();
    return;
  }
}

export interface RedisTooOld {
  version: string;
  /** What the start says, and `npm run check-config`. */
  line: string;
}

/**
 * A Redis older than 7 (its version and the line saying so), or null: 7 or later, or a Redis that
 * does not know INFO (renamed by a host), which is not checked (its scripts will say it). A user
 * whose ACL forbids INFO is thrown (NOPERM, which the first connection's watch says): BullMQ
 * needs INFO, so the start would fail on it later, and less clearly.
 */
export async function redisTooOld(redis: Redis, address: string): Promise<RedisTooOld | null> {
  const version = await redis.info("server").then(redisVersion, (err: unknown) => {
    if (err instanceof Error && noPermission(err.message) !== null) throw err;
    return null;
  });
  if (version === null || isRedis7OrLater(version)) return null;
  return { version, line: `Redis at ${address} is ${version}; Laurel needs Redis 7 or later (its scripts are Redis Functions). Debian 12 and Ubuntu 24.04 ship 7; elsewhere use the Redis project's packages or \`docker compose up\`` };
}

/** `redis_version` of an INFO server reply (Valkey reports its Redis compatibility there too), or null when absent. */
function redisVersion(info: string): string | null {
  return /^redis_version:([^\r\n]+)/m.exec(info)?.[1] ?? null;
}

/** Whether a `major.minor.patch` version is 7 or later (Redis Functions, FCALL: 7.0). */
function isRedis7OrLater(version: string): boolean {
  return Number(version.split(".")[0]) >= 7;
}

/**
 * PORT as an integer 0-65535 (0: any free port), or null: a typo such as "3000x" or "70000" made
 * uWS listen on some other port and the service come up where nobody looked. Empty is unset (a
 * compose file's `${PORT}` of an unset variable): 3000.
 */
function parsePort(text: string): number | null {
  const port = /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  return port <= 65_535 ? port : null;
}

/** LAUREL_WORKER_PORT (checked by checkEnvironmentOrExit): the port `dist/worker.js` serves /healthz and /metrics on, or null (unset: none). */
export function workerPort(env: NodeJS.ProcessEnv = process.env): number | null {
  return env.LAUREL_WORKER_PORT ? parsePort(env.LAUREL_WORKER_PORT) : null;
}

/** PORT (checked by checkEnvironmentOrExit with { port: true }): the port to listen on. */
export function listenPort(text = process.env.PORT || "3000"): number {
  return parsePort(text)!;
}

/** What a start says of a port it cannot listen on (exitIfPortTaken below, and app.ts when uWS's listen fails). */
export function portTakenMessage(host: string, port: number, reusePort: boolean): string {
  return `cannot listen on ${host}:${port}${reusePort ? "" : " (is the port taken? LAUREL_REUSE_PORT=1 shares it on purpose)"}`;
}

/**
 * Stops a start whose port another process holds before it touches Redis. A start applies its
 * config to Redis before it listens (the state registry, the board and webhook setup: an endpoint
 * left out of the config has its hook streams deleted), so a second process started by mistake
 * on a taken port changed the running one's data, then failed (found by an audit). A port shared
 * on purpose (LAUREL_REUSE_PORT=1) or chosen by the system (0) is not probed; uWS's own listen
 * still decides (a port taken between the probe and it is refused there, later).
 */
export async function exitIfPortTaken(logger: Logger, port: number, reusePort: boolean): Promise<void> {
  if (reusePort || port === 0) return;
  const refused = await new Promise<string | null>((resolve) => {
    const probe = createServer();
    probe.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    probe.listen({ port, host: "0.0.0.0", exclusive: true }, () => probe.close(() => resolve(null)));
  });
  if (refused === null) return;
  // Taken, or refused for another reason the system names (EACCES below 1024, EADDRNOTAVAIL).
  logger.fatal(refused === "EADDRINUSE" ? portTakenMessage("0.0.0.0", port, false) : `cannot listen on 0.0.0.0:${port} (${refused})`);
  process.exit(1);
}

/** The switches Laurel reads from the environment, with the values each takes ("" is unset). */
const SWITCHES: Record<string, readonly string[]> = {
  LAUREL_CLOCK: ["manual", "system"],
  LAUREL_WORKER: ["on", "off"],
  LAUREL_DELIVERIES: ["on", "off"],
  LAUREL_COALESCE: ["on", "off"],
  LAUREL_LUA: ["function", "eval"],
  LAUREL_AUTOPIPELINE: ["0", "1"],
  LAUREL_REUSE_PORT: ["0", "1"],
  LAUREL_FSYNC: ["everysec", "always"],
};

/**
 * Exit 1 naming a switch set to a value it does not take (`LAUREL_CLOCK=manul` ran the system
 * clock, `LAUREL_WORKER=false` ran the worker), a LOG_LEVEL pino does not know, a
 * LAUREL_REDIS_WAIT, LAUREL_DRAIN or LAUREL_READ_TIMEOUT that is not a number of seconds up to a day, a
 * LAUREL_HEALTH_TIMEOUT outside its range, or a LAUREL_AWARD_IDS the award id table cannot take
 * (and, for the service, a PORT that is not one): all of them in one line. Run first, before
 * anything starts.
 */
export function checkEnvironmentOrExit(logger: Logger, env: NodeJS.ProcessEnv = process.env, opts: { port?: boolean } = {}): void {
  const problems = environmentProblems(env, opts);
  if (problems.length > 0) {
    logger.fatal(`invalid environment: ${problems.join("; ")}`);
    process.exit(1);
  }
}

/** How a number of seconds is written in the environment: digits, with a fraction or not (no sign, unit or exponent). */
const SECONDS = /^\d+(\.\d+)?$/;

/**
 * The variables written in seconds, each with its range: whether 0 is taken, and the ceiling.
 * Past 2^31 ms (24.8 days) Node's timers fire at once: a "wait for ever" of 9999999 s drained
 * nothing at a stop and swept reads every millisecond, hence a day at most; a health bound of
 * 0 would answer every probe "down", and one past an hour is no health check.
 */
const SECONDS_VARIABLES: Record<string, { zero: boolean; max: number }> = {
  LAUREL_REDIS_WAIT: { zero: true, max: 86_400 },
  LAUREL_DRAIN: { zero: true, max: 86_400 },
  LAUREL_READ_TIMEOUT: { zero: true, max: 86_400 },
  LAUREL_RESEND_WAIT: { zero: true, max: 86_400 },
  LAUREL_HEALTH_TIMEOUT: { zero: false, max: MAX_HEALTH_TIMEOUT_MS / 1000 },
};

/** A number of seconds in the environment (checked by checkEnvironmentOrExit), in milliseconds; undefined when unset or empty. */
export function envMilliseconds(name: string, env: NodeJS.ProcessEnv = process.env): number | undefined {
  return env[name] ? Number(env[name]) * 1000 : undefined;
}

/** What checkEnvironmentOrExit refuses in `env`, each as its message (npm run check-config says them too). */
export function environmentProblems(env: NodeJS.ProcessEnv = process.env, opts: { port?: boolean } = {}): string[] {
  const problems: string[] = [];
  // The service's PORT is named with the rest (it was checked alone after the config, so a bad
  // PORT beside a bad switch took two starts to find); the worker listens on LAUREL_WORKER_PORT only.
  if (opts.port && env.PORT && parsePort(env.PORT) === null) problems.push(`PORT must be an integer from 0 to 65535 (got ${JSON.stringify(env.PORT)})`);
  if (env.LAUREL_WORKER_PORT && parsePort(env.LAUREL_WORKER_PORT) === null) {
    problems.push(`LAUREL_WORKER_PORT must be an integer from 0 to 65535 (got ${JSON.stringify(env.LAUREL_WORKER_PORT)})`);
  }
  for (const [name, values] of Object.entries(SWITCHES)) {
    const value = env[name];
    if (value && !values.includes(value)) problems.push(`${name} must be ${values.join(" or ")} (got ${JSON.stringify(value)})`);
  }
  if (logLevel(env) === null) problems.push(`LOG_LEVEL must be one of ${Object.keys(pino.levels.values).join(", ")} or silent (got ${JSON.stringify(env.LOG_LEVEL)})`);
  for (const [name, range] of Object.entries(SECONDS_VARIABLES)) {
    const text = env[name];
    if (!text) continue;
    const seconds = SECONDS.test(text) ? Number(text) : NaN;
    if (!(seconds <= range.max && (range.zero ? seconds >= 0 : seconds > 0))) {
      problems.push(`${name} must be a number of seconds ${range.zero ? "from 0 to" : "above 0 and up to"} ${range.max}, in digits (got ${JSON.stringify(text)})`);
    }
  }
  problems.push(...redisUrlProblems(env));
  problems.push(...sentinelProblems(env));
  problems.push(...redisTlsProblems(env));
  problems.push(...redisPasswordProblems(env));
  const slots = env.LAUREL_AWARD_IDS;
  if (slots && !(/^\d{1,8}$/.test(slots) && isAwardIdSlots(Number(slots)))) {
    problems.push(`LAUREL_AWARD_IDS must be 0 or a power of two up to ${MAX_AWARD_ID_SLOTS} (got ${JSON.stringify(slots)})`);
  }
  return problems;
}

/**
 * LAUREL_FSYNC reaches only the redis-server the service embeds. A process on REDIS_URL (the
 * service given one, and always the worker) says so instead of taking it silently: an operator
 * who set it for an fsync per write would otherwise believe it had one.
 */
export function warnFsyncNotApplied(logger: Logger, env: NodeJS.ProcessEnv = process.env): void {
  if (env.LAUREL_FSYNC) {
    logger.warn({ fsync: env.LAUREL_FSYNC }, "LAUREL_FSYNC sets the embedded redis-server's fsync only; with REDIS_URL, set appendfsync in that Redis's configuration");
  }
}

/**
 * LAUREL_CLOCK=manual moves only the service's clock (POST /admin/v1/clock): the worker keeps the
 * system clock, so its webhook timeline would run by another time than the service's. Said, as
 * LAUREL_FSYNC is, instead of taken silently.
 */
export function warnManualClockNotApplied(logger: Logger, env: NodeJS.ProcessEnv = process.env): void {
  if (env.LAUREL_CLOCK === "manual") {
    logger.warn("LAUREL_CLOCK=manual is the service's: this worker runs on the system clock; with a manual clock, run the worker in the service (LAUREL_WORKER on)");
  }
}

/** LAUREL_AWARD_IDS (checked by checkEnvironmentOrExit): how many award ids the process remembers. */
export function applyAwardIdSlots(env: NodeJS.ProcessEnv = process.env): void {
  if (env.LAUREL_AWARD_IDS) setAwardIdSlots(Number(env.LAUREL_AWARD_IDS));
}

/** LOG_LEVEL (default info) when pino knows it; null otherwise (checkEnvironmentOrExit names it). */
function logLevel(env: NodeJS.ProcessEnv): string | null {
  const level = env.LOG_LEVEL || "info";
  // Own keys only: `in` also took "constructor" or "toString", and pino then logged nothing at all.
  return Object.hasOwn(pino.levels.values, level) || level === "silent" ? level : null;
}

/**
 * The process logger at LOG_LEVEL. At info when LOG_LEVEL is not a level: checkEnvironmentOrExit
 * then names it with every other bad variable, in one line (it was said alone, first, in plain
 * text, and the others took another start).
 *
 * It writes each line to stdout as it is logged (a synchronous destination), as Node itself
 * writes to a pipe or file on Linux. pino's default hands lines to libuv's thread pool, and the
 * flush at process.exit wrote the lines still held before the one already handed over: a stop
 * logged "closed", "stopped", then "stopping". Laurel logs little (the start, warnings, errors),
 * so the write costs nothing measurable.
 */
export function processLogger(env: NodeJS.ProcessEnv = process.env): Logger {
  return pino({ level: logLevel(env) ?? "info", serializers: { err: errWithoutCredentials } }, pino.destination({ dest: 1, sync: true }));
}

/**
 * pino's `err` serializer (the error whole: its message, stack and every field of its own), with
 * the arguments of a Redis AUTH or HELLO an ioredis error carries replaced (redact.ts): a
 * password changed under a running process logged the old one with every request it failed.
 */
export function errWithoutCredentials(err: unknown): unknown {
  return redactCredentials(pino.stdSerializers.err(err as Error));
}

/**
 * A crash after the start (an uncaught exception, or a rejection no one handled: Node 20 raises
 * it as one) is logged as a fatal JSON line with its stack before Node prints its own report to
 * stderr and exits: a collector reading the JSON log saw the process end without a word of why.
 * The monitor does not change what Node does next.
 */
function logCrashes(logger: Logger): void {
  process.on("uncaughtExceptionMonitor", (err, origin) => {
    logger.fatal({ err, origin }, "crashed: an uncaught exception ends the process");
  });
}

/**
 * The fatal line of a start that failed where nothing named the failure: with a hint where the
 * cause is the operator's to mend. A REDIS_URL naming a read-only replica refuses the first write
 * with READONLY; Redis's other refusals (maxmemory, a disk it cannot write, too few replicas) are
 * named as a running service logs them; a Redis user whose ACL forbids FUNCTION cannot load the
 * scripts as libraries, which LAUREL_LUA=eval does not need.
 */
export function startFailureMessage(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  const refusal = redisRefusalOf(err);
  if (refusal?.cause === "read-only") return "the start failed: REDIS_URL names a read-only replica; point it at the primary";
  if (refusal) return `the start failed: ${refusal.log}`;
  const forbidden = noPermission(message);
  if (forbidden !== null) return `the start failed: the Redis user in REDIS_URL ${forbidden}`;
  return "the start failed";
}

/**
 * An entry point (dist/main.js, dist/worker.js): its process logger, crashes logged, and `main`
 * run with it; a start that fails where nothing named the failure is one fatal JSON line with its
 * stack (a console.error went to stderr as plain text, which a collector reading JSON lines
 * loses or splits line by line), then exit 1.
 */
export function runEntry(main: (logger: Logger) => Promise<void>): void {
  const logger = processLogger();
  logCrashes(logger);
  main(logger).catch((err: unknown) => {
    logger.fatal({ err }, startFailureMessage(err));
    process.exit(1);
  });
}
