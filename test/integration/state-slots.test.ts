import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfigText } from "../../src/config/load.js";
import { TenantKeys, shardOf } from "../../src/store/keys.js";
import { createRedisClient } from "../../src/store/redis-client.js";
import { loadLua } from "../../src/store/lua-loader.js";
import { runScript } from "../../src/store/redis-script.js";
import { FIXED_STATE_NAMES, registerStateSlots, restoreStateSlots, stateNames, StateSlots } from "../../src/store/state-slots.js";
import { demoConfig, startTestApp, type TestApp } from "../helpers/app.js";
import { startTestRedis } from "../helpers/redis-server.js";

// The user's state `s` is a msgpack array whose positions come from the tenant's registry
// {t}:slots (src/store/state-slots.ts). These run on a redis-server of their own.
let server: Awaited<ReturnType<typeof startTestRedis>>;
let redis: Redis;
beforeAll(async () => {
  server = await startTestRedis();
  redis = createRedisClient(server.url);
});
afterAll(async () => {
  redis.disconnect();
  await server.stop();
});

/** `s` of a user, decoded in Redis and sent back as JSON (arrays stay arrays, false stays false). */
async function storedState(tenantId: string, userId: string): Promise<{ raw: Buffer; value: unknown }> {
  const key = new TenantKeys(tenantId).user(shardOf(userId, 16), userId);
  const raw = (await redis.hgetBuffer(key, "s"))!;
  const json = (await redis.eval("return cjson.encode(cmsgpack.unpack(redis.call('HGET', KEYS[1], 's')))", 1, key)) as string;
  return { raw, value: JSON.parse(json) };
}

const isArrayBlob = (raw: Buffer): boolean => (raw[0]! & 0xf0) === 0x90 || raw[0] === 0xdc || raw[0] === 0xdd;

/** A config like the demo, plus one metric and a trigger on it (names the demo does not have). */
function withQuizzes(yaml: string): string {
  return yaml
    .replace("      - key: api-calls\n        name: API calls\n", "      - key: api-calls\n        name: API calls\n      - key: quizzes\n        name: Quizzes\n")
    .replace("    points:\n      - key: xp\n        name: XP\n        triggers:\n", "    points:\n      - key: xp\n        name: XP\n        triggers:\n          - { key: quiz-done, type: metric, metric: quizzes, threshold: 1, points: 3 }\n");
}

describe("the state slots registry", () => {
  it("gives the fixed names the first indexes, keeps every index when a config adds names, and never reuses one", async () => {
    const { yaml, tenantId } = demoConfig();
    const [demo] = loadConfigText(yaml, "a.yaml", {});
    const [more] = loadConfigText(withQuizzes(yaml), "b.yaml", {});
    const keys = new TenantKeys(tenantId);
    const first = await registerStateSlots(redis, keys, demo!);
    FIXED_STATE_NAMES.forEach((name, i) => expect(first.index(name)).toBe(i + 1));
    // The read scripts find `_x` at 13 without being told (lua/includes/state-read.lua).
    expect(first.index("_x")).toBe(13);
    expect(first.size).toBe(stateNames(demo!).length);
    const second = await registerStateSlots(redis, keys, more!);
    for (const [name, index] of first.byName) expect(second.index(name)).toBe(index);
    expect(second.index("m:quizzes")).toBe(first.size + 1);
    expect(second.index("hw:xp.quiz-done")).toBeGreaterThan(first.size);
    // Registering the smaller config again changes nothing, and still answers every name.
    const third = await registerStateSlots(redis, keys, demo!);
    expect([...third.byName]).toEqual([...second.byName]);
  });

  it("gives a new name the index after the largest, not after the count, when the registry has a gap", async () => {
    // {a:1, c:3}: b was deleted by hand. Index 3 is c's in every stored state; HLEN + 1 gave it again.
    const keys = new TenantKeys(`gap${Date.now()}`);
    await redis.hset(keys.slots(), "a", 1, "c", 3);
    const script = loadLua("registerSlots-1");
    await runScript(redis, script, [keys.slots()], ["a", "c", "d"]);
    expect(await redis.hgetall(keys.slots())).toEqual({ a: "1", c: "3", d: "4" });
    // The state array a process writes is as long as the largest index: as long as the count of
    // names (3), it left a hole at 4 below e's 5, and cmsgpack packs a table with a hole as a map.
    expect(new StateSlots(new Map([["a", 1], ["c", 3], ["e", 5]])).size).toBe(5);
  });

  it("is restored from a running process's map where it lacks it, and left whole where it disagrees", async () => {
    // lua/restoreSlots-1.lua (src/store/slots-guard.ts runs it after Redis lost its data).
    const keys = new TenantKeys(`restore${Date.now()}`);
    const mine = new StateSlots(new Map([["a", 1], ["b", 2], ["c", 3], ["e", 5]]));
    // Empty (the data lost): the whole map is written.
    expect(await restoreStateSlots(redis, keys, mine)).toEqual([]);
    expect(await redis.hgetall(keys.slots())).toEqual({ a: "1", b: "2", c: "3", e: "5" });
    // Holding more (a later config's name): the map agrees, and nothing else changes.
    await redis.hset(keys.slots(), "d", 4);
    expect(await restoreStateSlots(redis, keys, mine)).toEqual([]);
    expect(await redis.hlen(keys.slots())).toBe(5);
    // A name at another index, or an index another name holds: conflicts, and nothing written
    // (not even e, which conflicts with nothing).
    await redis.del(keys.slots());
    await redis.hset(keys.slots(), "a", 1, "x", 2, "c", 4);
    expect((await restoreStateSlots(redis, keys, mine)).sort()).toEqual(["b", "c"]);
    expect(await redis.hgetall(keys.slots())).toEqual({ a: "1", x: "2", c: "4" });
  });
});

