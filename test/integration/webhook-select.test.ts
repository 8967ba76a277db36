import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inject } from "vitest";
import type { WebhookEventType } from "../../src/config/types.js";
import { decodeStreamRecord } from "../../src/domain/stream-record.js";
import { recordEvents, streamEventId, tenantHookParts, WANTED_PARTS, WEBHOOK_EVENT_TYPES } from "../../src/jobs/webhooks/kinds.js";
import { startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { lessonsTenantYaml, MILESTONES } from "../helpers/tenant-yaml.js";
import { startReceiver, type Receiver, type Received } from "../helpers/webhook-receiver.js";
import { fieldsOf, HOOKS, keptForPointsChanged, selected as selectedIn, standsFor } from "../helpers/webhook-select.js";

/**
 * The webhook selection made when a record is written (lua/includes/hooks.lua): every script
 * that appends a record to its shard stream also appends it to the shard's hook stream when one
 * of the tenant's endpoints wants a part of it, and the webhook consumer reads only the hook
 * streams. Held here against recordEvents (kinds.ts), the one place that decides which events a
 * record stands for: a record that stands for an event of a subscribed type is always selected;
 * the others are not (save a points part with nothing added, kept for points.changed). Then the
 * writers end to end: what lands in the hook stream (by its length, not by timing), the ids of
 * what is delivered, and a tenant without endpoints.
 */
let redis: Redis;
beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
});
afterAll(() => redis.disconnect());

/** The include's hookWanted, as the writers run it, on the parts of `outcome` (test/helpers/webhook-select.ts). */
const selected = (outcome: string, wanted: string[]) => selectedIn(redis, outcome, wanted);

/** One outcome per type that stands for an event of it (checked against recordEvents below). */
const CASES: [WebhookEventType, string][] = [
  ["achievement.completed", "a:first-lesson"],
  ["points.changed", "p:xp:10:10:0:0"],
  ["points.level_changed", "c;p:xp:0:60:0:1"],
  ["points.level_changed", "p:xp:500:1500:9:10"],
  ["streak.extended", "s:3"],
  ["streak.started", "p:xp:10:10:0:0;s:1"],
  ["streak.lost", "sl:4;s:1"],
  ["streak.freeze_consumed", "fc:1;s:5"],
  ["streak.freeze_earned", "fe:1"],
  ["streak.freeze_earned", "fa:2"],
  ["leaderboard.rank_changed", "p:xp:10:70:1:1;b:xp-board:0:60:70"],
];
/** Outcomes that stand for no event at all. */
const NOTHING = ["", "c", "sr:3", "c;sr:12"];

