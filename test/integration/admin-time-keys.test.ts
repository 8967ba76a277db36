import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sweepExpiredStreaks } from "../../src/jobs/streak-expiry.js";
import { runTimeTrigger } from "../../src/jobs/time-triggers.js";
import { shardOf } from "../../src/store/keys.js";
import type { TenantStore } from "../../src/store/tenant-store.js";
import { startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { commandsDuring, hashTagOf, keysOfCall, type Observed } from "../helpers/monitor.js";
import { startTestRedis } from "../helpers/redis-server.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";

/**
 * lua/streakAdmin-9.lua (freezes, a restore, the expiry sweep's settle) and lua/timeTick-4.lua
 * on Redis Cluster (DESIGN.md: every key a script touches is passed in KEYS, all of one slot), as
 * read-plan-keys.test.ts checks the read plan: MONITOR shows every key each call touched, and
 * each must be among that call's declared keys, all under the shard's hash tag, but for what the
 * scripts' headers name as undeclarable: the time tick's due users' own keys, learned from the
 * due set inside the call. The tenant has no leaderboards (a board's rank count crosses shards:
 * README, Operations: Scaling) and one webhook endpoint, so that the records go to the hook
 * stream too; no background jobs (nothing is delivered; the sweep and the tick are run here).
 * Its own redis-server: MONITOR sees every client.
 */
const ADMIN = { "x-api-key": "demo-admin-key" };
const SHARDS = 2;
/** Two users on each shard (a tick's call is a shard's), "ada" first. */
const USERS = ((): string[] => {
  const byShard: string[][] = [[], []];
  for (let i = 0; byShard.some((ids) => ids.length < 2); i++) {
    const id = i === 0 ? "ada" : `user-${i}`;
    const shard = shardOf(id, SHARDS);
    if (byShard[shard]!.length < 2) byShard[shard]!.push(id);
  }
  return byShard.flat().sort((a, b) => (a === "ada" ? -1 : b === "ada" ? 1 : 0));
})();
const tenantId = uniqueTenantId("ak");
const yaml = tenantYaml(
  tenantId,
  `
    shards: ${SHARDS}
    metrics: [{ key: lessons, name: Lessons }]
    points:
      - key: coins
        name: Coins
        triggers:
          - { key: daily-allowance, type: time, unit: day, interval: 1, points: 5 }
          - { key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 1 }
    streak:
      frequency: daily
      metrics: [{ metric: lessons, threshold: 1 }]
      freezes: { initial: 0, max: 2 }
    attributes:
      user: [plan]
    webhooks:
      - { key: main, url: "http://127.0.0.1:9/hooks", secret: "a-test-secret-0123456789", events: [streak.lost, streak.freeze_consumed, streak.started, points.changed] }
`,
);

let server: Awaited<ReturnType<typeof startTestRedis>>;
let t: TestApp;
let store: TenantStore;

beforeAll(async () => {
  server = await startTestRedis();
  t = await startTestApp({ yaml, redisUrl: server.url, manualClock: "2026-11-02T12:00:00Z", jobs: false });
  store = t.app.tenants.all[0]!.store;
  for (const id of USERS) expect((await t.call("PUT", `/v1/users/${id}`, { tz: "UTC", attributes: { plan: "pro" } })).status).toBe(200);
  // A streak of three days for everyone.
  for (let day = 2; day <= 4; day++) {
    await t.setClock(`2026-11-0${day}T12:00:00Z`);
    for (const id of USERS) expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id }, value: 1 })).status).toBe(201);
  }
});

afterAll(async () => {
  await t?.close();
  await server?.stop();
});

/** The calls of `functionName` among those seen: each call's declared keys and the keys it touched. */
function callsOf(seen: Observed, functionName: string): { declared: string[]; args: string[]; touched: string[] }[] {
  return seen.scriptCalls
    .filter(({ call }) => call[1] === functionName)
    .map(({ call, touched }) => ({ ...keysOfCall(call), touched: touched.map((command) => command[1]!) }));
}