describe("the state array", () => {
  let a: TestApp;
  let b: TestApp;
  let tenantId: string;
  beforeAll(async () => {
    const config = demoConfig();
    tenantId = config.tenantId;
    // a registers first (the demo's names), b second (one metric and one trigger more): a is the
    // older process of a rolling deploy, which never learns b's names.
    a = await startTestApp({ yaml: config.yaml, redisUrl: server.url, manualClock: "2026-03-02T12:00:00Z", jobs: false });
    b = await startTestApp({ yaml: withQuizzes(config.yaml), redisUrl: server.url, manualClock: "2026-03-02T12:00:00Z", jobs: false });
  });
  afterAll(async () => {
    await a.close();
    await b.close();
  });

  it("is what an event writes: an array, false where nothing is stored", async () => {
    expect((await a.call("POST", "/v1/metrics/lessons/event", { user: { id: "arr" }, value: 1 })).status).toBe(201);
    const { raw, value } = await storedState(tenantId, "arr");
    expect(isArrayBlob(raw)).toBe(true);
    expect(Array.isArray(value)).toBe(true);
    expect((value as unknown[]).filter((v) => v === false).length).toBeGreaterThan(0);
  });

  it("an older process keeps the positions only a newer config knows", async () => {
    const quiz = await b.call("POST", "/v1/metrics/quizzes/event", { user: { id: "mixed" }, value: 2 });
    expect(quiz.body.points.xp).toMatchObject({ added: 6, total: 6 });
    // a knows nothing of quizzes or quiz-done, and rewrites the state for a lesson.
    const lesson = await a.call("POST", "/v1/metrics/lessons/event", { user: { id: "mixed" }, value: 1 });
    expect(lesson.body.points.xp).toMatchObject({ added: 10, total: 16 });
    // b still finds the quiz total and the trigger's high-water mark: one more quiz pays once.
    expect((await b.call("GET", "/v1/users/mixed/metrics/quizzes")).body.current).toBe(2);
    const again = await b.call("POST", "/v1/metrics/quizzes/event", { user: { id: "mixed" }, value: 1 });
    expect(again.body.total).toBe(3);
    expect(again.body.points.xp).toMatchObject({ added: 3, total: 19 });
  });

  it("reads a state written in the map layout of earlier versions and writes it back as an array, keeping unknown names", async () => {
    const key = new TenantKeys(tenantId).user(shardOf("legacy", 16), "legacy");
    const ct = Date.parse("2026-03-01T09:00:00Z");
    const day = Math.floor(ct / 86_400_000);
    // Two lessons yesterday: 20 XP, first-lesson done, a streak of one day; and a name no config registered.
    await redis.eval(
      `redis.call('HSET', KEYS[1], 's', cmsgpack.pack({ ct = tonumber(ARGV[1]), up = tonumber(ARGV[1]), cd = tonumber(ARGV[2]),
         ['m:lessons'] = 2000000, ['p:xp'] = 20, ['pn:xp'] = 2, ['hw:xp.lesson-completed'] = 2000000,
         ['p:energy'] = 100, ['pn:energy'] = 1, ['a:first-lesson'] = tonumber(ARGV[1]),
         sl = 1, ss = tonumber(ARGV[2]), sp = tonumber(ARGV[2]), sq = tonumber(ARGV[2]), ['sv:lessons'] = 2000000, sb = 1,
         ['zz:retired'] = 7 }), 'tz', 'UTC')`,
      1,
      key,
      ct,
      day,
    );
    expect(isArrayBlob((await storedState(tenantId, "legacy")).raw)).toBe(false);
    // Reads understand the map layout.
    expect((await a.call("GET", "/v1/users/legacy/metrics/lessons")).body.current).toBe(2);
    const res = await a.call("POST", "/v1/metrics/lessons/event", { user: { id: "legacy" }, value: 1 });
    expect(res.status).toBe(201);
    expect(res.body.total).toBe(3);
    expect(res.body.achievements).toEqual([]); // first-lesson was done already
    expect(res.body.points.xp).toMatchObject({ added: 10, total: 30 });
    expect(res.body.points.xp.awards[0].id).toBe((await a.call("GET", "/v1/users/legacy/points/xp?awards=1")).body.awards[0].id);
    expect(res.body.currentStreak).toMatchObject({ length: 2, extended: true });
    const after = await storedState(tenantId, "legacy");
    expect(isArrayBlob(after.raw)).toBe(true);
    const slots = a.app.tenants.all[0]!.store.slots;
    const values = after.value as unknown[];
    expect(values[slots.index("m:lessons") - 1]).toBe(3_000_000);
    expect(values[slots.index("_x") - 1]).toEqual({ "zz:retired": 7 });
  });

  it("a board entry kept as a table by an earlier version is moved, not duplicated, and read", async () => {
    const shard = shardOf("legacy-board", 16);
    const keys = new TenantKeys(tenantId);
    const key = keys.user(shard, "legacy-board");
    const runKey = `${keys.prefix(shard)}lb:xp-all-time:0`;
    const reachedAt = Date.parse("2026-03-01T09:00:00Z");
    const oldMember = `${String(9999999999999 - reachedAt).padStart(13, "0")}|legacy-board`;
    // 20 XP on the perpetual board (run 0), with the entry an earlier version kept.
    await redis.eval(
      `redis.call('HSET', KEYS[1], 's', cmsgpack.pack({ ct = tonumber(ARGV[1]), up = tonumber(ARGV[1]), cd = 20513,
         ['m:lessons'] = 2000000, ['p:xp'] = 20, ['pn:xp'] = 2, ['hw:xp.lesson-completed'] = 2000000,
         ['lb:xp-all-time'] = { 0, 20, tonumber(ARGV[1]), '', 1 } }), 'tz', 'UTC')
       redis.call('ZADD', KEYS[2], 20, ARGV[2])`,
      2,
      key,
      runKey,
      reachedAt,
      oldMember,
    );
    // Read as it is.
    expect((await a.call("GET", "/v1/users/legacy-board/leaderboards/xp-all-time")).body).toMatchObject({ rank: 1, value: 20 });
    const res = await a.call("POST", "/v1/metrics/lessons/event", { user: { id: "legacy-board" }, value: 1 });
    expect(res.body.leaderboards["xp-all-time"]).toMatchObject({ previousRank: 1 });
    // The old member is gone from the run's set, the new one holds 30.
    const members = await redis.zrange(runKey, 0, -1, "WITHSCORES");
    expect(members.filter((m) => m.endsWith("|legacy-board"))).toHaveLength(1);
    expect(members[members.indexOf(members.find((m) => m.endsWith("|legacy-board"))!) + 1]).toBe("30");
    expect((await a.call("GET", "/v1/users/legacy-board/leaderboards/xp-all-time")).body).toMatchObject({ value: 30 });
  });

  it("a user boost written to a map-layout state keeps the map; to an array state, its position", async () => {
    for (const [id, legacy] of [["boost-map", true], ["boost-array", false]] as const) {
      const key = new TenantKeys(tenantId).user(shardOf(id, 16), id);
      if (legacy) await redis.eval("redis.call('HSET', KEYS[1], 's', cmsgpack.pack({ ct = 1, up = 1 }))", 1, key);
      else await a.call("POST", "/v1/metrics/lessons/event", { user: { id }, value: 1 });
      const created = await a.call(
        "POST",
        "/admin/v1/points/xp/boosts",
        { userId: id, name: "Double", multiplier: 2, start: "2026-03-02T00:00:00Z", end: "2026-03-09T00:00:00Z" },
        { "x-api-key": "demo-admin-key" },
      );
      expect(created.status).toBe(201);
      const { raw } = await storedState(tenantId, id);
      expect(isArrayBlob(raw)).toBe(!legacy);
      expect((await a.call("GET", `/v1/users/${id}/points/xp/boosts`)).body).toHaveLength(1);
    }
  });
});

