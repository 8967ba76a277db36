import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRedisClient } from "../../src/store/redis-client.js";
import { beforeBatchWrite } from "../../src/store/write-coalescing.js";
import { startTestRedis } from "../helpers/redis-server.js";

// The process's Redis client corks its socket for one turn of the event loop
// (src/store/write-coalescing.ts). These run on a redis-server of their own, so its read
// counter sees only this file's traffic.
describe("write coalescing", () => {
  let server: Awaited<ReturnType<typeof startTestRedis>>;
  let observer: Redis;

  beforeAll(async () => {
    server = await startTestRedis();
    observer = createRedisClient(server.url, {}, { LAUREL_COALESCE: "off" });
  });
  afterAll(async () => {
    observer.disconnect();
    await server.stop();
  });

  const readsProcessed = async (): Promise<number> => Number(/total_reads_processed:(\d+)/.exec(await observer.info("stats"))![1]);

  it("sends the commands of one turn in one write: Redis reads 200 commands in a few reads, and answers each in order", async () => {
    const redis = createRedisClient(server.url, {}, {});
    await redis.ping(); // connected and ready before the measured turn
    const before = await readsProcessed();
    const replies = await Promise.all(Array.from({ length: 200 }, () => redis.incr("coalesce:n")));
    const after = await readsProcessed();
    expect(replies).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    // One read for the 200 commands (a few at most if the kernel splits the write), plus the
    // observer's own INFO. Without coalescing each command is its own write.
    expect(after - before).toBeLessThanOrEqual(5);
    redis.disconnect();
  });

  it("keeps the order of a write and a read sent in the same turn", async () => {
    const redis = createRedisClient(server.url, {}, {});
    const [, value] = await Promise.all([redis.set("coalesce:k", "v1"), redis.get("coalesce:k")]);
    expect(value).toBe("v1");
    redis.disconnect();
  });

  it("goes on after the connection is killed (the new socket is corked as the old one was)", async () => {
    const redis = createRedisClient(server.url, {}, {});
    const id = (await redis.client("ID")) as number;
    expect(await observer.client("KILL", "ID", String(id))).toBe(1);
    // The client reconnects, and every command of a later turn is answered, in order.
    const replies = await Promise.all(Array.from({ length: 50 }, (_, i) => redis.set(`coalesce:r${i}`, String(i)).then(() => redis.get(`coalesce:r${i}`))));
    expect(replies).toEqual(Array.from({ length: 50 }, (_, i) => String(i)));
    // And the new socket coalesces: a turn of 200 commands is still a few reads.
    const before = await readsProcessed();
    await Promise.all(Array.from({ length: 200 }, () => redis.incr("coalesce:after-kill")));
    expect((await readsProcessed()) - before).toBeLessThanOrEqual(5);
    redis.disconnect();
  });

  it("runs what waits for the batch (beforeBatchWrite) after the turn's commands and before its write: their commands share it", async () => {
    const redis = createRedisClient(server.url, {}, {});
    await redis.ping();
    const before = await readsProcessed();
    const late: Promise<unknown>[] = [];
    // Registered before the turn's commands, run after them: a read sent there sees their writes.
    expect(beforeBatchWrite(redis, () => late.push(redis.get("coalesce:late")))).toBe(true);
    const writes = Promise.all(Array.from({ length: 100 }, () => redis.incr("coalesce:late")));
    // One registered by another at the write runs in the same write too.
    expect(beforeBatchWrite(redis, () => beforeBatchWrite(redis, () => late.push(redis.incr("coalesce:late"))))).toBe(true);
    await writes;
    expect(late).toHaveLength(2);
    expect(await Promise.all(late)).toEqual(["100", 101]);
    expect((await readsProcessed()) - before).toBeLessThanOrEqual(5);
    // A batch opened by beforeBatchWrite alone (no command in the turn) is written too.
    const alone = await new Promise((resolve) => beforeBatchWrite(redis, () => resolve(redis.get("coalesce:late"))));
    expect(alone).toBe("101");
    redis.disconnect();
  });

  it("LAUREL_COALESCE=off leaves ioredis as it is, with no batch to wait for", async () => {
    const redis = createRedisClient(server.url, {}, { LAUREL_COALESCE: "off" });
    const send = Object.getPrototypeOf(redis).sendCommand;
    expect(redis.sendCommand).toBe(send);
    expect(beforeBatchWrite(redis, () => expect.unreachable())).toBe(false);
    redis.disconnect();
  });
});
