import { createServer } from "node:net";
import { hostname } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { portOutsideEphemeralRange } from "../helpers/ports.js";
import { startTestRedis } from "../helpers/redis-server.js";
import { runService, waitFor, WORKER } from "../helpers/service-process.js";

// `node dist/worker.js` with LAUREL_WORKER_PORT: GET /healthz for a probe, GET /metrics for a
// scrape (README, Operations, Stream worker). Redis-servers of this file's own: the first test stops its.

const CORE_TENANT = new URL("../../bench/core-tenant.yaml", import.meta.url).pathname;
let redis: Awaited<ReturnType<typeof startTestRedis>>;
beforeAll(async () => {
  redis = await startTestRedis();
});
afterAll(() => redis?.stop());

describe("the stream worker's own port", () => {
  it("answers /healthz while Redis does, and 503 once it does not; /metrics with the lag and its own process; 404 elsewhere", async () => {
    const ownRedis = await startTestRedis();
    const port = await portOutsideEphemeralRange();
    const proc = runService({ REDIS_URL: ownRedis.url, LAUREL_CONFIG: CORE_TENANT, LAUREL_WORKER_PORT: String(port) }, WORKER);
    try {
      await waitFor(() => proc.output().includes("laurel stream worker running"), "the worker to run", proc.exited, proc.output);
      expect(proc.output()).toContain(`"port":${port}`);
      const url = `http://127.0.0.1:${port}`;
      const health = await fetch(`${url}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toMatchObject({ status: "ok", redis: "ok" });

      const metrics = await fetch(`${url}/metrics`);
      expect(metrics.status).toBe(200);
      expect(metrics.headers.get("content-type")).toContain("text/plain");
      const text = await metrics.text();
      // The lag, read from Redis as any Laurel process reads it: every shard of the tenant.
      for (let shard = 0; shard < 16; shard++) expect(text).toContain(`laurel_stream_pending_entries{tenant="demo",shard="${shard}",group="buckets"} 0`);
      // Its own process, by its own name (host and pid), not the test's.
      const own = `process="${hostname()}-${proc.child.pid}"`;
      expect(text).toContain(`laurel_redis_up{${own}} 1`);
      expect(text).toMatch(new RegExp(`^process_resident_memory_bytes\\{${own}\\} [1-9]\\d*$`, "m"));
      expect(text).toMatch(new RegExp(`^nodejs_eventloop_lag_p99_seconds\\{${own}\\} `, "m"));

      const elsewhere = await fetch(`${url}/v1/users/someone/points/xp`, { headers: { "x-api-key": "demo-key" } });
      expect(elsewhere.status).toBe(404);
      expect(await elsewhere.json()).toEqual({ error: expect.any(String) });

      await ownRedis.stop();
      await waitFor(async () => (await fetch(`${url}/healthz`)).status === 503, "/healthz to say Redis is gone", proc.exited, proc.output);
      expect(await (await fetch(`${url}/healthz`)).json()).toMatchObject({ status: "degraded", redis: "down" });
      // The scrape still answers, with the process's own series.
      const down = await (await fetch(`${url}/metrics`)).text();
      expect(down).toContain(`laurel_redis_up{${own}} 0`);
      expect(down).toContain("process_cpu_seconds_total");

      proc.child.kill("SIGTERM");
      expect(await proc.exited).toBe(0);
    } finally {
      proc.child.kill("SIGKILL");
      await ownRedis.stop();
    }
  });

  it("stops its start, exit 1, on a port another process holds", async () => {
    const port = await portOutsideEphemeralRange();
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(port, "0.0.0.0", resolve));
    const proc = runService({ REDIS_URL: redis.url, LAUREL_CONFIG: CORE_TENANT, LAUREL_WORKER_PORT: String(port) }, WORKER);
    try {
      expect(await proc.exited).toBe(1);
      expect(proc.output()).toContain(`cannot listen on LAUREL_WORKER_PORT ${port} (is the port taken?)`);
      expect(proc.output()).not.toContain("laurel stream worker running");
    } finally {
      proc.child.kill("SIGKILL");
      await new Promise((resolve) => holder.close(resolve));
    }
  });
});