describe("names kept in _x", () => {
  it("come back to their positions when a later config registers them: readers see them at once, the next write moves them", async () => {
    const config = demoConfig();
    const key = new TenantKeys(config.tenantId).user(shardOf("returning", 16), "returning");
    // The first process of the array version knows no quizzes: the map state's quiz total and the
    // quiz trigger's high-water mark go to _x when a lesson rewrites it.
    const older = await startTestApp({ yaml: config.yaml, redisUrl: server.url, manualClock: "2026-03-02T12:00:00Z", jobs: false });
    try {
      const ct = Date.parse("2026-03-01T09:00:00Z");
      await redis.eval(
        `redis.call('HSET', KEYS[1], 's', cmsgpack.pack({ ct = tonumber(ARGV[1]), up = tonumber(ARGV[1]), cd = 20513,
           ['m:quizzes'] = 4000000, ['hw:xp.quiz-done'] = 4000000, ['p:xp'] = 12, ['pn:xp'] = 4 }), 'tz', 'UTC')`,
        1,
        key,
        ct,
      );
      expect((await older.call("POST", "/v1/metrics/lessons/event", { user: { id: "returning" }, value: 1 })).status).toBe(201);
    } finally {
      await older.close();
    }
    const slotsKey = new TenantKeys(config.tenantId).slots();
    expect(await redis.hexists(slotsKey, "m:quizzes")).toBe(0);
    const x = (await storedState(config.tenantId, "returning")).value as unknown[];
    expect(x[12]).toEqual({ "m:quizzes": 4_000_000, "hw:xp.quiz-done": 4_000_000 });

    // A later config adds quizzes back.
    const newer = await startTestApp({ yaml: withQuizzes(config.yaml), redisUrl: server.url, manualClock: "2026-03-02T12:00:00Z", jobs: false });
    try {
      expect((await newer.call("GET", "/v1/users/returning/metrics/quizzes")).body.current).toBe(4);
      const quiz = await newer.call("POST", "/v1/metrics/quizzes/event", { user: { id: "returning" }, value: 1 });
      expect(quiz.body.total).toBe(5);
      // The high-water mark came back too: only the fifth quiz pays.
      expect(quiz.body.points.xp).toMatchObject({ added: 3, total: 25 });
      const after = (await storedState(config.tenantId, "returning")).value as unknown[];
      const slots = newer.app.tenants.all[0]!.store.slots;
      expect(after[slots.index("m:quizzes") - 1]).toBe(5_000_000);
      expect(after[slots.index("hw:xp.quiz-done") - 1]).toBe(5_000_000);
      expect(after[slots.index("_x") - 1]).toBe(false);
    } finally {
      await newer.close();
    }
  });
});

