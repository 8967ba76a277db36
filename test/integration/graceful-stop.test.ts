import { spawn } from "node:child_process";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../src/embedded-redis.js";
import { startTestRedis } from "../helpers/redis-server.js";

/**
 * A stop (SIGTERM, as a rolling deploy sends) must not cut off a request whose write Redis is
 * about to apply: the client would never learn that its event counted, and a client that retries
 * would count it twice. The service stops accepting connections, answers what it has taken, and
 * only then closes connections and exits.
 *
 * The request is held inside Redis, not timed: CLIENT PAUSE WRITE makes Redis keep the service's
 * event call unanswered, the test waits until Redis shows that call blocked, sends SIGTERM, waits
 * for the service to log that it is stopping, and then lets Redis go on.
 */

const MAIN = new URL("../../dist/main.js", import.meta.url).pathname;
let redis: Awaited<ReturnType<typeof startTestRedis>>;
let observer: Redis;

beforeAll(async () => {
  redis = await startTestRedis();
  observer = new Redis(redis.url);
});
afterAll(async () => {
  observer?.disconnect();
  await redis?.stop();
});

async function until(predicate: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (await predicate()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe("SIGTERM with an event in flight", () => {
  it("answers it before exiting, and takes no new connection meanwhile", async () => {
    const port = await freePort();
    const { REDIS_URL: _omit, ...base } = process.env;
    const child = spawn(process.execPath, [MAIN], {
      env: { ...base, REDIS_URL: redis.url, PORT: String(port), LOG_LEVEL: "info", LAUREL_WORKER: "off" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout!.on("data", (d) => (out += d));
    child.stderr!.on("data", (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      await until(() => out.includes("laurel listening"), "listening");
      const url = `http://127.0.0.1:${port}/v1/metrics/lessons/event`;
      const send = (id: string) => fetch(url, { method: "POST", headers: { "x-api-key": "demo-key", "content-type": "application/json" }, body: JSON.stringify({ user: { id }, value: 1 }) });

      await observer.client("PAUSE", 60_000, "WRITE");
      const inFlight = send("draining");
      await until(async () => /flags=b\b.*cmd=fcall/.test(await observer.client("LIST")), "the event call held by Redis");
      child.kill("SIGTERM");
      await until(() => out.includes('"msg":"stopping"'), "the stop to begin");
      // The listen socket is closed: a new connection is refused while the old request waits.
      await expect(send("late")).rejects.toThrow();
      await observer.client("UNPAUSE");

      const reply = await inFlight;
      expect(reply.status).toBe(201);
      expect(reply.headers.get("connection")).toBe("close");
      expect((await reply.json()).total).toBe(1);
      expect(await exited).toBe(0);
    } finally {
      await observer.client("UNPAUSE").catch(() => undefined);
      child.kill("SIGKILL");
    }
  });
});
