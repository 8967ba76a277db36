import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inject } from "vitest";
import { setScriptMode } from "../../src/store/redis-script.js";
import { demoConfig, startTestApp, type TestApp } from "../helpers/app.js";

function withoutLeaderboards(yaml: string): string {
  return yaml.replace(/\n    # Added by the leaderboards issue[\s\S]*$/, "\n");
}
import { commandsDuring as observe } from "../helpers/monitor.js";

/**
 * DESIGN: "ONE EVALSHA on the user's shard". MONITOR on a second connection records every
 * command the service sends while one event (and one metering read) is processed.
 */
let t: TestApp;

/** The service's commands while `action` runs (test/helpers/monitor.ts); the scripts' own in lastLuaCalls. */
async function commandsDuring(action: () => Promise<unknown>): Promise<string[][]> {
  // Only the service's own connection: no other client (e.g. a BullMQ worker) may blur the count.
  const seen = await observe(inject("redisUrl"), action, t.redis);
  lastLuaCalls = seen.luaCalls;
  return seen.commands;
}
let lastLuaCalls: string[] = [];

describe.each([
  ["function", "fcall"],
  ["eval", "evalsha"],
] as const)("one Redis command per request (LAUREL_LUA=%s)", (mode, command) => {
  beforeAll(async () => {
    setScriptMode(mode);
    t = await startTestApp({ manualClock: "2026-03-02T12:00:00Z", jobs: false });
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

  it("a returning user's lesson event runs few commands inside the script, two boards add theirs", async () => {
    await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "steady", tz: "UTC" }, value: 1 });
    await commandsDuring(() => t.call("POST", "/v1/metrics/lessons/event", { user: { id: "steady", tz: "UTC" }, value: 1 }));
    // Per board: move the entry (ZREM, ZADD), count the rank over the 16 shards, log the history.
    const board = ["zrem", "zadd", ...Array<string>(16).fill("zcount"), "lpush"];
    // HMGET state, SET of the writer's record on the shard (lua/includes/call-order.lua: only a
    // call ioredis re-sent reads it first, in both modes), the two demo boards, ZADD points, LPUSH
    // award, HSET state, XADD record.
    expect(lastLuaCalls).toEqual(["hmget", "set", ...board, ...board, "zadd", "lpush", "hset", "xadd"]);
    const plain = await startTestApp({ yaml: withoutLeaderboards(demoConfig().yaml), manualClock: "2026-03-02T12:00:00Z", jobs: false });
    try {
      await plain.call("POST", "/v1/metrics/lessons/event", { user: { id: "steady", tz: "UTC" }, value: 1 });
      const seen = await observe(inject("redisUrl"), () => plain.call("POST", "/v1/metrics/lessons/event", { user: { id: "steady", tz: "UTC" }, value: 1 }), plain.redis);
      // Without boards: HMGET state, the writer's record, ZADD points, LPUSH award, HSET state, XADD record.
      expect(seen.luaCalls).toEqual(["hmget", "set", "zadd", "lpush", "hset", "xadd"]);
    } finally {
      await plain.close();
    }
  });

  it("the metering read is exactly one LRANGE: the newest award carries the total", async () => {
    const commands = await commandsDuring(() => t.call("GET", "/v1/users/mon/points/xp?awards=5"));
    expect(commands.map((c) => c[0]!.toLowerCase())).toEqual(["lrange"]);
  });

  it("a user with no award in the system yet costs one EXISTS more: 0 points, or an unknown user", async () => {
    // "mon" has xp awards but none in coins; "nobody" does not exist.
    let reply: { status: number; body: any } | undefined;
    const zero = await commandsDuring(async () => (reply = await t.call("GET", "/v1/users/mon/points/coins")));
    expect(zero.map((c) => c[0]!.toLowerCase())).toEqual(["lrange", "exists"]);
    expect(reply).toMatchObject({ status: 200, body: { key: "coins", total: 0, level: null, awards: [] } });
    const unknown = await commandsDuring(async () => (reply = await t.call("GET", "/v1/users/nobody/points/xp")));
    expect(unknown.map((c) => c[0]!.toLowerCase())).toEqual(["lrange", "exists"]);
    expect(reply!.status).toBe(404);
  });
});
