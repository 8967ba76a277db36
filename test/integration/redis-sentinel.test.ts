import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pino } from "pino";
import { checkEnvironmentOrExit } from "../../src/boot.js";
import { freePort, portOutsideEphemeralRange } from "../../src/embedded-redis.js";
import { createRedisClient, queueConnection } from "../../src/store/redis-client.js";
import { parseSentinels, redisAddress, sentinelOptions } from "../../src/store/redis-sentinel.js";
import { SentinelConnectorHearingErrors } from "../../src/store/stream-errors.js";
import { runService, waitFor, WORKER, type ServiceProcess } from "../helpers/service-process.js";
import { startTestRedis, startTestSentinel } from "../helpers/redis-server.js";

/**
 * Redis through Sentinel (README, Operations: Persistence and failover): the built service asks
 * the sentinels for the primary, and after a failover (the replica promoted, the old primary
 * demoted, its clients' connections closed by the sentinel) asks again. Every event acknowledged
 * before and after counts once: the stream worker's buckets, its blocking connection included,
 * follow the new primary too.
 */

const portOf = (url: string): number => Number(new URL(url).port);

describe("REDIS_SENTINELS", () => {
  it("parses host:port lists, IPv6 in brackets; anything else is named", () => {
    expect(parseSentinels("10.0.0.1:26379, sentinel-b:26380,[::1]:26381")).toEqual([
      { host: "10.0.0.1", port: 26379 },
      { host: "sentinel-b", port: 26380 },
      { host: "::1", port: 26381 },
    ]);
    for (const bad of ["10.0.0.1", "host:0", "host:70000", "host:26379,", "a b:1", "::1:26379"]) expect(parseSentinels(bad)).toMatch(/^REDIS_SENTINELS must be host:port pairs/);
  });

  it("refuses an entry written with a userinfo (a URL, user:password@host:port) without showing it", () => {
    // The last: a password holding the comma the entries are split at ("Sentinel" alone would be an entry).
    for (const text of ["laurel:Sentinel-Pw-1@10.0.0.1:26379", "redis://:Sentinel-Pw-1@10.0.0.1:26379", "10.0.0.2:26379, :Sentinel-Pw-1@10.0.0.1:26379", "redis://:Sentinel,-Pw-1@10.0.0.1:26379"]) {
      const refusal = parseSentinels(text);
      expect(refusal, text).toMatch(/^REDIS_SENTINELS must be host:port pairs/);
      expect(refusal, text).toContain('"<userinfo not shown>@10.0.0.1:26379"');
      expect(refusal, text).toContain("the sentinels' password goes in REDIS_SENTINEL_PASSWORD");
      expect(refusal, text).not.toContain("Sentinel");
      expect(refusal, text).not.toContain("Pw-1");
    }
  });

  it("is checked with the rest of the environment, and reaches BullMQ's connections too", () => {
    const lines: string[] = [];
    const logger = pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line).msg) });
    const exit = process.exit;
    process.exit = ((code: number) => {
      throw new Error(`exit ${code}`);
    }) as typeof process.exit;
    try {
      expect(() => checkEnvironmentOrExit(logger, { REDIS_SENTINELS: "nowhere", REDIS_SENTINEL_NAME: "cache" })).toThrow("exit 1");
      expect(() => checkEnvironmentOrExit(logger, { REDIS_SENTINEL_NAME: "cache" })).toThrow("exit 1");
      expect(() => checkEnvironmentOrExit(logger, { REDIS_SENTINELS: "127.0.0.1:26379" })).not.toThrow();
    } finally {
      process.exit = exit;
    }
    expect(lines).toEqual([
      'invalid environment: REDIS_SENTINELS must be host:port pairs separated by commas (got "nowhere" in "nowhere")',
      "invalid environment: REDIS_SENTINEL_NAME is set without REDIS_SENTINELS",
    ]);
    const options = sentinelOptions({ REDIS_SENTINELS: "127.0.0.1:26379,127.0.0.2:26379", REDIS_SENTINEL_PASSWORD: "s3cret" });
    expect(options).toEqual({ sentinels: [{ host: "127.0.0.1", port: 26379 }, { host: "127.0.0.2", port: 26379 }], name: "mymaster", sentinelPassword: "s3cret", Connector: SentinelConnectorHearingErrors });
    const redis = createRedisClient("redis://:data-pw@ignored:1/2", { ...options, lazyConnect: true });
    try {
      expect(queueConnection(redis)).toMatchObject({ sentinels: options.sentinels, name: "mymaster", sentinelPassword: "s3cret", password: "data-pw", db: 2, Connector: SentinelConnectorHearingErrors });
      expect(redisAddress(redis.options)).toBe('primary "mymaster" via sentinels 127.0.0.1:26379,127.0.0.2:26379');
    } finally {
      redis.disconnect();
    }
  });
});

