import { EventEmitter } from "node:events";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Worker } from "bullmq";
import { createRedisClient, queueConnection } from "../../src/store/redis-client.js";
import { sentinelOptions } from "../../src/store/redis-sentinel.js";
import { watchFirstConnection } from "../../src/store/redis-first-connection.js";
import { startTestRedis } from "../helpers/redis-server.js";
import { startTlsRedis, type TlsRedis } from "../helpers/tls-redis.js";

/**
 * The orders of events a loaded box brings about, played in the order that failed there (the
 * two flakes of the TLS client-certificate tests), so that no timing decides them: the start's
 * PING bound met between a connection's TLS alert and its close, and a socket's second error.
 */

describe("the first connection's watch (store/redis-first-connection.ts)", () => {
  let mtls: TlsRedis;
  beforeAll(async () => {
    mtls = await startTlsRedis({ authClients: true });
  });
  afterAll(async () => {
    await mtls?.stop();
  });

  it("asks over TLS 1.2 when a command's bound is met after the alert and before the close", async () => {
    // A client as ioredis shows it to the watch: its options, its TLS socket, its events.
    const client = Object.assign(new EventEmitter(), { options: { host: "localhost", port: mtls.port, tls: {} }, stream: { encrypted: true } });
    const watch = watchFirstConnection(client as unknown as Redis);
    try {
      client.emit("connect");
      client.emit("error", Object.assign(new Error("tlsv13 alert certificate required"), { code: "ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED" }));
      // No "close" yet: it comes a turn of the event loop later, after the bound's rejection.
      const refusal = await watch.refusal(new Error("no answer within 1000 ms"));
      expect(refusal?.line).toBe(
        `Redis at localhost:${mtls.port} requires a TLS client certificate (ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE: its tls-auth-clients); set LAUREL_REDIS_TLS_CERT and LAUREL_REDIS_TLS_KEY to a certificate signed by a CA the server trusts (its tls-ca-cert-file) and its key`,
      );
    } finally {
      watch.stop();
    }
  });
});

/**
 * A client's socket emits the two errors of a refused TLS client certificate, the alert and then
 * the reset, as a TLS socket emits them: an "error" nobody hears throws from emit(), and ioredis
 * hears the first only.
 */
function expectBothErrorsTaken(client: Redis): void {
  const stream = client.stream;
  expect(() => {
    stream.emit("error", Object.assign(new Error("tlsv13 alert certificate required"), { code: "ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED" }));
    stream.emit("error", Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }));
  }).not.toThrow();
}

describe("a client's socket (store/redis-client.ts)", () => {
  let server: Awaited<ReturnType<typeof startTestRedis>>;
  beforeAll(async () => {
    server = await startTestRedis();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("takes a second error without ending the process (ioredis hears the first only): a TLS alert, then the reset", async () => {
    const redis = createRedisClient(server.url, { maxRetriesPerRequest: 0, retryStrategy: () => null });
    const errors: string[] = [];
    redis.on("error", (err: Error) => errors.push(err.message));
    try {
      expect(await redis.ping()).toBe("PONG");
      expectBothErrorsTaken(redis);
      expect(errors).toEqual(["tlsv13 alert certificate required"]);
    } finally {
      redis.disconnect();
    }
  });

  it("takes it on the clients ioredis makes to ask the sentinels (inside its connector, out of the client's reach)", async () => {
    const { port } = new URL(server.url);
    // A client through sentinels, as the start makes one; lazy: it never asks them here.
    const redis = createRedisClient(undefined, { ...sentinelOptions({ REDIS_SENTINELS: `127.0.0.1:${port}` }), lazyConnect: true });
    // The connector ioredis made from the client's options, and a client of the kind its
    // address lookup makes (any Redis serves for a connection: no sentinel command is sent).
    const connector = (redis as unknown as { connector: { connectToSentinel(endpoint: { host: string; port: number }): Redis } }).connector;
    const asker = connector.connectToSentinel({ host: "127.0.0.1", port: Number(port) });
    asker.on("error", () => undefined); // as ioredis' own lookup does
    try {
      expect(await asker.ping()).toBe("PONG");
      expectBothErrorsTaken(asker);
    } finally {
      asker.disconnect();
      redis.disconnect();
    }
  });

  it("takes it on the job queues' own connections too (BullMQ's, made from queueConnection's options)", async () => {
    const redis = createRedisClient(server.url);
    // A worker's blocking connection, as the streak expiry's and the webhooks' workers make one.
    const worker = new Worker("first-connection-order", async () => undefined, { connection: queueConnection(redis), prefix: "{laurel-test}", autorun: false });
    worker.on("error", () => undefined);
    try {
      await worker.waitUntilReady();
      const backend = worker.getBackend();
      // Its connection for commands, and its blocking one (a connection of its own, made by BullMQ).
      for (const client of [await backend.client, await backend.blockingClient]) {
        expectBothErrorsTaken(client as unknown as Redis);
      }
    } finally {
      await worker.close(true);
      redis.disconnect();
    }
  });
});
