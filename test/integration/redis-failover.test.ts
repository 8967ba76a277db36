import { createServer, connect, type Server, type Socket } from "node:net";
import { Redis } from "ioredis";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorCodes } from "../../src/domain/errors.js";
import { demoConfig, startTestApp, type TestApp } from "../helpers/app.js";
import { startTestRedis } from "../helpers/redis-server.js";

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
      // The replica holds the event before the failover (WAIT returns once it has acknowledged it).
      while ((await primary.wait(1, 1000)) < 1) { /* its first sync is still under way */ }
      expect(await replica.keys("*:u:moved")).toHaveLength(1);

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