describe("lua/streakAdmin-9.lua's keys", () => {
  it("a freeze grant, the sweep's settle (a freeze consumed, a streak lost, an orphan) and a restore touch only declared keys of the user's slot", async () => {
    const fn = store.tenantScripts.streakAdmin.functionName;
    const calls: ReturnType<typeof callsOf> = [];
    const observe = async (action: () => Promise<unknown>) => calls.push(...callsOf(await commandsDuring(server.url, action), fn));

    await observe(async () => expect((await t.call("POST", "/admin/v1/streaks/freezes", { freezes: [{ userId: "ada" }] }, ADMIN)).status).toBe(200));
    // 5 and 6 November missed: ada's freeze covers the 5th and her streak is lost with the 6th;
    // the others' are lost. An orphan in the deadline index (no state) is cleared by the sweep.
    await t.redis.zadd(store.keys.streakDeadline(store.shard("ghost")), 1, "ghost");
    await t.setClock("2026-11-07T12:00:00Z");
    await observe(async () => expect(await sweepExpiredStreaks(store, t.clock.now())).toBeGreaterThan(0));
    await observe(async () => expect((await t.call("POST", "/admin/v1/streaks/restore", { users: USERS.map((id) => ({ id })) }, ADMIN)).status).toBe(200));

    // Every op ran, for every user and the orphan.
    const ops = calls.map((c) => c.args[3]);
    expect(new Set(ops)).toEqual(new Set(["freeze", "settle", "restore"]));
    expect(ops.filter((op) => op === "restore")).toHaveLength(USERS.length);
    expect(ops.filter((op) => op === "settle").length).toBeGreaterThanOrEqual(USERS.length + 1);
    const touched = new Set<string>();
    for (const call of calls) {
      for (const key of call.touched) {
        expect(call.declared).toContain(key);
        // Its role: the name after the hash tag, a user id or a writer's number as a placeholder.
        const user = [...USERS, "ghost"].find((id) => key.endsWith(`:${id}`));
        touched.add(key.slice(key.indexOf("}") + 2, user ? -user.length - 1 : undefined).replace(/^wr:\d+$/, "wr") + (user ? ":<user>" : ""));
      }
      expect(new Set(call.declared.map(hashTagOf)).size).toBe(1);
      // No key among the arguments but ARGV[1], the prefix that only the leaderboards' include reads.
      expect(call.args.slice(1).filter((arg) => arg.startsWith("{"))).toEqual([]);
    }
    // The keys the script and its includes named from the prefix before, each touched here but
    // {t:s}:sb (declared: written by storeStreak only above the state's longest, which a restore
    // to a length the history holds never is).
    expect([...touched].sort()).toEqual(["sa", "sd", "sh:<user>", "u:<user>", "wr", "x", "xh"].sort());
    expect(await t.redis.zscore(store.keys.streakDeadline(store.shard("ghost")), "ghost")).toBeNull();
    expect((await t.call("GET", `/v1/users/${USERS[1]}/streak`)).body.length).toBe(3);
  });
});

describe("lua/timeTick-4.lua's keys", () => {
  it("touches only declared keys of the shard's slot, but its due users' own keys, which it learns from the due set", async () => {
    const fn = store.tenantScripts.timeTick.functionName;
    await t.setClock("2026-11-09T12:00:00Z");
    let paid = 0;
    const seen = await commandsDuring(server.url, async () => {
      paid = await runTimeTrigger(store, 1, t.clock.now());
    });
    expect(paid).toBe(USERS.length);
    const calls = callsOf(seen, fn);
    expect(calls).toHaveLength(SHARDS);
    const undeclared = new Set<string>();
    for (const call of calls) {
      const tag = hashTagOf(call.declared[0]!);
      expect(new Set(call.declared.map(hashTagOf))).toEqual(new Set([tag]));
      // The due users' state hashes, award lists and group totals: named in the header as what the
      // call cannot declare (their ids are read from the due set inside it).
      const dueUsers = USERS.filter((id) => store.keys.prefix(store.shard(id)) === `${tag}:`);
      const usersKeys = new Set(dueUsers.flatMap((id) => [store.keys.user(store.shard(id), id), store.keys.awards(store.shard(id), "coins", id), store.keys.attributePoints(store.shard(id), "coins", "plan", "pro")]));
      for (const key of call.touched) {
        expect(hashTagOf(key)).toBe(tag);
        if (call.declared.includes(key)) continue;
        expect(usersKeys).toContain(key);
        undeclared.add(key);
      }
      expect(call.args.slice(1).filter((arg) => arg.startsWith("{"))).toEqual([]);
      expect(call.declared).toEqual([store.keys.stream(store.shard(dueUsers[0]!)), store.keys.hookStream(store.shard(dueUsers[0]!)), store.keys.timeDue(store.shard(dueUsers[0]!), "coins", "daily-allowance"), store.keys.pointsZset(store.shard(dueUsers[0]!), "coins")]);
      // Each declared key was used: the due set read, the total and the records written.
      for (const key of call.declared) expect(call.touched).toContain(key);
    }
    // Each user's hash and award list, and each shard's one group total (plan=pro).
    expect(undeclared.size).toBe(2 * USERS.length + SHARDS);
  });
});
