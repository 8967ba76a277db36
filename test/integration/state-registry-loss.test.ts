import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { Redis } from "ioredis";
import { pino } from "pino";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { loadConfigText } from "../../src/config/load.js";
import { TenantKeys } from "../../src/store/keys.js";
import { guardStateSlots } from "../../src/store/slots-guard.js";
import { FIXED_STATE_NAMES, stateNames } from "../../src/store/state-slots.js";
import { freePort } from "../../src/embedded-redis.js";
import { demoConfig, startTestApp } from "../helpers/app.js";
import { commandsDuring } from "../helpers/monitor.js";
import { portOutsideEphemeralRange } from "../helpers/ports.js";
import { startTestRedis } from "../helpers/redis-server.js";
import { callService, runService, waitFor, WORKER, type ServiceProcess } from "../helpers/service-process.js";

/**
 * Redis losing its data under running processes (a restart without AOF, a FLUSHALL, a failover to
 * an empty replica): the state registry {t}:slots is gone while each process still writes users
 * by the positions it read at start (src/store/slots-guard.ts). The built service, on a Redis of
 * this file's own (FLUSHALL, CLIENT KILL).
 *
 * The registry here is an evolved one: a name the config no longer uses sits right after the
 * fixed names, so the config's own names start one later than a fresh registration would put
 * them. (After the fixed names, not at 1: the read scripts find `_x` at 13, where every registry
 * has it: lua/includes/state-read.lua.)
 */
let server: Awaited<ReturnType<typeof startTestRedis>>;
let redis: Redis;
const dirs: string[] = [];
const { yaml, tenantId } = demoConfig();
const [tenant] = loadConfigText(yaml, "demo.yaml", {});
const registry = new TenantKeys(tenantId).slots();
let config: string;

beforeAll(async () => {
  server = await startTestRedis();
  redis = new Redis(server.url);
  const dir = mkdtempSync(join(tmpdir(), "laurel-registry-"));
  dirs.push(dir);
  config = join(dir, "tenant.yaml");
  writeFileSync(config, yaml);
});
afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
  dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true }));
});
beforeEach(async () => {
  await redis.flushall();
});

/** The fixed names at 1..17, then a retired name at 18: the config's other names come from 19. */
async function evolveRegistry(): Promise<void> {
  await redis.hset(registry, ...FIXED_STATE_NAMES.flatMap((name, i) => [name, i + 1]), "m:retired", FIXED_STATE_NAMES.length + 1);
}

/** The registry a process starting on an empty Redis writes: the config's names in order from 1. */
function freshRegistry(): (string | number)[] {
  return stateNames(tenant!).flatMap((name, i) => [name, i + 1]);
}

async function startService(entry?: string): Promise<ServiceProcess & { port: number }> {
  const port = await portOutsideEphemeralRange();
  const dataDir = mkdtempSync(join(tmpdir(), "laurel-registry-data-"));
  dirs.push(dataDir);
  const service = runService({ PORT: String(port), REDIS_URL: server.url, LAUREL_CONFIG: config, LAUREL_DATA_DIR: dataDir, LAUREL_WORKER: "off" }, entry);
  const ready = entry === WORKER ? "laurel stream worker running" : "laurel listening";
  await waitFor(() => service.output().includes(ready), "the process to start", service.exited, service.output);
  return { ...service, port };
}

const call = callService;

const lesson = (port: number, user: string) => call(port, "POST", "/v1/metrics/lessons/event", { user: { id: user, tz: "UTC" }, value: 1 });

/** Redis's data lost under the running processes, and their connections cut (as a restart does): they reconnect. */
async function loseData(...then: (string | number)[]): Promise<void> {
  // One transaction: no check of a running process's can come between the loss and what follows it.
  const multi = redis.multi().flushall();
  if (then.length > 0) multi.hset(registry, ...then);
  await multi.exec();
  await redis.client("KILL", "TYPE", "normal");
}

const stop = async (service: ServiceProcess): Promise<void> => {
  if (service.child.exitCode !== null) return;
  service.child.kill("SIGTERM");
  await service.exited;
};

