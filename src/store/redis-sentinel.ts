import type { RedisOptions } from "ioredis";
import { isFilePassword, passwordFileProblem, passwordFromFile, passwordPath, type PasswordFile, type RedisPassword } from "./password-file.js";
import { redisTlsFiles, usesTls } from "./redis-tls.js";
import { SentinelConnectorHearingErrors } from "./stream-errors.js";

/**
 * Redis through Sentinel, the failover of a self-hosted Redis: the process asks the sentinels
 * for the primary of a monitored group and connects to it, and after a failover (the sentinels
 * promote a replica, demote the old primary and close its clients' connections) it asks again.
 * Environment:
 *   REDIS_SENTINELS          the sentinels, host:port separated by commas (an IPv6 host in brackets)
 *   REDIS_SENTINEL_NAME      the group's name in their `sentinel monitor` line (default mymaster)
 *   REDIS_SENTINEL_PASSWORD  the sentinels' own password, when they require one
 *   LAUREL_REDIS_SENTINEL_PASSWORD_FILE  instead, the path of a file holding it, read again when
 *                            it changes and when a sentinel refuses it, so that a rotation needs
 *                            no restart (as LAUREL_REDIS_PASSWORD_FILE for the data nodes':
 *                            password-file.ts, redis-password-reload.ts)
 * REDIS_URL may still be given, for the data nodes' user, password, database and TLS; its host
 * and port are not used (the sentinels name the primary). A rediss:// REDIS_URL means TLS to the
 * sentinels and to the data nodes alike (a deployment that encrypts one encrypts the other; one
 * switch, no setting of its own), with the same LAUREL_REDIS_TLS_* files (redis-tls.ts) for both.
 */
export interface SentinelAddress {
  host: string;
  port: number;
}

const SENTINEL = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/;

/**
 * REDIS_SENTINELS as its refusal quotes it, when it holds an "@" (a userinfo:
 * `:password@host:26379`, `redis://user:password@host:26379`, written as a URL): everything
 * before its last "@" not shown, since the refusal is logged and printed by check-config. The
 * whole text, not each entry: a password may hold the comma the entries are split at.
 */
function shownWithUserinfo(text: string): string {
  return `<userinfo not shown>${text.slice(text.lastIndexOf("@"))}`;
}

/** REDIS_SENTINELS as addresses, or the text of what is wrong with it. */
export function parseSentinels(text: string): SentinelAddress[] | string {
  const addresses: SentinelAddress[] = [];
  for (const part of text.split(",").map((p) => p.trim())) {
    const match = SENTINEL.exec(part);
    const port = match ? Number(match[3]) : 0;
    if (!match || port < 1 || port > 65535) {
      if (text.includes("@")) {
        return `REDIS_SENTINELS must be host:port pairs separated by commas, without a userinfo (got ${JSON.stringify(shownWithUserinfo(text))}; the sentinels' password goes in REDIS_SENTINEL_PASSWORD, the data nodes' in REDIS_URL)`;
      }
      return `REDIS_SENTINELS must be host:port pairs separated by commas (got ${JSON.stringify(part)} in ${JSON.stringify(text)})`;
    }
    addresses.push({ host: match[1] ?? match[2]!, port });
  }
  return addresses;
}

/** Whether the process reaches Redis through sentinels. */
export function usesSentinels(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env.REDIS_SENTINELS);
}

export const SENTINEL_PASSWORD_FILE = "LAUREL_REDIS_SENTINEL_PASSWORD_FILE";

/** The sentinels' password file (password-file.ts holds what it shares with the data nodes' one). */
const REDIS_SENTINEL_PASSWORD_FILE: PasswordFile = { variable: SENTINEL_PASSWORD_FILE, whose: "sentinels' password" };

/** What is wrong with the Sentinel settings, for checkEnvironmentOrExit's one line. */
export function sentinelProblems(env: NodeJS.ProcessEnv = process.env): string[] {
  if (!env.REDIS_SENTINELS) {
    return ["REDIS_SENTINEL_NAME", "REDIS_SENTINEL_PASSWORD", SENTINEL_PASSWORD_FILE].filter((name) => env[name]).map((name) => `${name} is set without REDIS_SENTINELS`);
  }
  const problems: string[] = [];
  const parsed = parseSentinels(env.REDIS_SENTINELS);
  if (typeof parsed === "string") problems.push(parsed);
  if (passwordPath(REDIS_SENTINEL_PASSWORD_FILE, env) !== undefined) {
    // Which one would be sent? The operator would be left guessing, as with REDIS_URL's password beside LAUREL_REDIS_PASSWORD_FILE.
    if (env.REDIS_SENTINEL_PASSWORD) problems.push(`${SENTINEL_PASSWORD_FILE} is set and REDIS_SENTINEL_PASSWORD too: give the sentinels' password in one place`);
    const problem = passwordFileProblem(REDIS_SENTINEL_PASSWORD_FILE, env);
    if (problem !== null) problems.push(problem);
  }
  return problems;
}

