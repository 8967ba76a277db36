import { Redis } from "ioredis";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { prometheusHandler } from "../../src/api/prometheus.js";
import { loadConfigText } from "../../src/config/load.js";
import { RequestStats } from "../../src/http/request-stats.js";
import { startTestApp, TEST_HEALTH_TIMEOUT_MS, uniqueTenantId } from "../helpers/app.js";
import { commandsDuring } from "../helpers/monitor.js";
import { startTestRedis } from "../helpers/redis-server.js";
import { waitFor } from "../helpers/service-process.js";
import { lessonsTenantYaml } from "../helpers/tenant-yaml.js";

/**
 * GET /metrics while the Redis connection is not ready (src/api/prometheus.ts): answered at once
 * with this process's own series and `laurel_redis_up 0`, without the series read from Redis and
 * without sending Redis a command (a command sent then would wait in the client's queue for the
 * connection, up to LAUREL_HEALTH_TIMEOUT). (read-deadline.test.ts covers a Redis that keeps
 * the connection and answers nothing: the scrape's own bound.)
 */

const REDIS_SERIES = /^laurel_(?:stream_[a-z_]+|webhook_deliveries)\{/m;
const LEFT_OUT = "GET /metrics: the series read from Redis were left out";

describe("GET /metrics while the Redis connection is down", () => {
  it("answers 200 with laurel_redis_up 0 and this process's own series, without trying Redis's", async () => {
    const server = await startTestRedis();
    const lines: Array<{ level: number; msg: string }> = [];
    const logger = pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const tenantId = uniqueTenantId();
    const yaml = lessonsTenantYaml(tenantId, { url: "http://127.0.0.1:9/hooks", events: ["points.level_changed"] });
    const t = await startTestApp({ yaml, redisUrl: server.url, jobs: false, logger });
    try {
      expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "u", tz: "UTC" }, value: 1 })).status).toBe(201);
      const up = await t.call("GET", "/metrics", undefined, {});
      expect(up.status).toBe(200);
      expect(up.body).toMatch(/^laurel_redis_up\{process="[^"]*"\} 1$/m);
      expect(up.body).toMatch(new RegExp(`^laurel_stream_entries\\{tenant="${tenantId}",shard="0",group="buckets"\\} 1$`, "m"));
      expect(up.body).toMatch(new RegExp(`^laurel_stream_entries\\{tenant="${tenantId}",shard="0",group="webhooks"\\} \\d+$`, "m"));

      // Redis gone: the client's connection down (reconnecting).
      await server.stop();
      await waitFor(() => t.redis.status !== "ready", "the connection to go down");
      const down = await t.call("GET", "/metrics", undefined, {});
      expect(down.status).toBe(200);
      expect(down.body).toMatch(/^laurel_redis_up\{process="[^"]*"\} 0$/m);
      expect(down.body).not.toMatch(REDIS_SERIES);
      // This process's own series, as before Redis went: the event's answer.
      expect(down.body).toMatch(/^laurel_http_requests_total\{process="[^"]*",method="POST",route="\/v1\/metrics\/:key\/event",status="201"\} 1$/m);
      // The reads were not tried: a read sent on the down connection can only fail (or wait out
      // the scrape's bound), and a failed read is said (the first time) before the answer.
      expect(lines.filter((l) => l.msg === LEFT_OUT)).toEqual([]);
      expect(t.redis.status).not.toBe("ready");
    } finally {
      await t.close();
      await server.stop().catch(() => undefined);
    }
  });

  it("sends Redis no command while its client is not ready, though the server answers", async () => {
    const server = await startTestRedis();
    const tenants = loadConfigText(lessonsTenantYaml(uniqueTenantId()), "test.yaml", {});
    // A client not connected yet (lazyConnect: status "wait"), to a server that answers: any
    // command would connect it and be answered (laurel_redis_up 1).
    const client = new Redis(server.url, { lazyConnect: true });
    const lines: Array<{ msg: string }> = [];
    // The bound never decides here: the client is not ready, then Redis answers (TEST_HEALTH_TIMEOUT_MS).
    const handler = prometheusHandler(client, tenants, null, new RequestStats(), pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) }), TEST_HEALTH_TIMEOUT_MS);
    try {
      let body = "";
      const seen = await commandsDuring(server.url, async () => {
        const reply = await handler();
        expect(reply.status).toBe(200);
        body = reply.body as string;
      });
      expect(body).toMatch(/^laurel_redis_up\{process="[^"]*"\} 0$/m);
      expect(body).not.toMatch(REDIS_SERIES);
      expect(seen.commands).toEqual([]);
      expect(client.status).toBe("wait");
      expect(lines).toEqual([]);
      // Once ready, the same handler reads Redis.
      await client.connect();
      const seenReady = await commandsDuring(server.url, async () => {
        body = (await handler()).body as string;
      });
      expect(body).toMatch(/^laurel_redis_up\{process="[^"]*"\} 1$/m);
      expect(seenReady.commands.length).toBeGreaterThan(0);
    } finally {
      client.disconnect();
      await server.stop();
    }
  });
});