describe("a long state array", () => {
  // The state array is decoded through Lua's stack (lua/includes/state.lua decodeState), which
  // holds 8000 values (LUAI_MAXCSTACK); cmsgpack.unpack builds the table without that limit. A
  // registry of thousands of names (a large config, or names retired over many config changes:
  // positions are never reused) must not make an existing user's events fail: a long array goes
  // through cmsgpack.unpack (found by a review: with every array on the stack, the second event of
  // a user under a registry of 8000 names was a 500).
  it.each([3000, 8000])("an event on an existing user succeeds with a state of %i more positions", async (retired) => {
    const { yaml, tenantId } = demoConfig();
    const keys = new TenantKeys(tenantId);
    // The names of the config first (as a registry would have them), then the retired ones.
    await startTestApp({ yaml, redisUrl: server.url, manualClock: "2026-03-02T12:00:00Z", jobs: false }).then((t) => t.close());
    const size = await redis.hlen(keys.slots());
    const args: (string | number)[] = [];
    for (let i = 1; i <= retired; i++) args.push(`retired:${i}`, size + i);
    await redis.hset(keys.slots(), ...args);
    const t = await startTestApp({ yaml, redisUrl: server.url, manualClock: "2026-03-02T12:00:00Z", jobs: false });
    try {
      const first = await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "big" }, value: 1 });
      expect(first.status).toBe(201);
      const second = await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "big" }, value: 1 });
      expect(second.status).toBe(201);
      expect(second.body.total).toBe(2);
      expect(second.body.points.xp).toMatchObject({ added: 10, total: 20 });
    } finally {
      await t.close();
    }
  });
});