describe("the state registry after Redis lost its data", () => {
  it("is written back by the running service, and a service started afterwards reads its users alike", async () => {
    await evolveRegistry();
    const a = await startService();
    try {
      expect((await lesson(a.port, "u")).status).toBe(201);
      const positions = await redis.hgetall(registry);
      expect(Number(positions["m:lessons"])).toBeGreaterThan(FIXED_STATE_NAMES.length + 1);

      await loseData();
      // A writes its map back when its connection is ready again.
      await waitFor(async () => isDeepStrictEqual(await redis.hgetall(registry), positions), "the service to restore the registry", a.exited, a.output);
      // A goes on writing by its positions: two lessons for a user the loss took.
      for (let i = 0; i < 2; i++) expect((await lesson(a.port, "u")).status).toBe(201);

      // B starts on the registry A wrote back, not on an empty one (it would number the config from 1).
      const b = await startService();
      try {
        expect(await redis.hgetall(registry)).toEqual(positions);
        expect((await call(b.port, "GET", "/v1/users/u/points/xp")).body.total).toBe(20);
        expect((await call(b.port, "GET", "/v1/users/u/metrics/lessons")).body.current).toBe(2);
        // And the other way: what B writes, A reads.
        const third = await lesson(b.port, "u");
        expect(third.body.points.xp).toMatchObject({ added: 10, total: 30 });
        expect((await call(a.port, "GET", "/v1/users/u/points/xp")).body.total).toBe(30);
        expect((await call(a.port, "GET", "/v1/users/u/metrics/lessons")).body.current).toBe(3);
      } finally {
        await stop(b);
      }
      expect(a.child.exitCode).toBeNull();
    } finally {
      await stop(a);
    }
  });

  it("a service whose positions another process registered differently first exits 1, saying so", async () => {
    await evolveRegistry();
    const a = await startService();
    try {
      expect((await lesson(a.port, "v")).status).toBe(201);
      // The loss, and a process started on the empty Redis before A wrote its map back.
      const fresh = freshRegistry();
      await loseData(...fresh);
      await waitFor(() => a.child.exitCode !== null, "the service to exit");
      expect(a.child.exitCode).toBe(1);
      const fatal = a.output().split("\n").find((line) => line.includes(`the state registry ${registry} changed under this process`));
      expect(fatal).toBeDefined();
      const logged = JSON.parse(fatal!) as { level: number; msg: string; tenant: string; names: string[] };
      expect(logged.level).toBe(60);
      expect(logged.msg).toContain("(Redis lost its data and another process registered first?); exiting so that a restart reads it");
      expect(logged.tenant).toBe(tenantId);
      expect(logged.names.length).toBeGreaterThan(0);
      for (const name of logged.names) expect([...stateNames(tenant!), "m:retired"]).toContain(name);
      // The first process's registry is left whole: A wrote none of its positions into it.
      const expected = Object.fromEntries(stateNames(tenant!).map((name, i) => [name, String(i + 1)]));
      expect(await redis.hgetall(registry)).toEqual(expected);
    } finally {
      await stop(a);
    }
  });

  it("is written back by a stream worker too (dist/worker.js)", async () => {
    await evolveRegistry();
    const worker = await startService(WORKER);
    try {
      const positions = await redis.hgetall(registry);
      await loseData();
      await waitFor(async () => isDeepStrictEqual(await redis.hgetall(registry), positions), "the worker to restore the registry", worker.exited, worker.output);
    } finally {
      await stop(worker);
    }
  });
});