describe("the service through Sentinel, across a failover", () => {
  let primary: Awaited<ReturnType<typeof startTestRedis>>;
  let replica: Awaited<ReturnType<typeof startTestRedis>>;
  let sentinel: Awaited<ReturnType<typeof startTestSentinel>>;
  let service: ServiceProcess | undefined;
  const admin: Redis[] = [];
  const cleanups: (() => void)[] = [];

  beforeAll(async () => {
    primary = await startTestRedis();
    replica = await startTestRedis();
  });

  afterAll(async () => {
    if (service && service.child.exitCode === null) {
      service.child.kill("SIGTERM");
      await service.exited;
    }
    for (const client of admin) client.disconnect();
    await sentinel?.stop();
    await replica?.stop();
    await primary?.stop();
    for (const cleanup of cleanups) cleanup();
  });

  it("records every event once, before and after the sentinel promotes the replica", async () => {
    const [p, r] = [new Redis(primary.url), new Redis(replica.url)];
    admin.push(p, r);
    // Redis waits 5 s by default before a diskless first sync, for more replicas to join.
    for (const server of [p, r]) await server.config("SET", "repl-diskless-sync-delay", "0");
    await r.replicaof("127.0.0.1", portOf(primary.url));
    await waitFor(async () => (await r.info("replication")).includes("master_link_status:up"), "the replica's link");
    sentinel = await startTestSentinel(portOf(primary.url), [portOf(replica.url)]);
    const s = new Redis(sentinel.port, "127.0.0.1");
    admin.push(s);
    // A failover needs the sentinel to know the replica (named in its config) and to have read its INFO.
    await waitFor(async () => JSON.stringify(await s.call("SENTINEL", "REPLICAS", "mymaster")).includes('"master-link-status","ok"'), "the sentinel to know the replica");

    const port = await portOutsideEphemeralRange();
    // A data directory of its own, so that a build which wrongly embeds a redis-server writes nothing into the checkout.
    const dataDir = mkdtempSync(join(tmpdir(), "laurel-sentinel-data-"));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    service = runService({ PORT: String(port), REDIS_SENTINELS: `127.0.0.1:${sentinel.port}`, REDIS_SENTINEL_NAME: "mymaster", LAUREL_DATA_DIR: dataDir });
    await waitFor(() => service!.output().includes("laurel listening"), "the service to listen", service.exited, service.output);
    const base = `http://127.0.0.1:${port}`;
    const lesson = async (): Promise<number> => {
      const res = await fetch(`${base}/v1/metrics/lessons/event`, { method: "POST", headers: { "x-api-key": "demo-key", "content-type": "application/json" }, body: JSON.stringify({ user: { id: "sentinel", tz: "UTC" }, value: 1 }) });
      return res.status;
    };
    const read = async (path: string) => (await fetch(`${base}${path}`, { headers: { "x-api-key": "demo-key" } })).json() as Promise<any>;
    const summed = async (): Promise<number> => {
      const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
      const days = (await read(`/v1/users/sentinel/metrics/lessons/event-summary?aggregation=daily&startDate=${day(-2)}&endDate=${day(2)}`)) as { change: number }[];
      return days.reduce((sum, day) => sum + day.change, 0);
    };

    for (let i = 0; i < 3; i++) expect(await lesson()).toBe(201);
    // The service and its job queues reached the primary the sentinel named.
    expect(await p.keys("{demo:*}:u:sentinel")).toHaveLength(1);
    expect((await p.keys("{laurel-jobs}:*")).length).toBeGreaterThan(0);
    // The replica holds them before the failover (its offset reached the primary's).
    const offset = Number(/master_repl_offset:(\d+)/.exec(await p.info("replication"))![1]);
    await waitFor(async () => Number(/slave_repl_offset:(\d+)/.exec(await r.info("replication"))?.[1] ?? 0) >= offset, "the replica to catch up");

    expect(await s.call("SENTINEL", "FAILOVER", "mymaster")).toBe("OK");
    // Done when the sentinel names the replica and has demoted the old primary (which closes its clients' connections).
    await waitFor(async () => ((await s.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster")) as string[])[1] === String(portOf(replica.url)), "the sentinel to name the replica");
    await waitFor(async () => ((await p.call("ROLE")) as string[])[0] === "slave", "the old primary to be demoted");

    for (let i = 0; i < 3; i++) expect(await lesson()).toBe(201);
    expect((await read("/v1/users/sentinel/points/xp")).total).toBe(60);
    // The job queues' workers followed too: their blocking connections (named after their queue by
    // BullMQ) wait on the new primary. (Their keys there prove nothing: replicated before the failover.)
    await waitFor(async () => /name=\{laurel-jobs\}:\S+ .*cmd=bzpopmin/.test(String(await r.call("CLIENT", "LIST"))), "the job queues' workers on the new primary");
    // The stream worker's buckets count all six: its connections followed the failover as well.
    await waitFor(async () => (await summed()) === 6, "the stream worker to apply the six lessons");
    expect(service.output()).not.toContain('"level":50');
    // With sentinels and no REDIS_URL, no redis-server of its own either.
    expect(service.output()).not.toContain("embedded redis-server");

    // The separate worker process takes the sentinels for REDIS_URL too.
    const worker = runService({ REDIS_SENTINELS: `127.0.0.1:${sentinel.port}` }, WORKER);
    await waitFor(() => worker.output().includes("laurel stream worker running"), "the worker to run", worker.exited, worker.output);
    worker.child.kill("SIGTERM");
    expect(await worker.exited).toBe(0);
  });
});

describe("startTestSentinel (test/helpers/redis-server.ts)", () => {
  it("starts on another port when the one found free is taken before it binds it, as the embedded server does (src/redis-child.ts)", async () => {
    const primary = await startTestRedis();
    // Found free, then taken by another Redis before the sentinel binds it: the primary's own.
    const taken = portOf(primary.url);
    const ports = [taken];
    const sentinel = await startTestSentinel(taken, [], "mymaster", { pickPort: async () => ports.shift() ?? (await freePort()) });
    const client = new Redis(sentinel.port, "127.0.0.1");
    try {
      expect(sentinel.port).not.toBe(taken);
      expect(await client.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster")).toEqual(["127.0.0.1", String(taken)]);
      expect(((await client.info("server")).match(/^redis_mode:(\w+)/m) ?? [])[1]).toBe("sentinel");
    } finally {
      client.disconnect();
      await sentinel.stop();
      await primary.stop();
    }
  });
});
