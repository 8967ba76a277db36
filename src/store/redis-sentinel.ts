import type { RedisOptions } from "ioredis";
import { redisTlsFiles, usesTls } from "./redis-tls.js";

/**
 * Redis through Sentinel, the failover of a self-hosted Redis: the process asks the sentinels
 * for the primary of a monitored group and connects to it, and after a failover (the sentinels
 * promote a replica, demote the old primary and close its clients' connections) it asks again.
 * Environment:
 *   REDIS_SENTINELS          the sentinels, host:port separated by commas (an IPv6 host in brackets)
 *   REDIS_SENTINEL_NAME      the group's name in their `sentinel monitor` line (default mymaster)
 *   REDIS_SENTINEL_PASSWORD  the sentinels' own password, when they require one
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

/** REDIS_SENTINELS as addresses, or the text of what is wrong with it. */
export function parseSentinels(text: string): SentinelAddress[] | string {
  const addresses: SentinelAddress[] = [];
  for (const part of text.split(",").map((p) => p.trim())) {
    const match = SENTINEL.exec(part);
    const port = match ? Number(match[3]) : 0;
    if (!match || port < 1 || port > 65535) return `REDIS_SENTINELS must be host:port pairs separated by commas (got ${JSON.stringify(part)} in ${JSON.stringify(text)})`;
    addresses.push({ host: match[1] ?? match[2]!, port });
  }
  return addresses;
}

/** Whether the process reaches Redis through sentinels. */
export function usesSentinels(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env.REDIS_SENTINELS);
}

/** What is wrong with the Sentinel settings, for checkEnvironmentOrExit's one line. */
export function sentinelProblems(env: NodeJS.ProcessEnv = process.env): string[] {
  if (!env.REDIS_SENTINELS) {
    return ["REDIS_SENTINEL_NAME", "REDIS_SENTINEL_PASSWORD"].filter((name) => env[name]).map((name) => `${name} is set without REDIS_SENTINELS`);
  }
  const parsed = parseSentinels(env.REDIS_SENTINELS);
  return typeof parsed === "string" ? [parsed] : [];
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
  return { sentinels, name: env.REDIS_SENTINEL_NAME || "mymaster", ...(env.REDIS_SENTINEL_PASSWORD ? { sentinelPassword: env.REDIS_SENTINEL_PASSWORD } : {}), ...tls };
}

/** Where a client's Redis is, for the log: its address, or the group and the sentinels asked for it. */
export function redisAddress(options: RedisOptions): string {
  if (options.sentinels && options.sentinels.length > 0) {
    return `primary "${options.name}" via sentinels ${options.sentinels.map((s) => `${s.host}:${s.port}`).join(",")}`;
  }
  return options.path ?? `${options.host}:${options.port}`;
}
