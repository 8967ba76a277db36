import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorCodes } from "../../src/domain/errors.js";
import { HoldingProxy, serviceBehindProxy } from "../helpers/holding-proxy.js";
import { startTestRedis } from "../helpers/redis-server.js";
import { callService, stopRunning, waitFor, type ServiceProcess } from "../helpers/service-process.js";

/**
 * An event on the wire when the Redis connection drops waits to be sent again on the next
 * connection (its reply may have been lost: it then counts once, lost-reply.test.ts). While no
 * connection comes back, it waited without a bound, and only the client's timeout ended its
 * request. LAUREL_RESEND_WAIT bounds that wait (src/store/resend-wait.ts): past it the request is
 * answered 503 (whether it took effect is unknown) and the command is never sent afterwards,
 * so a Redis that comes back later does not apply a request its caller was told failed.
 *
 * The drop is exact, not timed: a proxy between the built service and Redis keeps what the
 * service sends once told to hold, the test waits until the event's command is among it, then
 * the proxy closes every connection and refuses new ones until the test opens it again.
 */

const event = (port: number, user: string) => callService(port, "POST", "/v1/metrics/lessons/event", { user: { id: user, tz: "UTC" }, value: 1 });
const xpOf = (port: number, user: string) => callService(port, "GET", `/v1/users/${user}/points/xp`);

describe("an event on the wire when the Redis connection drops (LAUREL_RESEND_WAIT)", () => {
  let redis: Awaited<ReturnType<typeof startTestRedis>>;
  const processes: ServiceProcess[] = [];
  const proxies: HoldingProxy[] = [];

  beforeAll(async () => {
    redis = await startTestRedis();
  });
  afterAll(async () => {
    await stopRunning(processes);
    for (const proxy of proxies) await proxy.close();
    await redis?.stop();
  });

  const serviceBehindProxyOf = (env: Record<string, string>) => serviceBehindProxy(redis.url, env, { proxies, processes });

  /** Sends `user`'s event, waits until its command is held by the proxy (on the wire), then drops every connection. */
  // The answer is returned in an object: an async function's promise would take on its state.
  async function eventOnTheWireAtADrop(port: number, proxy: HoldingProxy, user: string): Promise<{ answer: Promise<{ status: number; body: any }> }> {
    proxy.hold();
    const answer = event(port, user);
    await waitFor(() => proxy.held().includes(`:u:${user}`), `${user}'s event to be written to Redis`);
    proxy.cut();
    return { answer };
  }

  it("answers 503 once the bound passes without a connection, and never applies it when Redis comes back", async () => {
    const { port, proxy, proc } = await serviceBehindProxyOf({ LAUREL_RESEND_WAIT: "1" });
    expect((await event(port, "resend-before")).status).toBe(201);

    const { answer } = await eventOnTheWireAtADrop(port, proxy, "resend-abandoned");
    // Redis stays out of reach: without the bound this waited until the proxy opened below.
    expect(await answer).toEqual({ status: 503, body: { error: ErrorCodes.REDIS_UNREACHABLE.message } });
    await waitFor(() => proc.output().includes("within LAUREL_RESEND_WAIT"), "the warning that commands were failed");
    const warning = proc
      .output()
      .split("\n")
      .find((line) => line.includes("within LAUREL_RESEND_WAIT"))!;
    expect(JSON.parse(warning)).toMatchObject({ level: 40, connection: "redis", waitedMs: 1000 });

    proxy.open();
    await waitFor(async () => (await xpOf(port, "resend-before")).status === 200, "the service to reach Redis again");
    // The abandoned command was not sent on the new connection: the user was never created.
    expect((await xpOf(port, "resend-abandoned")).status).toBe(404);
    // The caller's retry is the one that counts.
    expect((await event(port, "resend-abandoned")).body.total).toBe(1);
    expect((await xpOf(port, "resend-abandoned")).body.total).toBe(10);
  });

  it("still sends it again, counted once, when a connection comes back within the bound (the default, 60 s)", async () => {
    const { port, proxy, proc } = await serviceBehindProxyOf({});
    expect((await event(port, "resend-kept-before")).status).toBe(201);

    const { answer } = await eventOnTheWireAtADrop(port, proxy, "resend-kept");
    // A connection refused: the service's clients try again, so they saw the drop.
    await waitFor(() => proxy.refused > 0, "the service to try to reconnect");
    proxy.open();
    const { status, body } = await answer;
    expect(status).toBe(201);
    expect(body.total).toBe(1);
    expect((await xpOf(port, "resend-kept")).body.total).toBe(10);
    expect(proc.output()).not.toContain("within LAUREL_RESEND_WAIT");
  });
});
