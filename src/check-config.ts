/**
 * node dist/check-config.js [tenant file]   (npm run check-config -- [tenant file])
 *
 * Checks a tenant file the way a start does, without starting anything, so that a deploy's
 * pipeline finds a bad file before the service refuses it: the schema and the checks across
 * fields (the same message as the start's, every bad field named), and the demo keys under
 * NODE_ENV=production. With REDIS_URL (or REDIS_SENTINELS) it also compares the settings the
 * stored data is laid out by ({t}:fixed: shards, streak frequency, each board's schedule) and says
 * what a start on that Redis would refuse, reading only: nothing is written, no script is loaded.
 *
 * The environment is checked as the service's start checks it (LAUREL_* switches, numbers, PORT,
 * LOG_LEVEL, the sentinels, the LAUREL_REDIS_TLS_* files, which its own connection presents too):
 * run it with the environment the service will have.
 *
 * The file is the argument, else LAUREL_CONFIG, else the demo config. Prints one line per tenant
 * and `configuration ok`, exit 0. Exit 1, a problem the operator must fix, said with the start's
 * message: a bad file, a bad environment, a setting the data cannot be read with, or a Redis
 * the start would stop at once for (credentials refused, its TLS certificate not accepted, the
 * client certificate refused or required: store/redis-first-connection.ts; older than 7). Exit 2, Redis given
 * but not answering within 5 s (down, stalled, a rediss:// URL on a port without TLS: the
 * start's advice named), which a retry may mend.
 */
import { resolve } from "node:path";
import type { Redis } from "ioredis";
import { configPath, environmentProblems, redisTooOld } from "./boot.js";
import { ConfigError } from "./config/compile.js";
import type { CompiledTenant } from "./config/compiled.js";
import { loadConfigFile } from "./config/load.js";
import { answeredWithin } from "./deadline.js";
import { fixedSettingsProblem } from "./store/fixed-settings.js";
import { createRedisClient } from "./store/redis-client.js";
import { watchFirstConnection } from "./store/redis-first-connection.js";
import { redisAddress, sentinelOptions, usesSentinels } from "./store/redis-sentinel.js";

/** How long the check waits for Redis to answer each of its reads. */
const REDIS_ANSWER_MS = 5_000;

function summary(tenant: CompiledTenant): string {
  const count = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
  return [
    `tenant ${tenant.id}:`,
    count(tenant.metrics.length, "metric") + ",",
    count(tenant.systems.length, "points system") + ",",
    count(tenant.achievements.length, "achievement") + ",",
    (tenant.streak ? `a ${tenant.streak.frequency} streak` : "no streak") + ",",
    count(tenant.leaderboards.length, "leaderboard") + ",",
    count(tenant.webhooks.length, "webhook endpoint") + ",",
    count(tenant.shards, "shard"),
  ].join(" ");
}

type RedisCheck =
  | { problems: ConfigError[]; address: string }
  /** A failure waiting does not mend (credentials, certificates): the start's line, exit 1. */
  | { refused: string; address: string }
  /** No answer within REDIS_ANSWER_MS, or the connection lost: exit 2. */
  | { unreachable: string; advice: string; address: string };

async function checkAgainstRedis(tenants: readonly CompiledTenant[]): Promise<RedisCheck> {
  // Its offline queue on, as the start's client has it: the first PING waits for the connection
  // and is failed with Redis's refusal itself (NOAUTH, WRONGPASS), which a connect() does not say.
  const redis: Redis = createRedisClient(process.env.REDIS_URL || undefined, { ...sentinelOptions(), lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on("error", () => undefined); // said below, once
  const address = redisAddress(redis.options);
  const watch = watchFirstConnection(redis);
  try {
    await answeredWithin(redis.ping(), REDIS_ANSWER_MS);
    // A Redis the start refuses for its version: its stored data would not be read by Laurel either.
    const tooOld = await answeredWithin(redisTooOld(redis, address), REDIS_ANSWER_MS);
    if (tooOld !== null) return { refused: tooOld.line, address };
    const problems: ConfigError[] = [];
    for (const [index, tenant] of tenants.entries()) {
      const problem = await answeredWithin(fixedSettingsProblem(redis, tenant, index), REDIS_ANSWER_MS);
      if (problem) problems.push(problem);
    }
    return { problems, address };
  } catch (err) {
    // What the start would stop at once for (store/redis-first-connection.ts), said as it says it.
    const refusal = await watch.refusal(err);
    if (refusal !== null) return { refused: refusal.line, address };
    return { unreachable: err instanceof Error ? err.message : String(err), advice: watch.notAnswering(), address };
  } finally {
    watch.stop();
    redis.disconnect();
  }
}

async function main(): Promise<number> {
  const problems = environmentProblems(process.env, { port: true });
  if (problems.length > 0) {
    console.error(`invalid environment: ${problems.join("; ")}`);
    return 1;
  }
  // Under `npm run`, the working directory is the project's; INIT_CWD is where npm was run from,
  // which a relative path given on its command line means.
  const path = process.argv[2] ? resolve(process.env.INIT_CWD ?? process.cwd(), process.argv[2]) : configPath();
  let tenants: CompiledTenant[];
  try {
    tenants = loadConfigFile(path);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    console.error(`invalid configuration ${path}: ${err.message}`);
    return 1;
  }
  for (const tenant of tenants) console.log(summary(tenant));
  if (process.env.REDIS_URL || usesSentinels()) {
    const result = await checkAgainstRedis(tenants);
    if ("refused" in result) {
      console.error(`cannot check the stored data: ${result.refused}`);
      return 1;
    }
    if ("unreachable" in result) {
      console.error(`cannot check the stored data: Redis at ${result.address} did not answer (${result.unreachable}); ${result.advice}`);
      return 2;
    }
    if (result.problems.length > 0) {
      for (const problem of result.problems) console.error(`invalid configuration ${path} for the data in Redis at ${result.address}: ${problem.message}`);
      return 1;
    }
    console.log(`the data in Redis at ${result.address} can be read with it`);
  }
  console.log(`configuration ok: ${path}`);
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
