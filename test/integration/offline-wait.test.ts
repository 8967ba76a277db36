import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { ErrorCodes } from "../../src/domain/errors.js";
import { portOutsideEphemeralRange } from "../helpers/ports.js";
import { startTestRedis, startTestSentinel } from "../helpers/redis-server.js";
import { callService, runService, stopRunning, waitFor, type ServiceProcess } from "../helpers/service-process.js";

/**
 * Through Sentinel, a client whose connection to the primary dropped asks the sentinels for the
 * primary again; while none answers, ioredis' connector keeps asking within one connect attempt
 * that never fails, so its maxRetriesPerRequest (counted per failed attempt) never failed the
 * commands waiting for a connection: every request that needed Redis waited for as long as the
 * sentinels stayed away, and the queue grew with each. src/store/offline-wait.ts bounds that
 * wait: past it the request is answered 503, and the command, never sent, is dropped.
 */
describe("requests while no sentinel answers and the connection to the primary dropped", () => {
  const processes: ServiceProcess[] = [];
  const stops: (() => Promise<void>)[] = [];
  afterAll(async () => {
    await stopRunning(processes);
    for (const stop of stops.reverse()) await stop();
  });

  it("are answered 503 instead of waiting for the sentinels, write nothing, and the service recovers with them", async () => {
    const primary = await startTestRedis();
    stops.push(() => primary.stop());
    const primaryPort = Number(new URL(primary.url).port);
    // Started again on this port below: outside the range other tests' connections come from.
    const sentinelPort = await portOutsideEphemeralRange();
    let sentinel = await startTestSentinel(primaryPort, [], "mymaster", { pickPort: async () => sentinelPort });
    stops.push(() => sentinel.stop());
    const port = await portOutsideEphemeralRange();
    const service = runService({ REDIS_SENTINELS: `127.0.0.1:${sentinelPort}`, LAUREL_WORKER: "off", PORT: String(port) });
    processes.push(service);
    await waitFor(() => service.output().includes("laurel listening"), "the service to start", service.exited, service.output);
    const event = (user: string) => callService(port, "POST", "/v1/metrics/lessons/event", { user: { id: user, tz: "UTC" }, value: 1 });
    expect((await event("before")).status).toBe(201);

    await sentinel.stop();
    const admin = new Redis(primary.url);
    try {
      // Every connection of the service's to the primary dropped: it must ask a sentinel again.
      await admin.client("KILL", "TYPE", "normal");
    } catch {
      /* this connection was among them */
    } finally {
      admin.disconnect();
    }
    expect(await event("during")).toEqual({ status: 503, body: { error: ErrorCodes.REDIS_UNREACHABLE.message } });

    sentinel = await startTestSentinel(primaryPort, [], "mymaster", { pickPort: async () => sentinelPort });
    await waitFor(async () => (await event("after")).status === 201, "the service to reach the primary through the sentinel again");
    // The refused request was never sent: its user does not exist.
    expect((await callService(port, "GET", "/v1/users/during/points/xp")).status).toBe(404);
    expect((await callService(port, "GET", "/v1/users/before/points/xp")).body.total).toBe(10);
  });
});