describe("the selection in Lua (lua/includes/hooks.lua) against recordEvents", () => {
  it("each case stands for its type (recordEvents)", () => {
    for (const [type, outcome] of CASES) expect(standsFor(outcome, type), `${type} ${outcome}`).toBe(true);
    for (const outcome of NOTHING) expect(recordEvents(decodeStreamRecord("1-0", fieldsOf("ev", outcome)), [])).toEqual([]);
  });

  it("selects a record for a subscribed type exactly when it stands for an event of that type (a points part with nothing added is kept for points.changed)", async () => {
    for (const type of WEBHOOK_EVENT_TYPES) {
      const part = WANTED_PARTS[type];
      if (part === null) continue;
      for (const outcome of [...CASES.map(([, o]) => o), ...NOTHING]) {
        const superset = type === "points.changed" && keptForPointsChanged(outcome);
        expect(await selected(outcome, [part]), `${type}: ${outcome}`).toBe(standsFor(outcome, type) || superset);
      }
    }
  });

  it("with every type wanted, selects every record that stands for an event and none that stands for none", async () => {
    const every = WEBHOOK_EVENT_TYPES.map((t) => WANTED_PARTS[t]).filter((p): p is string => p !== null);
    for (const [, outcome] of CASES) expect(await selected(outcome, every), outcome).toBe(true);
    for (const outcome of NOTHING) expect(await selected(outcome, every), outcome).toBe(false);
    for (const [, outcome] of CASES) expect(await selected(outcome, []), outcome).toBe(false);
  });

  it("reads the levels of a points part whatever their digits", async () => {
    for (const [outcome, changed] of [
      ["p:xp:10:70:1:1", false],
      ["p:xp:10:60:0:1", true],
      ["p:xp:10:70:10:10", false],
      ["p:xp:10:70:9:10", true],
      ["p:xp:5:5:12:3", true],
      ["p:xp:1:2:11:1", true],
      ["p:xp:-5:70:1:11", true],
      ["p:xp:-5:70:11:11", false],
    ] as const) {
      expect(await selected(outcome, ["L"]), outcome).toBe(changed);
    }
    expect(await selected("s:2;s:12", ["S"])).toBe(false);
    expect(await selected("s:1", ["S"])).toBe(true);
  });

  it("appendRecord: the record to the shard stream always; to the hook stream with the same fields and x, its shard entry id, when selected", async () => {
    const script = `${HOOKS}
local W
if ARGV[1] == 'none' then W = false elseif ARGV[1] == 'all' then W = true else W = {}; W[ARGV[1]] = true end
local parts = {}
for part in string.gmatch(ARGV[2], '[^;]+') do parts[#parts + 1] = part end
return appendRecord(KEYS[1], W, 'ev', 'ada', 1780000000000, 'UTC', 'detail', parts)`;
    const key = `{sel-${uniqueTenantId()}:0}:x`;
    const append = (wanted: string, outcome: string) => redis.eval(script, 1, key, wanted, outcome) as Promise<string>;
    const a = await append("none", "a:first-lesson");
    const b = await append("all", "");
    const c = await append("a", "p:xp:10:10:0:0");
    const d = await append("a", "p:xp:10:10:0:0;a:first-lesson");
    expect((await redis.xrange(key, "-", "+")).map(([id]) => id)).toEqual([a, b, c, d]);
    const hooked = await redis.xrange(`${key}h`, "-", "+");
    expect(hooked.map(([, fields]) => fields)).toEqual([
      [...fieldsOf("ev", ""), "x", b],
      [...fieldsOf("ev", "p:xp:10:10:0:0;a:first-lesson"), "x", d],
    ]);
    // The shard stream's fields are the writers' usual ones (the stream worker reads them by position).
    expect((await redis.xrange(key, d, d))[0]![1]).toEqual(fieldsOf("ev", "p:xp:10:10:0:0;a:first-lesson"));
    await redis.del(key, `${key}h`);
  });

  it("the tenant's wanted parts: none without endpoints, else the union of its endpoints' types", () => {
    const endpoint = (events: string[]) => ({ events: new Set(events) }) as never;
    expect(tenantHookParts({ webhooks: [] })).toBe(false);
    expect(tenantHookParts({ webhooks: [endpoint(["points.boost_started", "leaderboard.finished"])] })).toEqual({});
    expect(tenantHookParts({ webhooks: [endpoint(["points.level_changed", "streak.started"]), endpoint(["achievement.completed", "streak.started"])] })).toEqual({ L: true, S: true, a: true });
  });

  it("every type has its wanted parts or comes from the timeline", () => {
    for (const type of WEBHOOK_EVENT_TYPES) expect(WANTED_PARTS[type] === null || typeof WANTED_PARTS[type] === "string").toBe(true);
    expect(WEBHOOK_EVENT_TYPES.filter((t) => WANTED_PARTS[t] === null)).toEqual(["points.boost_started", "points.boost_finished", "leaderboard.started", "leaderboard.finished"]);
  });
});

const admin = { "x-api-key": "demo-admin-key" };

