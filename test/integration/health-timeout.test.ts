import { Redis } from "ioredis";
import { describe, expect, inject, it } from "vitest";
import { portOutsideEphemeralRange } from "../helpers/ports.js";
import { startTestRedis } from "../helpers/redis-server.js";
import { runService, waitFor, WORKER } from "../helpers/service-process.js";

/**
 * LAUREL_HEALTH_TIMEOUT (src/api/health.ts): how long the built service's and the worker's
 * /healthz and /metrics wait for Redis before saying it is down. Redis is stalled with SIGSTOP
 * (it keeps the connections and answers nothing) for as long as the test needs, so the "down"
 * answers come while Redis cannot answer at all, and a service whose bound is an hour shows that
 * the bound set is the one that answered: it has said nothing yet. No elapsed time is measured.
 */

const DOWN = { error: "Redis is not reachable", status: "degraded", redis: "down" };
const REDIS_UP = /^laurel_redis_up\{process="[^"]*"\} (\d)$/m;

describe("LAUREL_HEALTH_TIMEOUT", () => {
  it("bounds /healthz and /metrics by the seconds set, in the service and the worker; a larger bound keeps waiting", async () => {
    const server = await startTestRedis();
    const ports = { short: await portOutsideEphemeralRange(), hour: await portOutsideEphemeralRange(), shortWorker: await portOutsideEphemeralRange(), hourWorker: await portOutsideEphemeralRange() };
    const service = (port: number, seconds: string) => runService({ REDIS_URL: server.url, LAUREL_WORKER: "off", PORT: String(port), LAUREL_HEALTH_TIMEOUT: seconds });
    const worker = (port: number, seconds: string) => runService({ REDIS_URL: server.url, LAUREL_WORKER_PORT: String(port), LAUREL_HEALTH_TIMEOUT: seconds }, WORKER);
    const procs = [
      { port: ports.short, proc: service(ports.short, "0.2"), ready: "laurel listening" },
      { port: ports.hour, proc: service(ports.hour, "3600"), ready: "laurel listening" },
      { port: ports.shortWorker, proc: worker(ports.shortWorker, "0.2"), ready: "laurel stream worker running" },
      { port: ports.hourWorker, proc: worker(ports.hourWorker, "3600"), ready: "laurel stream worker running" },
    ];
    const admin = new Redis(server.url);
    const pid = Number(/process_id:(\d+)/.exec(await admin.info("server"))![1]);
    const get = (port: number, path: string) => fetch(`http://127.0.0.1:${port}${path}`);
    let stopped = false;
    try {
      for (const { port, proc, ready } of procs) {
        await waitFor(() => proc.output().includes(ready), `the process on ${port} to start`, proc.exited, proc.output);
        // Up first (waited for: a 0.2-s bound may pass on a loaded box while Redis answers).
        await waitFor(async () => (await get(port, "/healthz")).status === 200, `/healthz on ${port} to answer 200`);
      }

      process.kill(pid, "SIGSTOP");
      stopped = true;
      // The hour's probes first: they wait for Redis while the 0.2-s processes answer.
      let hourAnswers = 0;
      const hourHealth = [ports.hour, ports.hourWorker].map((port) => get(port, "/healthz").then(async (res) => (hourAnswers++, [res.status, await res.json()])));
      // Eight answers one after another, each given once its 0.2 s have passed with Redis
      // stopped: the hour's probes have waited 1.6 s at least, past the default bound (1 s).
      for (const port of [ports.short, ports.shortWorker]) {
        for (let i = 0; i < 3; i++) {
          const health = await get(port, "/healthz");
          expect([health.status, await health.json()]).toEqual([503, DOWN]);
        }
        const metrics = await get(port, "/metrics");
        expect(metrics.status).toBe(200);
        expect(REDIS_UP.exec(await metrics.text())?.[1]).toBe("0");
      }
      expect(hourAnswers).toBe(0);
      process.kill(pid, "SIGCONT");
      stopped = false;
      // Redis resumed within their hour: their answer is "ok".
      for (const answer of await Promise.all(hourHealth)) expect(answer).toEqual([200, expect.objectContaining({ status: "ok", redis: "ok" })]);
    } finally {
      if (stopped) process.kill(pid, "SIGCONT");
      admin.disconnect();
      for (const { proc } of procs) proc.child.kill("SIGKILL");
      await Promise.all(procs.map(({ proc }) => proc.exited));
      await server.stop();
    }
  });

  it.each([
    ["the service", undefined],
    ["the worker", WORKER],
  ])("stops %s's start, exit 1, naming the variable, when it is not a number of seconds in its range", async (_name, entry) => {
    for (const bad of ["1s", "0", "3600.5", "-1"]) {
      const proc = runService({ PORT: String(await portOutsideEphemeralRange()), REDIS_URL: inject("redisUrl"), LAUREL_HEALTH_TIMEOUT: bad }, entry);
      try {
        expect(await proc.exited, bad).toBe(1);
        const line = proc.output().split("\n").find((l) => l.includes("invalid environment"));
        expect(line, proc.output()).toContain(`LAUREL_HEALTH_TIMEOUT must be a number of seconds above 0 and up to 3600, in digits (got \\"${bad}\\")`);
      } finally {
        proc.child.kill("SIGKILL");
      }
    }
  });
});