describe("the guard's checks", () => {
  /** An app on the evolved registry with a guard checking every `everyMs`; `exits` counts its calls to exit. */
  async function guarded(everyMs = 20) {
    await evolveRegistry();
    const t = await startTestApp({ yaml, redisUrl: server.url, jobs: false });
    const lines: Array<{ level: number; msg: string }> = [];
    const logger = pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const state = { exits: 0 };
    const guard = guardStateSlots({ redis: t.redis, stores: t.app.tenants.all.map((c) => c.store), logger, exit: () => state.exits++, everyMs });
    const positions = await redis.hgetall(registry);
    return { t, lines, state, positions, close: async () => (guard.stop(), await t.close()) };
  }

  it("writes the registry back as soon as the client reconnects, without waiting for a tick", async () => {
    const g = await guarded(3_600_000);
    try {
      await loseData();
      await waitFor(async () => isDeepStrictEqual(await redis.hgetall(registry), g.positions), "the check on reconnecting to restore the registry");
      expect(g.state.exits).toBe(0);
    } finally {
      await g.close();
    }
  });

  it("writes the registry back after a FLUSHALL, which keeps the connection (the periodic check)", async () => {
    const g = await guarded();
    try {
      await redis.flushall();
      await waitFor(async () => isDeepStrictEqual(await redis.hgetall(registry), g.positions), "the check to restore the registry");
      expect(g.state.exits).toBe(0);
    } finally {
      await g.close();
    }
  });

  it("exits on a conflict it finds", async () => {
    const g = await guarded();
    try {
      await redis.multi().flushall().hset(registry, ...freshRegistry()).exec();
      await waitFor(() => g.state.exits > 0, "the check to find the conflict");
      expect(g.state.exits).toBe(1);
      expect(g.lines.filter((line) => line.level === 60).map((line) => line.msg)).toEqual([
        `the state registry ${registry} changed under this process (Redis lost its data and another process registered first?); exiting so that a restart reads it`,
      ]);
    } finally {
      await g.close();
    }
  });

  it("does not check again on the reconnect a read-only replica's refusal makes (no refuse-reconnect loop)", async () => {
    // No tick in the test: only the reconnects trigger checks.
    const g = await guarded(3_600_000);
    const refused = async (): Promise<number> => Number(/cmdstat_fcall:.*rejected_calls=(\d+)/.exec(await redis.info("commandstats"))?.[1] ?? 0);
    let readies = 0;
    g.t.redis.on("ready", () => readies++);
    try {
      // The registry lost, and the server demoted (a failover to an empty replica): a replica of a
      // primary that is not there keeps its empty data, serves reads and refuses writes (READONLY).
      await redis.flushall();
      await redis.call("REPLICAOF", "127.0.0.1", String(await freePort()));
      const before = await refused();
      const seen = await commandsDuring(server.url, async () => {
        // The connection cut (a restart, a failover): the reconnect's check reads the registry
        // (empty), and its write back is refused READONLY, on which the client reconnects
        // (redis-client.ts reconnectWhenReadOnly): a second ready.
        await redis.client("KILL", "ID", String(await g.t.redis.client("ID")));
        await waitFor(() => readies >= 2, "the reconnect the refusal makes");
        // A check on that ready would have sent its HGETALL then, ahead of this PING on the same
        // connection: once the PING is answered, Redis has run it.
        expect(await g.t.redis.ping()).toBe("PONG");
      });
      const registryReads = seen.commands.filter((args) => args[0]!.toLowerCase() === "hgetall" && args[1] === registry);
      // One check: the first reconnect's. None on the reconnect its refusal made.
      expect(registryReads).toHaveLength(1);
      expect(await refused()).toBe(before + 1);
      expect(readies).toBe(2);
      expect(g.t.redis.status).toBe("ready");
      expect(g.state.exits).toBe(0);
    } finally {
      await redis.call("REPLICAOF", "NO", "ONE");
      await g.close();
    }
  });

  it("takes a check Redis refuses for no conflict, and restores the registry once Redis writes again", async () => {
    const g = await guarded();
    const refused = async (): Promise<number> => Number(/cmdstat_fcall:.*rejected_calls=(\d+)/.exec(await redis.info("commandstats"))?.[1] ?? 0);
    try {
      const before = await refused();
      // The loss, and writes refused from then on (too few replicas): every check fails.
      await redis.multi().flushall().config("SET", "min-replicas-to-write", "1").exec();
      await waitFor(async () => (await refused()) >= before + 3, "three checks refused");
      expect(g.state.exits).toBe(0);
      expect(await redis.exists(registry)).toBe(0);
      await redis.config("SET", "min-replicas-to-write", "0");
      await waitFor(async () => isDeepStrictEqual(await redis.hgetall(registry), g.positions), "the check to restore the registry");
      expect(g.state.exits).toBe(0);
    } finally {
      await redis.config("SET", "min-replicas-to-write", "0");
      await g.close();
    }
  });
});
