import { RedisConnection } from "bullmq";
import { Redis } from "ioredis";
import { describe, expect, inject, it } from "vitest";
import { createRedisClient, queueConnection } from "../../src/store/redis-client.js";
import { startTestApp, uniqueTenantId } from "../helpers/app.js";
import { HoldingProxy } from "../helpers/holding-proxy.js";
import { lessonsTenantYaml } from "../helpers/tenant-yaml.js";
import { waitFor } from "../helpers/wait-for.js";
import { startReceiver } from "../helpers/webhook-receiver.js";

/**
 * BullMQ's clients (src/store/redis-client.ts QueueRedis) closed while they wait to connect
 * again. ioredis' disconnect() there clears the wait's timer and closes nothing, so the client
 * never reached "end" (redis/ioredis#1247), and BullMQ's Worker.close() waits for its blocking
 * client's "end" without a bound: a process stopped within that wait after a dropped connection
 * hung in its streak expiry's close, and the webhook consumer's stop after it never ran.
 */
/** A blocking client as a BullMQ worker makes it from the options Laurel gives it, its Redis behind a proxy. */
async function blockingClientBehindProxy(): Promise<{ proxy: HoldingProxy; connection: RedisConnection; client: Redis; close(): Promise<void> }> {
  const proxy = new HoldingProxy(Number(new URL(inject("redisUrl")).port));
  const connection = new RedisConnection(queueConnection(createRedisClient(await proxy.listen(), { lazyConnect: true })), { blocking: true });
  // As a BullMQ worker listens on its connections: the drops the tests make are errors it hears.
  connection.on("error", () => undefined);
  const client = (await connection.client) as unknown as Redis;
  return {
    proxy,
    connection,
    client,
    async close() {
      await connection.close(true);
      await proxy.close();
    },
  };
}

describe("a job queue's client waiting to connect again", () => {
  it("ends when BullMQ disconnects it (its Worker.close waits for that)", async () => {
    const { proxy, connection, client, close } = await blockingClientBehindProxy();
    try {
      expect(client.status).toBe("ready");
      proxy.cut();
      // Redis refuses it: between its attempts the client waits with a timer set, and the
      // disconnect below comes in that state (the check and the call are in one turn).
      await waitFor(() => client.status === "reconnecting", "the client waiting to connect again", undefined, undefined, 5);
      await connection.disconnect(true);
      expect(client.status).toBe("end");
    } finally {
      await close();
    }
  });

  it("fails, when ended, the commands that were on the wire at the drop (kept apart to be sent again)", async () => {
    const { proxy, connection, client, close } = await blockingClientBehindProxy();
    try {
      // A blocking pop that never reaches Redis, on the wire when the connection drops.
      proxy.hold();
      const popped = client.bzpopmin(`laurel-test-stranded-${uniqueTenantId("q")}`, 0).catch((err: Error) => err);
      await waitFor(() => proxy.held().includes("BZPOPMIN") || proxy.held().includes("bzpopmin"), "the pop on the wire");
      proxy.cut();
      // Then a connection that opens and never gets ready (its ready check held): ioredis gives
      // it a command queue of its own, and the pop waits apart, to be sent again once ready.
      await waitFor(() => client.status === "reconnecting", "the client waiting to connect again", undefined, undefined, 5);
      proxy.hold();
      await waitFor(() => client.status === "connect", "a connection that is not ready", undefined, undefined, 5);
      proxy.cut();
      await waitFor(() => client.status === "reconnecting", "the client waiting to connect again", undefined, undefined, 5);
      await connection.disconnect(true);
      expect(client.status).toBe("end");
      expect(await popped).toBeInstanceOf(Error);
    } finally {
      await close();
    }
  });

  it("waits between attempts as the process's own clients do: 50 ms more each time, at most 2 s", async () => {
    const { client, close } = await blockingClientBehindProxy();
    try {
      // Not BullMQ's default (e^n s, at most 20 s): after Redis came back, the job workers sat up to 20 s before reconnecting.
      const wait = client.options.retryStrategy!;
      expect([1, 2, 10, 40, 41, 1000].map((attempt) => wait(attempt))).toEqual([50, 100, 500, 2000, 2000, 2000]);
    } finally {
      await close();
    }
  });
});

describe("a service process whose Redis connections were cut and came back", () => {
  it("closes with its background jobs and webhooks on, without waiting for its clients to reconnect first", async () => {
    const proxy = new HoldingProxy(Number(new URL(inject("redisUrl")).port));
    const receiver = await startReceiver(() => 200);
    const tenantId = uniqueTenantId("qcc");
    const yaml = lessonsTenantYaml(tenantId, { url: receiver.url, events: ["achievement.completed"] });
    const t = await startTestApp({ yaml, redisUrl: await proxy.listen() });
    try {
      expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "q1" }, value: 1 })).status).toBe(201);
      proxy.cut();
      await waitFor(() => proxy.refused >= 3, "the clients trying to connect again");
      proxy.open();
      // Closed at once: the clients still wait out their delay before they connect again.
      // Before, the streak expiry's worker waited here for its blocking client's end forever.
      await t.close();
    } finally {
      await proxy.close();
      await receiver.close();
    }
  });
});
