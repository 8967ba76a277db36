import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inject } from "vitest";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { DEMO_YAML, startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { startTestRedis } from "../helpers/redis-server.js";

/**
 * DESIGN: every key carries its `{tenant:shard}` hash tag, so that "the event script is atomic on a
 * single Redis and on Redis Cluster alike". A standalone Redis never checks that: a script may
 * touch any key. A redis-server in cluster mode that holds every slot does check it, on every
 * command and on every key a script touches (CROSSSLOT; "Script attempted to access keys that do
 * not hash to the same slot"), and otherwise serves as the standalone one does. The same calls go
 * to both, under the same tenant id and manual clock: the answers must be identical, and the
 * cluster node must have refused nothing.
 *
 * The tenant is the demo's without its leaderboards: a board's rank count and its run counters
 * read and write keys of every shard from the script of one (README, Operations: Scaling, which
 * lists what still assumes one Redis); everything else must stay in one slot.
 */

const ADMIN = { "x-api-key": "demo-admin-key" };
const USERS = Array.from({ length: 24 }, (_, i) => `user-${i}`);
const ZONES = ["Europe/Paris", "America/New_York", "Asia/Tokyo", "UTC", "Australia/Sydney", "America/Los_Angeles"];

/** config/demo.yaml under `tenantId`, without its leaderboards. */
function tenantWithoutBoards(tenantId: string): string {
  const config = parseYaml(DEMO_YAML) as { tenants: Record<string, unknown>[] };
  const tenant = config.tenants[0]!;
  delete tenant.leaderboards;
  tenant.id = tenantId;
  return stringifyYaml(config);
}

type Reply = { call: string; status: number; body: unknown };

/**
 * Event and boost ids are random (UUID v4; every other id is derived, v5): each becomes its order
 * of first appearance, so a replay must still give its original's id, and a boost's end its own.
 */
function numberRandomIds(replies: Reply[]): string {
  const numbers = new Map<string, string>();
  return JSON.stringify(replies).replace(/[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}/g, (id) => {
    if (!numbers.has(id)) numbers.set(id, `random-${numbers.size}`);
    return numbers.get(id)!;
  });
}

/**
 * Issue 2's engine and every route of the tenant's other rules, over nine days of the manual
 * clock: identify, events of both metrics (with attributes, idempotent replays, deductions past
 * maxPoints), an API achievement, freezes, restores, boosts, a batch, and every read.
 */
async function workload(t: TestApp): Promise<Reply[]> {
  const replies: Reply[] = [];
  const call = async (method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<any> => {
    const res = await t.call(method, path, body, headers);
    replies.push({ call: `${method} ${path}`, ...res });
    return res.body;
  };
  let boostId = "";
  const user = (id: string, i: number) => ({ id, tz: ZONES[i % ZONES.length] });
  for (const [i, id] of USERS.entries()) await call("PUT", `/v1/users/${id}`, { tz: ZONES[i % ZONES.length], name: `User ${i}`, attributes: i % 3 === 0 ? { plan: "pro" } : {} });
  for (let day = 0; day < 9; day++) {
    await t.setClock(new Date(Date.UTC(2026, 10, 23 + day, 12)).toISOString());
    for (const [i, id] of USERS.entries()) {
      // A gap on day 4 for every fifth user: a freeze consumed where one was granted, else a lost streak.
      if (day === 4 && i % 5 === 0) continue;
      const attributes = i % 2 === 0 ? { source: "mobile" } : undefined;
      await call("POST", "/v1/metrics/lessons/event", { user: user(id, i), value: 1 + (i % 3), ...(attributes && { attributes }) }, { "idempotency-key": `lesson-${day}` });
      if (i % 4 === 0) await call("POST", "/v1/metrics/lessons/event", { user: user(id, i), value: 1 }, { "idempotency-key": `lesson-${day}` });
      if (i % 3 === 1) await call("POST", "/v1/metrics/api-calls/event", { user: user(id, i), value: 40 + day });
      if (i % 7 === 2) await call("POST", "/api/metrics/lessons/event", { user: user(id, i), value: -0.5 });
    }
    if (day === 2) {
      await call("POST", "/admin/v1/streaks/freezes", { freezes: USERS.filter((_, i) => i % 10 === 0).map((userId) => ({ userId })) }, ADMIN);
      for (const id of USERS.slice(0, 6)) await call("POST", "/v1/achievements/complete-profile/complete", { user: { id } });
      boostId = (await call("POST", "/admin/v1/points/xp/boosts", { userId: "user-1", name: "Triple", multiplier: 3, start: "2026-11-25T12:00:00Z" }, ADMIN)).id;
    }
    if (day === 4) await call("DELETE", `/admin/v1/points/xp/boosts/${boostId}`, undefined, ADMIN);
    if (day === 5) await call("POST", "/admin/v1/streaks/restore", { users: USERS.filter((_, i) => i % 5 === 0).map((id) => ({ id })) }, ADMIN);
    if (day === 6) {
      await call("POST", "/admin/v1/metrics/events", USERS.slice(0, 8).map((id, i) => ({ key: "lessons", user: user(id, i), value: 2, idempotencyKey: `batch-${i % 3}` })), ADMIN);
      await call("PATCH", "/v1/users/user-2", { attributes: { plan: "pro" } });
      await call("PATCH", "/v1/users/user-2/preferences", { notifications: { streak_reminder: ["email"] } });
    }
  }
  await call("GET", "/admin/v1/points/xp/boosts", undefined, ADMIN);
  for (const id of USERS) {
    for (const system of ["xp", "energy", "coins"]) {
      await call("GET", `/v1/users/${id}/points/${system}?awards=100`);
      await call("GET", `/v1/users/${id}/points/${system}/event-summary?aggregation=daily&startDate=2026-11-20&endDate=2026-12-02`);
      await call("GET", `/v1/users/${id}/points/${system}/boosts`);
    }
    await call("GET", `/v1/users/${id}`);
    await call("GET", `/v1/users/${id}/preferences`);
    await call("GET", `/v1/users/${id}/metrics`);
    await call("GET", `/v1/users/${id}/metrics/lessons/event-summary?aggregation=weekly&startDate=2026-11-16&endDate=2026-12-06`);
    await call("GET", `/v1/users/${id}/achievements?includeIncomplete=true`);
    await call("GET", `/v1/users/${id}/streak?historyPeriods=14`);
    await call("GET", `/v1/users/${id}/wrapped?year=2026`);
  }
  await call("GET", "/v1/users/nobody/points/xp");
  await call("GET", "/v1/achievements");
  await call("GET", `/v1/streaks?userIds=${USERS.join(",")}`);
  await call("GET", "/v1/streaks/rankings?limit=50&type=active");
  await call("GET", "/v1/streaks/rankings?limit=50&type=longest");
  for (const system of ["xp", "energy", "coins"]) {
    await call("GET", `/v1/points/${system}`);
    await call("GET", `/v1/points/${system}/levels`);
    await call("GET", `/v1/points/${system}/boosts`);
    await call("GET", `/v1/points/${system}/summary`);
    await call("GET", `/v1/points/${system}/summary?userAttributes=plan:pro`);
  }
  await call("GET", "/v1/points/xp/level-summary");
  await call("GET", "/v1/leaderboards");
  await call("GET", "/healthz");
  return replies;
}

describe("on a Redis Cluster node (every command's and every script's keys in one slot)", () => {
  const tenantId = uniqueTenantId("cl");
  let clusterServer: Awaited<ReturnType<typeof startTestRedis>>;
  let onCluster: TestApp;
  let standalone: TestApp;

  beforeAll(async () => {
    clusterServer = await startTestRedis({ clusterNode: true });
    const yaml = tenantWithoutBoards(tenantId);
    onCluster = await startTestApp({ yaml, redisUrl: clusterServer.url, manualClock: "2026-11-22T12:00:00Z" });
    standalone = await startTestApp({ yaml, redisUrl: inject("redisUrl"), manualClock: "2026-11-22T12:00:00Z" });
  });

  afterAll(async () => {
    await onCluster?.close();
    await standalone?.close();
    await clusterServer?.stop();
  });

  it("answers every call as a standalone Redis does, and the node refuses none", async () => {
    // The node does check: a command naming two slots is refused (what a script crossing slots meets).
    await expect(onCluster.redis.call("SUNIONSTORE", `{${tenantId}:0}:probe`, `{${tenantId}:0}:a`, `{${tenantId}:1}:b`)).rejects.toThrow(/CROSSSLOT/);
    await onCluster.redis.call("CONFIG", "RESETSTAT");

    const clusterReplies = await workload(onCluster);
    const standaloneReplies = await workload(standalone);

    const errors = String(await onCluster.redis.call("INFO", "errorstats"))
      .split("\r\n")
      .filter((line) => line.startsWith("errorstat_"));
    expect(errors).toEqual([]);
    expect(JSON.parse(numberRandomIds(clusterReplies))).toEqual(JSON.parse(numberRandomIds(standaloneReplies)));

    // The workload did what it is for: scripts ran on every shard, and the calls succeeded.
    const statuses = new Set(clusterReplies.map((r) => r.status));
    expect([...statuses].sort()).toEqual([200, 201, 202, 404]);
    expect(clusterReplies.filter((r) => r.status === 404).map((r) => r.call)).toEqual(["GET /v1/users/nobody/points/xp"]);
    // Every kind of trigger paid (each script that pays points ran: identify, event, completion, time tick).
    const triggerTypes = new Set([...numberRandomIds(clusterReplies).matchAll(/"type":"([a-z_]+)"/g)].map((m) => m[1]));
    expect([...triggerTypes].sort()).toEqual(["achievement", "metric", "streak", "time", "user_creation"]);
    const commands = String(await onCluster.redis.call("INFO", "commandstats"));
    expect(Number(/cmdstat_fcall:calls=(\d+)/.exec(commands)?.[1])).toBeGreaterThan(USERS.length * 9);
    const tags = new Set<string>();
    for (const key of (await onCluster.redis.keys(`{${tenantId}:*`)) as string[]) tags.add(key.slice(0, key.indexOf("}") + 1));
    expect(tags.size).toBe(16);
  });
});
