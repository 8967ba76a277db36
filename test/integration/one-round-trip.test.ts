import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Command, Redis } from "ioredis";
import { setScriptMode } from "../../src/store/redis-script.js";
import { userIdHash } from "../../src/store/keys.js";
import { demoConfig, startTestApp, type TestApp } from "../helpers/app.js";

function withoutLeaderboards(yaml: string): string {
  return yaml.replace(/\n    # Added by the leaderboards issue[\s\S]*$/, "\n");
}
import { commandsDuring as observe } from "../helpers/monitor.js";
import { startTestRedis } from "../helpers/redis-server.js";

/**
 * DESIGN: "ONE EVALSHA on the user's shard". MONITOR on a second connection records every
 * command the service sends while one event (and one metering read) is processed. On a
 * redis-server of this file's own: MONITOR shows the commands run inside scripts as from "lua"
 * whoever sent the script, so on the run's shared server the other files running beside this one
 * put their scripts' commands into the window.
 */
let t: TestApp;
let server: Awaited<ReturnType<typeof startTestRedis>>;
beforeAll(async () => {
  server = await startTestRedis();
});
afterAll(async () => server.stop());

/** The service's commands while `action` runs (test/helpers/monitor.ts); the scripts' own in lastLuaCalls. */
async function commandsDuring(action: () => Promise<unknown>): Promise<string[][]> {
  // Only the service's own connection: no other client (e.g. a BullMQ worker) may blur the count.
  const seen = await observe(server.url, action, t.redis);
  lastLuaCalls = seen.luaCalls;
  return seen.commands;
}
let lastLuaCalls: string[] = [];

/**
 * The order of the commands the service sends on its connection and of their replies while
 * `action` runs: a command sent after another's reply is a second round trip.
 */
async function sendsAndReplies(action: () => Promise<unknown>): Promise<string[]> {
  const order: string[] = [];
  const redis = t.redis;
  const send = redis.sendCommand;
  redis.sendCommand = ((command: Command, stream?: unknown) => {
    const name = command.name.toLowerCase();
    order.push(`send ${name}`);
    command.promise.then(
      () => order.push(`reply ${name}`),
      () => order.push(`error ${name}`),
    );
    return send.call(redis, command, stream as never);
  }) as Redis["sendCommand"];
  try {
    await action();
  } finally {
    redis.sendCommand = send;
  }
  return order;
}

describe.each([
  ["function", "fcall"],
  ["eval", "evalsha"],
] as const)("one Redis command per request (LAUREL_LUA=%s)", (mode, command) => {
  beforeAll(async () => {
    setScriptMode(mode);
    t = await startTestApp({ manualClock: "2026-03-02T12:00:00Z", jobs: false, redisUrl: server.url });
  });
  afterAll(async () => {
    await t.close();
    setScriptMode("function");
  });

  it(`an event is exactly one ${command.toUpperCase()}`, async () => {
    await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "warm", tz: "UTC" }, value: 1 });
    const commands = await commandsDuring(() =>
      t.call("POST", "/v1/metrics/lessons/event", { user: { id: "mon", tz: "Europe/Berlin", email: "m@example.com" }, value: 3 }, { "idempotency-key": "x" }),
    );
    expect(commands.map((c) => c[0]!.toLowerCase())).toEqual([command]);
  });

  it("an event without tz after an identify that moved the zone is one call: the identify tells the process the zone", async () => {
    await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "mover", tz: "Asia/Tokyo" }, value: 1 });
    expect((await t.call("PUT", "/v1/users/mover", { tz: "America/New_York" })).status).toBe(200);
    // Guessed from the event before (Tokyo), the first call missed and a second was sent.
    const commands = await commandsDuring(() => t.call("POST", "/v1/metrics/lessons/event", { user: { id: "mover" }, value: 1 }));
    expect(commands.map((c) => c[0]!.toLowerCase())).toEqual([command]);
  });

  it("a returning user's lesson event runs few commands inside the script, two boards add theirs", async () => {
    await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "steady", tz: "UTC" }, value: 1 });
    await commandsDuring(() => t.call("POST", "/v1/metrics/lessons/event", { user: { id: "steady", tz: "UTC" }, value: 1 }));
    // Per board: move the entry (ZREM, ZADD), count the rank over the 16 shards, see that the
    // board still has room (the run's entries added since the threshold was read: so the place
    // is on it, lua/includes/leaderboards.lua rankOf), log the history.
    const board = ["zrem", "zadd", ...Array<string>(16).fill("zcount"), "hget", "lpush"];
    // HMGET state, SET of the writer's record on the shard (lua/includes/call-order.lua: only a
    // call ioredis re-sent reads it first, in both modes), the two demo boards, ZADD points, LPUSH
    // award, HSET state, XADD record.
    expect(lastLuaCalls).toEqual(["hmget", "set", ...board, ...board, "zadd", "lpush", "hset", "xadd"]);
    const plain = await startTestApp({ yaml: withoutLeaderboards(demoConfig().yaml), manualClock: "2026-03-02T12:00:00Z", jobs: false, redisUrl: server.url });
    try {
      await plain.call("POST", "/v1/metrics/lessons/event", { user: { id: "steady", tz: "UTC" }, value: 1 });
      const seen = await observe(server.url, () => plain.call("POST", "/v1/metrics/lessons/event", { user: { id: "steady", tz: "UTC" }, value: 1 }), plain.redis);
      // Without boards: HMGET state, the writer's record, ZADD points, LPUSH award, HSET state, XADD record.
      expect(seen.luaCalls).toEqual(["hmget", "set", "zadd", "lpush", "hset", "xadd"]);
    } finally {
      await plain.close();
    }
  });

  it("the metering read of a pair the process has seen awards of is exactly one LRANGE: the newest award carries the total", async () => {
    let order: string[] = [];
    const commands = await commandsDuring(async () => (order = await sendsAndReplies(() => t.call("GET", "/v1/users/mon/points/xp?awards=5"))));
    expect(commands.map((c) => c[0]!.toLowerCase())).toEqual(["lrange"]);
    expect(order).toEqual(["send lrange", "reply lrange"]);
  });

  it("other pairs send an EXISTS with the LRANGE, before any reply: one round trip for 0 points, or an unknown user", async () => {
    // "mon" has xp awards but none in coins; "nobody" does not exist.
    let reply: { status: number; body: any } | undefined;
    let order: string[] = [];
    const zero = await commandsDuring(async () => (order = await sendsAndReplies(async () => (reply = await t.call("GET", "/v1/users/mon/points/coins")))));
    expect(zero.map((c) => c[0]!.toLowerCase())).toEqual(["lrange", "exists"]);
    expect(order).toEqual(["send lrange", "send exists", "reply lrange", "reply exists"]);
    expect(reply).toMatchObject({ status: 200, body: { key: "coins", total: 0, level: null, awards: [] } });
    const unknown = await commandsDuring(async () => (order = await sendsAndReplies(async () => (reply = await t.call("GET", "/v1/users/nobody/points/xp")))));
    expect(unknown.map((c) => c[0]!.toLowerCase())).toEqual(["lrange", "exists"]);
    expect(order).toEqual(["send lrange", "send exists", "reply lrange", "reply exists"]);
    expect(reply!.status).toBe(404);
  });

  it("awards this process did not see (an identify's welcome points) cost the EXISTS once, then the LRANGE goes alone", async () => {
    expect((await t.call("PUT", "/v1/users/welcomed", { tz: "UTC" })).status).toBe(200);
    let reply: { status: number; body: any } | undefined;
    const first = await commandsDuring(async () => (reply = await t.call("GET", "/v1/users/welcomed/points/energy")));
    expect(first.map((c) => c[0]!.toLowerCase())).toEqual(["lrange", "exists"]);
    expect(reply!.body.total).toBe(100);
    const second = await commandsDuring(async () => (reply = await t.call("GET", "/v1/users/welcomed/points/energy")));
    expect(second.map((c) => c[0]!.toLowerCase())).toEqual(["lrange"]);
    expect(reply!.body).toMatchObject({ total: 100, awards: [{ awarded: 100, total: 100, trigger: { key: "welcome" } }] });
  });

  it("a pair whose presence bit another pair set, by chance, still answers right: the EXISTS after the LRANGE's reply", async () => {
    const store = t.app.tenants.all[0]!.store;
    for (const user of ["collided", "nobody-collided"]) store.awardPresence.add(store.awardPresenceIndex(userIdHash(user), "coins"));
    expect((await t.call("PUT", "/v1/users/collided", { tz: "UTC" })).status).toBe(200);
    let reply: { status: number; body: any } | undefined;
    let order = await sendsAndReplies(async () => (reply = await t.call("GET", "/v1/users/collided/points/coins")));
    expect(order).toEqual(["send lrange", "reply lrange", "send exists", "reply exists"]);
    expect(reply).toMatchObject({ status: 200, body: { total: 0, awards: [] } });
    order = await sendsAndReplies(async () => (reply = await t.call("GET", "/v1/users/nobody-collided/points/coins")));
    expect(order).toEqual(["send lrange", "reply lrange", "send exists", "reply exists"]);
    expect(reply!.status).toBe(404);
  });
});