/**
 * The process's sentinels' password from LAUREL_REDIS_SENTINEL_PASSWORD_FILE, read the first time
 * (one object for every client of the process, BullMQ's too: the reload changes it for all);
 * null without the file.
 */
export function sentinelPassword(env: NodeJS.ProcessEnv = process.env): RedisPassword | null {
  return env.REDIS_SENTINELS ? passwordFromFile(REDIS_SENTINEL_PASSWORD_FILE, env) : null;
}

/** ioredis' sentinelPassword option: the file's shared object, REDIS_SENTINEL_PASSWORD, or none. */
function sentinelPasswordOption(env: NodeJS.ProcessEnv): RedisOptions {
  const fromFile = sentinelPassword(env);
  // The object where ioredis' types say string (password-file.ts RedisPassword): the
  // SentinelConnector hands it on as the `password` of each connection it opens to a sentinel.
  if (fromFile !== null) return { sentinelPassword: fromFile as unknown as string };
  return env.REDIS_SENTINEL_PASSWORD ? { sentinelPassword: env.REDIS_SENTINEL_PASSWORD } : {};
}

/** Where a client's sentinels' password comes from, for the line that says a sentinel refused it; null: none given. */
export function sentinelPasswordSetting(options: RedisOptions): typeof SENTINEL_PASSWORD_FILE | "REDIS_SENTINEL_PASSWORD" | null {
  if (isFilePassword(options.sentinelPassword)) return SENTINEL_PASSWORD_FILE;
  return options.sentinelPassword ? "REDIS_SENTINEL_PASSWORD" : null;
}

/**
 * The refusal a sentinel's connection failed by, from the client's "sentinelError" (ioredis'
 * "failed to connect to sentinel <host:port> because <its error>"): its address and Redis's code
 * (WRONGPASS: the password wrong; NOAUTH: one needed and none given); null for any other failure.
 */
export function sentinelAuthRefusal(err: unknown): { sentinel: string; code: "WRONGPASS" | "NOAUTH" } | null {
  if (!(err instanceof Error)) return null;
  const match = /^failed to connect to sentinel (\S+) because (WRONGPASS|NOAUTH)\b/.exec(err.message);
  return match ? { sentinel: match[1]!, code: match[2] as "WRONGPASS" | "NOAUTH" } : null;
}

/** ioredis options that reach the group's primary through the sentinels; {} without REDIS_SENTINELS. */
export function sentinelOptions(env: NodeJS.ProcessEnv = process.env): RedisOptions {
  if (!env.REDIS_SENTINELS) return {};
  const sentinels = parseSentinels(env.REDIS_SENTINELS);
  if (typeof sentinels === "string") throw new Error(sentinels); // checkEnvironmentOrExit said it first
  // ioredis takes the URL's TLS (rediss://) for the data nodes only with enableTLSForSentinelMode,
  // and the sentinels' own from sentinelTLS: without them both were plain TCP. A sentinel that
  // asks for a client certificate (Redis's default) gets the data nodes' one.
  const tls = usesTls(env) ? { enableTLSForSentinelMode: true, sentinelTLS: redisTlsFiles(env) } : {};
  // The connector: ioredis' own, its clients to the sentinels hearing their sockets' later errors (stream-errors.ts).
  return { sentinels, name: env.REDIS_SENTINEL_NAME || "mymaster", ...sentinelPasswordOption(env), ...tls, Connector: SentinelConnectorHearingErrors };
}

/** Where a client's Redis is, for the log: its address, or the group and the sentinels asked for it. */
export function redisAddress(options: RedisOptions): string {
  if (options.sentinels && options.sentinels.length > 0) {
    return `primary "${options.name}" via sentinels ${options.sentinels.map((s) => `${s.host}:${s.port}`).join(",")}`;
  }
  return options.path ?? `${options.host}:${options.port}`;
}
