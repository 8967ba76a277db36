import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorCodes } from "../../src/domain/errors.js";
import { HoldingProxy, serviceBehindProxy } from "../helpers/holding-proxy.js";
import { startTestRedis } from "../helpers/redis-server.js";
import { callService, stopRunning, waitFor, type ServiceProcess } from "../helpers/service-process.js";
import { lessonsTenantYaml } from "../helpers/tenant-yaml.js";

/**
 * The webhook admin API's replays write through the delivery queue's BullMQ client. That client
 * was BullMQ's own, made from connection options, and had neither of the bounds the event path's
 * clients have: a replay sent while Redis was out of reach waited in its offline queue through
 * BullMQ's reconnect schedule (1 s, 2.7 s, 7.4 s, then 20 s apart, twenty times: ~6 minutes), and
 * one on the wire when the connection dropped waited for as long as no connection came back. Both
 * are now the event path's: the delivery queues use a client of the process's kind
 * (redis-client.ts duplicateClient: offline-wait.ts, LAUREL_RESEND_WAIT).
 *
 * The drop is exact, not timed (holding-proxy.ts): the test waits until the replay's command was
 * written before it cuts the connection.
 */

const TENANT = "hooks-redis-down";
const UNKNOWN = "no-such-delivery.main";

const admin = (port: number, method: string, path: string, body?: unknown) => callService(port, method, path, body, "demo-admin-key");
const replay = (port: number) => admin(port, "POST", `/admin/v1/webhooks/deliveries/${UNKNOWN}/replay`);
const notFound = { status: 404, body: { error: expect.stringContaining(UNKNOWN) } };
const unreachable = { status: 503, body: { error: ErrorCodes.REDIS_UNREACHABLE.message } };

describe("the webhook admin API's replays while Redis is out of reach", () => {
  let redis: Awaited<ReturnType<typeof startTestRedis>>;
  let config: string;
  const processes: ServiceProcess[] = [];
  const proxies: HoldingProxy[] = [];

  beforeAll(async () => {
    redis = await startTestRedis();
    config = join(mkdtempSync(join(tmpdir(), "laurel-hooks-down-")), "tenant.yaml");
    // The endpoint is never called: no event is sent.
    writeFileSync(config, lessonsTenantYaml(TENANT, { url: "http://127.0.0.1:9/hooks", events: ["achievement.completed"] }));
  });
  afterAll(async () => {
    await stopRunning(processes);
    for (const proxy of proxies) await proxy.close();
    await redis?.stop();
  });

  /** The built service (its deliveries queued, not sent: no worker) on a proxy of its own to the test's Redis, answering a replay. */
  async function serviceBehindProxyOf(env: Record<string, string>): Promise<{ port: number; proxy: HoldingProxy; proc: ServiceProcess }> {
    const started = await serviceBehindProxy(redis.url, { LAUREL_CONFIG: config, LAUREL_DELIVERIES: "off", ...env }, { proxies, processes });
    expect(await replay(started.port)).toMatchObject(notFound);
    return started;
  }

  it("answers 503 within a few seconds when no connection can be made, and answers again once one can", async () => {
    const { port, proxy } = await serviceBehindProxyOf({});
    proxy.cut();
    // Without the bound this waited for BullMQ's twentieth reconnect attempt, minutes away.
    expect(await replay(port)).toEqual(unreachable);
    expect(await admin(port, "POST", "/admin/v1/webhooks/deliveries/replay", { status: "dead" })).toEqual(unreachable);
    proxy.open();
    await waitFor(async () => (await replay(port)).status === 404, "the replay to reach Redis again");
  });

  it("answers 503 once LAUREL_RESEND_WAIT passes for a replay on the wire when the connection dropped", async () => {
    const { port, proxy, proc } = await serviceBehindProxyOf({ LAUREL_RESEND_WAIT: "1" });
    proxy.hold();
    const answer = replay(port);
    await waitFor(() => proxy.held().includes(UNKNOWN), "the replay's command to be written to Redis");
    proxy.cut();
    // Without the bound this waited until the proxy opened.
    expect(await answer).toEqual(unreachable);
    await waitFor(() => proc.output().includes("within LAUREL_RESEND_WAIT"), "the warning that commands were failed");
    proxy.open();
    await waitFor(async () => (await replay(port)).status === 404, "the replay to reach Redis again");
  });
});
