import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, connect, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ErrorCodes } from "../../src/domain/errors.js";
import { WEBHOOK_GROUP } from "../../src/jobs/webhooks/keys.js";
import { TenantKeys } from "../../src/store/keys.js";
import { demoConfig, startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { portOutsideEphemeralRange } from "../helpers/ports.js";
import { startTestRedis } from "../helpers/redis-server.js";
import { callService, runService, waitFor } from "../helpers/service-process.js";
import { lessonsXpTenantYaml } from "../helpers/tenant-yaml.js";
import { startReceiver } from "../helpers/webhook-receiver.js";

/**
 * A failover behind an address that stays (a managed service's primary endpoint, a virtual IP,
 * a DNS name): the replica is promoted, the old primary is demoted to its replica, and new
 * connections to the address reach the new primary. The service's connection, opened before,
 * still leads to the old one, which now refuses every write (READONLY). Before: every event
 * answered 500 "Internal server error", each logged with its stack, until the process restarted.
 * Now the refused event answers a 503 that says nothing was recorded (the SDK retries it), the
 * client reconnects at once, and the next event reaches the new primary. Reads go on throughout
 * (a replica serves them).
 */

/** A TCP proxy whose upstream can be switched: connections opened before a switch keep theirs. */
class MovingAddress {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  port = 0;

  constructor(private upstream: number) {
    this.server = createServer((client) => {
      const server = connect(this.upstream, "127.0.0.1");
      for (const socket of [client, server]) {
        this.sockets.add(socket);
        socket.on("close", () => this.sockets.delete(socket));
        socket.on("error", () => undefined);
      }
      client.pipe(server).on("close", () => client.destroy());
      server.pipe(client).on("close", () => server.destroy());
      client.on("close", () => server.destroy());
      server.on("close", () => client.destroy());
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.port = (this.server.address() as { port: number }).port;
    return `redis://127.0.0.1:${this.port}`;
  }

  moveTo(upstream: number): void {
    this.upstream = upstream;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

const portOf = (url: string): number => Number(new URL(url).port);

describe("a failover behind the address in REDIS_URL", () => {
  let first: Awaited<ReturnType<typeof startTestRedis>>;
  let second: Awaited<ReturnType<typeof startTestRedis>>;
  let address: MovingAddress;
  let t: TestApp;
  const lines: Array<{ level: number; msg: string; err?: string }> = [];

  beforeAll(async () => {
    first = await startTestRedis();
    second = await startTestRedis();
    address = new MovingAddress(portOf(first.url));
    const url = await address.listen();
    t = await startTestApp({ yaml: demoConfig().yaml, redisUrl: url, jobs: false, logger: pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) }) });
  });

  afterAll(async () => {
    await t?.close();
    await address?.close();
    await first?.stop();
    await second?.stop();
  });

  const lesson = () => t.call("POST", "/v1/metrics/lessons/event", { user: { id: "moved", tz: "UTC" }, value: 1 });
  const xp = async () => (await t.call("GET", "/v1/users/moved/points/xp")).body.total as number;

  it("answers the write the demoted server refused with a 503, then follows the address to the new primary", async () => {
    const primary = new Redis(first.url);
    const replica = new Redis(second.url);
    try {
      // Redis waits 5 s by default before a diskless first sync, for more replicas to join.
      for (const server of [primary, replica]) await server.config("SET", "repl-diskless-sync-delay", "0");
      await replica.replicaof("127.0.0.1", portOf(first.url));
      expect((await lesson()).status).toBe(201);
      // The replica holds the event before the failover. Waited for on the replica itself: a WAIT
      // on this client, which had written nothing, returned as soon as the replica was online,
      // before the write streamed after its first sync reached it (seen on a loaded box).
      await waitFor(async () => (await replica.keys("*:u:moved")).length === 1, "the event on the replica after its first sync");

      // The failover: the replica promoted, the old primary demoted to its replica, the address moved.
      await replica.replicaof("NO", "ONE");
      await primary.replicaof("127.0.0.1", portOf(second.url));
      address.moveTo(portOf(second.url));

      // Reads go on on the demoted server (the connection still leads there).
      expect(await xp()).toBe(10);
      const refused = await lesson();
      expect(refused).toEqual({ status: 503, body: { error: ErrorCodes.REDIS_READ_ONLY.message } });

      // The client reconnected when the write was refused: the next event reaches the new primary.
      const next = await lesson();
      expect(next.status).toBe(201);
      expect(next.body.points.xp.total).toBe(20);
      expect(await xp()).toBe(20);

      // One line says why (throttled, as at maxmemory), and no request is logged as a fault.
      expect(lines.filter((l) => l.msg.startsWith("redis is a read-only replica"))).toHaveLength(1);
      expect(lines.filter((l) => l.msg === "request failed")).toEqual([]);
    } finally {
      primary.disconnect();
      replica.disconnect();
    }
  });
});

/**
 * The same failover under the built service (`node dist/main.js`), for its background consumers:
 * the stream worker (XREAD BLOCK over the shard streams, then its scripts: the daily buckets the
 * event summaries read) and the webhook consumer (XREADGROUP BLOCK over the hook streams, then
 * the POSTs). Each reads on a blocking connection of its own (stream-loop.ts), opened before the
 * failover and so leading to the old primary; events sent after the failover must still reach
 * their buckets and their endpoint. What a demotion does to those connections depends on where
 * the loops are at that instant, so the test runs both moments (the second twice: the demoted
 * server replicating the new primary, and not):
 *
 * - Blocked in their reads (where they spend nearly all their time: BLOCK 2000, 50 ms between).
 *   Redis ends every blocked command with "UNBLOCKED force unblock from blocking operation,
 *   instance state changed (master -> replica?)" AND closes those connections (blocked.c
 *   disconnectAllBlockedClients: CLIENT_CLOSE_AFTER_REPLY), so the loops log a failed turn and
 *   ioredis reconnects them to the address, now the new primary. No code of Laurel's decides it.
 * - Between two reads (driven here: CLIENT UNBLOCK ... TIMEOUT in the same MULTI as the
 *   REPLICAOF, so neither is blocked when the demotion runs). Their connections stay open to the
 *   demoted server and the next read goes there:
 *   - the webhook consumer's XREADGROUP is a write: READONLY, and reconnectWhenReadOnly
 *     (redis-client.ts, on every duplicate of the client) reconnects the blocking connection;
 *     the failed turn drops the groups as known, so the next turn's XGROUP CREATE on the
 *     consumer's own connection (webhooks/index.ts) is refused READONLY too and reconnects that
 *     one; the turn after reads and delivers on the new primary (two 1 s retry pauses);
 *   - the stream worker's XREAD is a read, which a replica serves: it blocks on the demoted
 *     server. Its scripts run on the service's main connection, which reconnected when the event
 *     path's write was refused (READONLY), before any record was written on the new primary.
 *     While the demoted server replicates the new primary (as Sentinel's and the managed
 *     services' failovers leave it), the new primary's XADDs reach it and wake the read. When
 *     its replication is not running (the third case: its link down; a long first sync is the
 *     same while it lasts) nothing wakes it, and before stream-loop.ts leaveReplica the worker
 *     waited there for ever (the event summaries stood still); now its next BLOCK that finds
 *     nothing sees the server is a replica (ROLE) and reconnects to the address.
 */
describe("a failover behind REDIS_URL, under the built service's stream worker and webhook consumer", () => {
  let cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
    cleanups = [];
  });

  /** Two servers (the first the primary), the moving address, a receiver and the service on them, with one tenant whose endpoint wants points.changed. */
  async function startService() {
    const first = await startTestRedis();
    cleanups.push(() => first.stop());
    const second = await startTestRedis();
    cleanups.push(() => second.stop());
    const address = new MovingAddress(portOf(first.url));
    const url = await address.listen();
    cleanups.push(() => address.close());
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    const dir = mkdtempSync(join(tmpdir(), "laurel-failover-"));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const config = join(dir, "tenant.yaml");
    const endpoint = `    webhooks:\n      - { key: main, url: "${receiver.url}", secret: "a-test-secret-0123456789", events: [points.changed] }\n`;
    const tenantId = uniqueTenantId("fo");
    writeFileSync(config, lessonsXpTenantYaml(tenantId, 1, endpoint));
    const port = await portOutsideEphemeralRange();
    const service = runService({ PORT: String(port), REDIS_URL: url, LAUREL_CONFIG: config });
    cleanups.push(async () => {
      service.child.kill("SIGKILL");
      await service.exited;
    });
    await waitFor(() => service.output().includes("laurel listening"), "the service to listen", service.exited, service.output);
    const primary = new Redis(first.url);
    const replica = new Redis(second.url);
    cleanups.push(async () => {
      primary.disconnect();
      replica.disconnect();
    });
    return { first, second, address, receiver, service, port, primary, replica, hookStream: new TenantKeys(tenantId).hookStream(0) };
  }

  const call = callService;

  /**
   * The connections to a server whose last command was the consumers' read: the stream worker's
   * XREAD, the webhook consumer's XREADGROUP (by CLIENT LIST), by command, with their ids and
   * whether they are blocked in it now.
   */
  async function consumerReads(redis: Redis): Promise<Array<{ id: string; cmd: string; blocked: boolean }>> {
    return String(await redis.client("LIST"))
      .split("\n")
      .map((line) => Object.fromEntries(line.split(" ").map((pair) => pair.split("=", 2) as [string, string])))
      .filter((fields) => fields.cmd === "xread" || fields.cmd === "xreadgroup")
      .map((fields) => ({ id: fields.id!, cmd: fields.cmd!, blocked: (fields.flags ?? "").includes("b") }));
  }
  const blockedIn = (reads: Awaited<ReturnType<typeof consumerReads>>, cmd: string) => reads.find((r) => r.cmd === cmd && r.blocked)?.id;

  const cases = [
    { moment: "blocked in their reads", replicating: true },
    { moment: "between two reads", replicating: true },
    { moment: "between two reads", replicating: false },
  ] as const;
  for (const { moment, replicating } of cases) {
    it(`applies and delivers the events written after a failover that finds the consumers ${moment}${replicating ? "" : ", the demoted server not replicating"}`, async () => {
      const { first, second, address, receiver, service, port, primary, replica, hookStream } = await startService();
      const lesson = () => call(port, "POST", "/v1/metrics/lessons/event", { user: { id: "ada", tz: "UTC" }, value: 1 });
      /** Ada's lessons as the stream worker's buckets have them (the system clock: a range around today, so that midnight cannot split it). */
      const summarised = async (): Promise<number | null> => {
        const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
        const res = await call(port, "GET", `/v1/users/ada/metrics/lessons/event-summary?aggregation=daily&startDate=${day(-1)}&endDate=${day(1)}`);
        return res.status === 200 ? res.body.at(-1).total : null;
      };
      /** Distinct points.changed deliveries for ada (a delivery sent twice counts once). */
      const delivered = () => new Set(receiver.received.filter((r) => r.body.type === "points.changed" && r.body.user?.id === "ada").map((r) => r.body.id)).size;
      const waitForStates = async (lessons: number, what: string) => {
        await waitFor(async () => (await summarised()) === lessons, `${lessons} lessons in the event summary ${what}`, service.exited, service.output);
        await waitFor(() => delivered() === lessons, `${lessons} webhooks ${what}`, service.exited, service.output);
      };

      // Redis waits 5 s by default before a diskless first sync, for more replicas to join.
      for (const server of [primary, replica]) await server.config("SET", "repl-diskless-sync-delay", "0");
      await replica.replicaof("127.0.0.1", portOf(first.url));

      // Before the failover: the event applied to the buckets and delivered, the delivery acknowledged.
      expect((await lesson()).status).toBe(201);
      await waitForStates(1, "before the failover");
      await waitFor(async () => ((await primary.xpending(hookStream, WEBHOOK_GROUP)) as [number])[0] === 0, "the delivered record acknowledged");
      // The replica holds all of it: WAIT counts it once it acknowledged this write, and the
      // service's writes came before it in the replication stream.
      await primary.set("failover:mark", "1");
      await waitFor(async () => (await primary.wait(1, 1000)) >= 1, "the replica's first sync"); // each WAIT returns within a second
      // Both consumers blocked on the old primary, waiting for the next record.
      let blocking: { xread?: string; xreadgroup?: string } = {};
      const bothBlocked = async () => {
        const reads = await consumerReads(primary);
        blocking = { xread: blockedIn(reads, "xread"), xreadgroup: blockedIn(reads, "xreadgroup") };
        return blocking.xread !== undefined && blocking.xreadgroup !== undefined;
      };
      await waitFor(bothBlocked, "both consumers blocked in their reads");

      // The failover: the replica promoted, the address moved (a connection opened from now on
      // reaches the new primary), the old primary demoted to the new one's replica, or to the
      // replica of a port nothing listens on (its replication not running: a link down, or a
      // long first sync).
      await replica.replicaof("NO", "ONE");
      address.moveTo(portOf(second.url));
      const upstream = replicating ? portOf(second.url) : await portOutsideEphemeralRange();
      if (moment === "blocked in their reads") {
        await primary.replicaof("127.0.0.1", upstream);
      } else {
        // Their reads end (as a BLOCK's timeout ends them) in the same atomic step as the demotion.
        await primary.multi().client("UNBLOCK", blocking.xread!, "TIMEOUT").client("UNBLOCK", blocking.xreadgroup!, "TIMEOUT").replicaof("127.0.0.1", upstream).exec();
      }

      // The event path: a write on the service's old connection is refused (503, nothing
      // recorded) and the client reconnects; events are sent until one is taken.
      const answers: number[] = [];
      while (answers.at(-1) !== 201 && answers.length < 10) answers.push((await lesson()).status);
      expect(answers.at(-1)).toBe(201);
      expect(answers.slice(0, -1).every((status) => status === 503)).toBe(true);
      expect((await lesson()).status).toBe(201);

      // After the failover: both events reach the buckets and the endpoint.
      await waitForStates(3, "after the failover");
      // And the consumers' reading connections to the demoted server are closed: the stream
      // worker's XREAD, served there while it replicates, leaves after a BLOCK that found nothing.
      const open = async () => String(await primary.client("LIST")).split("\n").map((line) => /^id=(\d+) /.exec(line)?.[1]);
      await waitFor(async () => !(await open()).some((id) => id === blocking.xread || id === blocking.xreadgroup), "the consumers' reading connections to the demoted server to close", service.exited, service.output);
    });
  }
});