describe("the writers select for a tenant with an endpoint subscribed to the milestone types", () => {
  let receiver: Receiver;
  let t: TestApp;
  const tenantId = uniqueTenantId("sel");
  const shardKey = `{${tenantId}:0}:x`;
  const hookKey = `{${tenantId}:0}:xh`;
  const lengths = async () => [await t.redis.xlen(shardKey), await t.redis.xlen(hookKey)];
  const lesson = (user: string) => t.call("POST", "/v1/metrics/lessons/event", { user: { id: user, tz: "UTC" }, value: 1 });

  beforeAll(async () => {
    receiver = await startReceiver();
    t = await startTestApp({ yaml: lessonsTenantYaml(tenantId, { url: receiver.url, events: MILESTONES }), manualClock: "2026-06-01T12:00:00Z" });
  });
  afterAll(async () => {
    await t.close();
    await receiver.close();
  });

  it("appends to the hook stream only the records with a wanted part, and delivers each of their events once, with the ids of the shard stream's entries", async () => {
    expect(await lengths()).toEqual([0, 0]);
    expect((await lesson("ada")).status).toBe(201); // created, first-lesson, streak started: wanted
    expect(await lengths()).toEqual([1, 1]);
    expect((await lesson("ada")).status).toBe(201); // 20 points: bronze, a level change: wanted
    expect(await lengths()).toEqual([2, 2]);
    expect((await lesson("ada")).status).toBe(201); // 30 points, same level, same day: nothing wanted
    expect((await t.call("PUT", "/v1/users/bob", { tz: "UTC" })).status).toBe(200); // created only
    expect(await lengths()).toEqual([4, 2]);

    const shard = (await t.redis.xrange(shardKey, "-", "+")) as [string, string[]][];
    const hooked = (await t.redis.xrange(hookKey, "-", "+")) as [string, string[]][];
    // The same fields as the shard stream's entry, and x: that entry's id.
    expect(hooked.map(([, fields]) => fields)).toEqual([
      [...shard[0]![1], "x", shard[0]![0]],
      [...shard[1]![1], "x", shard[1]![0]],
    ]);

    expect(await t.app.webhooks!.drain()).toBe(2);
    const got = await receiver.waitFor(3);
    await t.app.webhooks!.settled(tenantId);
    expect(receiver.received).toHaveLength(3);
    const tenant = t.tenants[0]!;
    const idOf = (entry: string, type: string, subject: string) => streamEventId(tenant.ns, tenantId, 0, entry, type, subject);
    const byType = Object.fromEntries(got.map((r: Received) => [r.body.type, r.body.id]));
    expect(byType).toEqual({
      "achievement.completed": idOf(shard[0]![0], "achievement.completed", "first-lesson"),
      "streak.started": idOf(shard[0]![0], "streak.started", "streak"),
      "points.level_changed": idOf(shard[1]![0], "points.level_changed", "xp"),
    });
    // Read again (a consumer that crashed before its XACK): the same ids, which the queue holds already.
    const consumer = t.app.webhooks!.consumer!;
    await consumer.process(consumer.streamOf(tenantId, 0), hooked, true);
    expect(await t.app.webhooks!.drain()).toBe(0);
    await t.app.webhooks!.settled(tenantId);
    expect(receiver.received).toHaveLength(3);
    expect(((await t.redis.xpending(hookKey, "webhooks")) as [number])[0]).toBe(0);
  });

  it("always appends a user boost's record, and a sweep's streak.lost (time-driven records)", async () => {
    const [, before] = await lengths();
    const res = await t.call("POST", "/admin/v1/points/xp/boosts", { userId: "ada", name: "Later", multiplier: 2, start: "2026-06-10T00:00:00Z", end: "2026-06-11T00:00:00Z" }, admin);
    expect(res.status).toBe(201);
    const [, afterBoost] = await lengths();
    expect(afterBoost).toBe(before! + 1);
    expect((await t.redis.xrevrange(hookKey, "+", "-", "COUNT", 1))[0]![1].slice(0, 2)).toEqual(["k", "ub"]);
    // ada's streak (extended 06-01) is lost when 06-03 begins; the clock hook sweeps and drains.
    await t.setClock("2026-06-03T00:00:00Z");
    const [lost] = await receiver.waitFor(1, (r) => r.body.type === "streak.lost");
    expect(lost!.body).toMatchObject({ user: { id: "ada" }, length: 1 });
    const settle = ((await t.redis.xrange(shardKey, "-", "+")) as [string, string[]][]).find(([, f]) => f[1] === "sa")!;
    expect(lost!.body.id).toBe(streamEventId(t.tenants[0]!.ns, tenantId, 0, settle[0], "streak.lost", "streak"));
    await t.app.webhooks!.settled(tenantId);
    expect(receiver.received.filter((r) => r.body.type === "streak.lost")).toHaveLength(1);
  });
});

describe("a tenant without endpoints", () => {
  it("writes no hook stream, whatever it records", async () => {
    const tenantId = uniqueTenantId("sel");
    const t = await startTestApp({ yaml: lessonsTenantYaml(tenantId), manualClock: "2026-06-01T12:00:00Z" });
    try {
      expect(t.app.webhooks!.consumer).toBeNull();
      for (const user of ["ada", "ada", "bob"]) expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: user, tz: "UTC" }, value: 1 })).status).toBe(201);
      expect((await t.call("POST", "/admin/v1/points/xp/boosts", { userId: "ada", name: "B", multiplier: 2, start: "2026-06-10T00:00:00Z" }, admin)).status).toBe(201);
      await t.setClock("2026-06-05T00:00:00Z");
      // Three events, the boost, and the streak expiry sweep's two lost streaks (src/jobs/streak-expiry.ts).
      expect(await t.redis.xlen(`{${tenantId}:0}:x`)).toBe(6);
      expect(await t.redis.exists(`{${tenantId}:0}:xh`)).toBe(0);
    } finally {
      await t.close();
    }
  });
});
