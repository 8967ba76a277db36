import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeUserBoosts } from "../../src/domain/boosts.js";
import { WEBHOOK_EVENT_TYPES } from "../../src/jobs/webhooks/kinds.js";
import { changeUserBoost } from "../../src/store/user-store.js";
import { startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";
import { startReceiver, verifyStandard, verifyTrophy, type Receiver, type Received } from "../helpers/webhook-receiver.js";

/**
 * Outbound events end to end (issue 6; README: Webhooks): a real receiver on loopback, the
 * app's real BullMQ delivery worker and timeline, the manual clock. Nothing here sleeps:
 * records become deliveries by drain() (or by moving the clock, which drains before it
 * answers), and the tests wait for the receiver to have seen what they expect.
 *
 * One tenant, one endpoint subscribed to every type, signing with two secrets (a rotation):
 * a Standard Webhooks `whsec_` secret first, an older plain one second. The tests run in order
 * on one clock, from Monday 2026-06-01 12:00 UTC.
 */
const SECRET = `whsec_${randomBytes(24).toString("base64")}`;
const OLD_SECRET = "an-older-plain-secret-0123";
const T0 = "2026-06-01T12:00:00Z";

let receiver: Receiver;
let t: TestApp;
const tenantId = uniqueTenantId("wh");

function yaml(url: string): string {
  return tenantYaml(
    tenantId,
    `
    shards: 2
    metrics: [{ key: lessons, name: Lessons }]
    points:
      - key: xp
        name: XP
        triggers:
          - { key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 10 }
          - { key: profile-bonus, type: achievement, achievement: profile, points: 50 }
          - { key: daily, type: time, unit: day, interval: 1, points: 100 }
        levels:
          - { key: bronze, name: Bronze, points: 15 }
          - { key: silver, name: Silver, points: 55 }
          - { key: gold, name: Gold, points: 1000 }
        boosts:
          - { key: launch, name: Launch day, multiplier: 2, start: "2026-06-03T00:00:00Z", end: "2026-06-04T00:00:00Z" }
    achievements:
      - { key: first-lesson, name: First lesson, type: metric, metric: lessons, value: 1 }
      - { key: profile, name: Profile, type: api }
    streak:
      frequency: daily
      metrics: [{ metric: lessons, threshold: 1 }]
      freezes: { initial: 1, max: 2 }
    leaderboards:
      - { key: weekly-xp, name: Weekly XP, rankBy: points, points: xp, start: "2026-06-01", runUnit: day, runInterval: 7 }
    webhooks:
      - key: main
        url: ${url}
        secrets: ["${SECRET}", "${OLD_SECRET}"]
        events: [${WEBHOOK_EVENT_TYPES.join(", ")}]
`,
  );
}

beforeAll(async () => {
  receiver = await startReceiver();
  t = await startTestApp({ yaml: yaml(receiver.url), manualClock: T0 });
});
afterAll(async () => {
  await t.close();
  await receiver.close();
});

const of = (type: string, userId?: string) => (r: Received) => r.body.type === type && (userId === undefined || r.body.user?.id === userId);
const admin = { "x-api-key": "demo-admin-key" };

/** Records → deliveries now, then wait for the receiver to have `n` matching requests. */
async function delivered(n: number, filter: (r: Received) => boolean): Promise<Received[]> {
  await t.app.webhooks!.drain();
  return receiver.waitFor(n, filter);
}

describe("events from a metric event", () => {
  it("delivers points.changed, achievement.completed, streak.started, streak.extended and leaderboard.rank_changed, signed", async () => {
    expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "ada", tz: "UTC", name: "Ada" }, value: 1 })).status).toBe(201);
    const all = await delivered(5, (r) => r.body.user?.id === "ada");
    expect(all.map((r) => r.body.type).sort()).toEqual(["achievement.completed", "leaderboard.rank_changed", "points.changed", "streak.extended", "streak.started"]);
    const byType = Object.fromEntries(all.map((r) => [r.body.type, r.body]));
    const user = expect.objectContaining({ id: "ada", name: "Ada", tz: "UTC", attributes: {}, control: false, created: "2026-06-01T12:00:00.000Z" });

    expect(byType["points.changed"]).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      type: "points.changed",
      timestamp: "2026-06-01T12:00:00.000Z",
      user,
      points: expect.objectContaining({
        key: "xp",
        name: "XP",
        total: 10,
        added: 10,
        level: null,
        awards: [expect.objectContaining({ awarded: 10, total: 10, date: "2026-06-01T12:00:00.000Z", trigger: expect.objectContaining({ key: "per-lesson" }) })],
      }),
    });
    expect(byType["achievement.completed"]).toMatchObject({
      type: "achievement.completed",
      user,
      achievement: { key: "first-lesson", name: "First lesson", trigger: "metric", metricValue: 1, achievedAt: "2026-06-01T12:00:00.000Z" },
    });
    const streak = { length: 1, frequency: "daily", started: "2026-06-01", periodStart: "2026-06-01", periodEnd: "2026-06-01", expires: "2026-06-02", freezes: 1, maxFreezes: 2 };
    expect(byType["streak.started"]).toMatchObject({ type: "streak.started", user, streak });
    expect(byType["streak.extended"]).toMatchObject({ type: "streak.extended", user, streak });
    expect(byType["leaderboard.rank_changed"]).toMatchObject({
      type: "leaderboard.rank_changed",
      user,
      leaderboard: { key: "weekly-xp", rankBy: "points", run: "2026-06-01", rank: 1, value: 10, previousRank: null, previousValue: null, status: "active" },
    });
    // One id per change, each different.
    expect(new Set(all.map((r) => r.body.id)).size).toBe(5);
  });

  it("signs every delivery for both schemes: X-Trophy-Signature with the first secret, Standard Webhooks with each", async () => {
    for (const r of receiver.received) {
      expect(r.headers["content-type"]).toBe("application/json");
      expect(r.headers["webhook-id"]).toBe(r.body.id);
      expect(verifyTrophy(r, SECRET)).toBe(true);
      expect(verifyTrophy(r, OLD_SECRET)).toBe(false);
      expect(verifyStandard(r, SECRET)).toBe(true);
      expect(verifyStandard(r, OLD_SECRET)).toBe(true);
      expect(verifyStandard(r, `whsec_${randomBytes(24).toString("base64")}`)).toBe(false);
      // A tampered body fails both.
      const tampered = { ...r, raw: r.raw.replace('"type"', '"typo"') };
      expect(verifyTrophy(tampered, SECRET)).toBe(false);
      expect(verifyStandard(tampered, SECRET)).toBe(false);
    }
  });

  it("a redelivered record (drained again) queues nothing new", async () => {
    const before = receiver.received.length;
    await t.app.webhooks!.drain();
    await t.app.webhooks!.settled(tenantId);
    expect(receiver.received.length).toBe(before);
  });

  it("GET /metrics shows the webhooks group's lag per shard and the deliveries by status", async () => {
    const metrics = async () => (await t.call("GET", "/metrics")).body as string;
    const shards = t.tenants.find((x) => x.id === tenantId)!.shards;
    const undelivered = (text: string) =>
      text.split("\n").filter((l) => l.startsWith(`laurel_stream_undelivered_entries{tenant="${tenantId}",`) && l.includes('group="webhooks"')).map((l) => Number(l.split(" ")[1]));
    let text = await metrics();
    expect(undelivered(text)).toEqual(Array(shards).fill(0));
    expect(text).toContain(`laurel_webhook_deliveries{tenant="${tenantId}",status="delivered"} ${new Set(receiver.received.map((r) => r.body.id)).size}`);
    expect(text).toContain(`laurel_webhook_deliveries{tenant="${tenantId}",status="dead"} 0`);
    // A record the consumer has not read yet shows as undelivered in the webhooks group only.
    expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "lagging", tz: "UTC" }, value: 1 })).status).toBe(201);
    text = await metrics();
    expect(undelivered(text).reduce((a, b) => a + b, 0)).toBe(1);
    await t.app.webhooks!.drain();
    await t.app.webhooks!.settled(tenantId);
    expect(undelivered(await metrics())).toEqual(Array(shards).fill(0));
  });
});

describe("points.level_changed", () => {
  it("is emitted when an API achievement completion changes the level", async () => {
    const res = await t.call("POST", "/v1/achievements/profile/complete", { user: { id: "ada" } });
    expect(res.status).toBe(201);
    const [changed] = await delivered(1, of("points.level_changed", "ada"));
    expect(changed!.body).toEqual({
      id: expect.any(String),
      type: "points.level_changed",
      timestamp: "2026-06-01T12:00:00.000Z",
      user: expect.objectContaining({ id: "ada" }),
      points: { id: expect.any(String), key: "xp", name: "XP", description: null, badgeUrl: null, maxPoints: null, total: 60 },
      previousLevel: null,
      newLevel: { id: expect.any(String), key: "silver", name: "Silver", description: null, badgeUrl: null, points: 55 },
    });
    await receiver.waitFor(1, of("achievement.completed", "ada"));
    const completed = receiver.received.filter(of("achievement.completed", "ada")).map((r) => r.body.achievement.key);
    expect(completed.sort()).toEqual(["first-lesson", "profile"]);
  });

  it("is emitted when a time trigger pays, at the moment the clock passes the due instant", async () => {
    expect((await t.call("PUT", "/v1/users/tim", { tz: "UTC" })).status).toBe(200);
    // Due one day after first identification; the clock hook runs the trigger, then drains the records.
    await t.setClock("2026-06-02T12:00:00Z");
    const [changed] = await receiver.waitFor(1, of("points.level_changed", "tim"));
    expect(changed!.body).toMatchObject({
      timestamp: "2026-06-02T12:00:00.000Z",
      points: { key: "xp", total: 100 },
      previousLevel: null,
      newLevel: { key: "silver" },
    });
    const [points] = await receiver.waitFor(1, of("points.changed", "tim"));
    // `level`: the level the total reaches (the first points.changed, at 10, had none).
    expect(points!.body.points).toMatchObject({
      total: 100,
      added: 100,
      awards: [expect.objectContaining({ awarded: 100, trigger: expect.objectContaining({ key: "daily", type: "time" }) })],
      level: { key: "silver", name: "Silver", points: 55 },
    });
  });

  it("takes a level only when the total strictly exceeds its points: a total of exactly 1000 is silver, not gold", async () => {
    // 100 multiples at once: 1000 points, gold's own points (README, rule 7: "strictly exceeds").
    expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "lev" }, value: 100 })).status).toBe(201);
    const [changed] = await delivered(1, of("points.level_changed", "lev"));
    expect(changed!.body).toMatchObject({ points: { key: "xp", total: 1000 }, previousLevel: null, newLevel: { key: "silver" } });
  });
});

describe("streak.freeze_earned", () => {
  it("is emitted for freezes granted by the admin API", async () => {
    const res = await t.call("POST", "/admin/v1/streaks/freezes", { freezes: [{ userId: "tim" }, { userId: "tim" }] }, admin);
    expect(res.body).toEqual({ issues: [expect.objectContaining({ userId: "tim", reason: "Would exceed maximum freeze limit" })] });
    const [earned] = await delivered(1, of("streak.freeze_earned", "tim"));
    expect(earned!.body).toEqual({ id: expect.any(String), type: "streak.freeze_earned", timestamp: "2026-06-02T12:00:00.000Z", user: expect.objectContaining({ id: "tim" }), earned: 1, freezes: 2 });
  });
});

describe("time-driven events fire when the service clock passes their instant, without any event", () => {
  it("streak.freeze_consumed when the deadline passes with a freeze left, then streak.lost", async () => {
    // ada extended on 06-01: the streak is lost at the start of 06-03 unless a freeze covers 06-02.
    await t.setClock("2026-06-03T00:00:00Z");
    const [consumed] = await receiver.waitFor(1, of("streak.freeze_consumed", "ada"));
    expect(consumed!.body).toMatchObject({ timestamp: "2026-06-03T00:00:00.000Z", consumed: 1, freezes: 0 });
    expect(receiver.received.filter(of("streak.lost", "ada"))).toHaveLength(0);

    await t.setClock("2026-06-04T00:00:00Z");
    const [lost] = await receiver.waitFor(1, of("streak.lost", "ada"));
    expect(lost!.body).toEqual({ id: expect.any(String), type: "streak.lost", timestamp: "2026-06-04T00:00:00.000Z", user: expect.objectContaining({ id: "ada" }), length: 1 });
  });

  it("points.boost_started and points.boost_finished for a global boost, once each", async () => {
    const started = receiver.received.filter(of("points.boost_started"));
    const finished = receiver.received.filter(of("points.boost_finished"));
    expect(started).toHaveLength(1);
    expect(finished).toHaveLength(1);
    expect(started[0]!.body).toEqual({
      id: expect.any(String),
      type: "points.boost_started",
      timestamp: "2026-06-03T00:00:00.000Z",
      boost: expect.objectContaining({ key: "launch", name: "Launch day", status: "active", userId: null, pointsSystemKey: "xp", multiplier: 2, start: "2026-06-03T00:00:00.000Z", end: "2026-06-04T00:00:00.000Z" }),
    });
    expect(finished[0]!.body).toMatchObject({ timestamp: "2026-06-04T00:00:00.000Z", boost: { key: "launch", status: "finished" } });
    // Moving the clock again (even back) never fires them twice.
    await t.setClock("2026-06-03T12:00:00Z");
    await t.setClock("2026-06-04T01:00:00Z");
    await t.app.webhooks!.settled(tenantId);
    expect(receiver.received.filter(of("points.boost_started"))).toHaveLength(1);
  });

  /** The "ub" records of a boost (lua/userBoost-3.lua) in both hook streams, where the consumer reads them, oldest first. */
  async function boostRecords(boostId: string): Promise<{ shard: number; entry: [string, string[]]; fields: Record<string, string> }[]> {
    const out: { shard: number; entry: [string, string[]]; fields: Record<string, string> }[] = [];
    for (const shard of [0, 1]) {
      for (const entry of (await t.redis.xrange(`{${tenantId}:${shard}}:xh`, "-", "+")) as [string, string[]][]) {
        const fields: Record<string, string> = {};
        for (let i = 0; i + 1 < entry[1].length; i += 2) fields[entry[1][i]!] = entry[1][i + 1]!;
        if (fields.k === "ub" && fields.e!.split("|")[2] === boostId) out.push({ shard, entry, fields });
      }
    }
    return out;
  }
  const userBoostEvent = (type: string, boostId: string) => (r: Received) => r.body.type === type && r.body.boost?.id === boostId;

  it("points.boost_started and points.boost_finished for a user boost from the admin API, scheduled from the stream record", async () => {
    const res = await t.call(
      "POST",
      "/admin/v1/points/xp/boosts",
      { userId: "tim", name: "Comeback", multiplier: 3, start: "2026-06-04T02:00:00Z", end: "2026-06-04T03:00:00Z" },
      admin,
    );
    expect(res.status).toBe(201);
    // The script wrote the record with the change; nothing is scheduled until the consumer reads it.
    const [added] = await boostRecords(res.body.id);
    const record = { k: "ub", u: "tim", t: String(Date.parse("2026-06-04T01:00:00Z")), z: "UTC", e: `add|xp|${res.body.id}|${Date.parse("2026-06-04T02:00:00Z")}|${Date.parse("2026-06-04T03:00:00Z")}`, o: "" };
    expect(added!.fields).toEqual({ ...record, x: expect.stringMatching(/^\d+-\d+$/) });
    // The same record in the shard stream, at the entry id the hook stream's copy names.
    const [[, inShard]] = (await t.redis.xrange(`{${tenantId}:${added!.shard}}:x`, added!.fields.x!, added!.fields.x!)) as [string, string[]][];
    expect(inShard).toEqual(Object.entries(record).flat());
    expect(await t.redis.zcard(`{${tenantId}}:wh:due`)).toBe(0);
    await t.setClock("2026-06-04T02:00:00Z");
    const [started] = await receiver.waitFor(1, userBoostEvent("points.boost_started", res.body.id));
    expect(started!.body).toMatchObject({ timestamp: "2026-06-04T02:00:00.000Z", boost: { id: res.body.id, name: "Comeback", status: "active", userId: "tim", multiplier: 3 } });
    // A redelivered record (a consumer that crashed before its XACK) schedules the same boundary
    // again: the same event id, which the queue already holds, so nothing new is sent.
    const consumer = t.app.webhooks!.consumer!;
    await consumer.process(consumer.streamOf(tenantId, added!.shard), [added!.entry], true);
    await t.setClock("2026-06-04T02:10:00Z");
    // Ended early by the admin: it finishes now, not at its planned end.
    await t.setClock("2026-06-04T02:30:00Z");
    expect((await t.call("DELETE", `/admin/v1/points/xp/boosts/${res.body.id}`, undefined, admin)).status).toBe(200);
    const ended = (await boostRecords(res.body.id)).at(-1)!;
    expect(ended.fields.e).toBe(`end|xp|${res.body.id}|${Date.parse("2026-06-04T02:00:00Z")}|${Date.parse("2026-06-04T02:30:00Z")}`);
    const [finished] = await delivered(1, userBoostEvent("points.boost_finished", res.body.id));
    expect(finished!.body).toMatchObject({ timestamp: "2026-06-04T02:30:00.000Z", boost: { status: "finished", end: "2026-06-04T02:30:00.000Z" } });
    await consumer.process(consumer.streamOf(tenantId, ended.shard), [ended.entry], true);
    await t.setClock("2026-06-04T03:00:00Z");
    await t.app.webhooks!.settled(tenantId);
    expect(receiver.received.filter(userBoostEvent("points.boost_started", res.body.id))).toHaveLength(1);
    expect(receiver.received.filter(userBoostEvent("points.boost_finished", res.body.id))).toHaveLength(1);
    expect(started!.body.id).not.toBe(finished!.body.id);
  });

  it("a user boost written by its script alone (the process died before anything else) still fires its boundaries", async () => {
    // As if the service died right after the script: no route, no Node code after the write.
    const store = t.app.tenants.all[0]!.store;
    const start = Date.parse("2026-06-04T04:00:00Z");
    const end = Date.parse("2026-06-04T05:00:00Z");
    const now = t.clock.now();
    const id = "0b0b0b0b-0000-4000-8000-000000000001";
    const record = { id, name: "Orphan", userId: "tim", pointsSystemKey: "xp", start, end, multiplier: 2, rounding: "down", created: now };
    expect(await changeUserBoost(store, "tim", "add", "xp", now, id, encodeUserBoosts([{ id, multiplier: 2, start, end, rounding: "down" }]), JSON.stringify(record))).toBe("done");
    await t.setClock("2026-06-04T04:00:00Z");
    await t.setClock("2026-06-04T05:00:00Z");
    const [started] = await receiver.waitFor(1, userBoostEvent("points.boost_started", id));
    const [finished] = await receiver.waitFor(1, userBoostEvent("points.boost_finished", id));
    expect(started!.body).toMatchObject({ timestamp: "2026-06-04T04:00:00.000Z", boost: { id, name: "Orphan", status: "active", userId: "tim" } });
    expect(finished!.body).toMatchObject({ timestamp: "2026-06-04T05:00:00.000Z", boost: { id, status: "finished" } });
  });

  it("points.boost_finished for a user boost DELETEd in the millisecond it started (it ran: its window is that millisecond)", async () => {
    await t.setClock("2026-06-04T06:00:00Z");
    const res = await t.call("POST", "/admin/v1/points/xp/boosts", { userId: "tim", name: "Blink", multiplier: 2, start: "2026-06-04T06:00:00Z" }, admin);
    expect(res.status).toBe(201);
    expect((await t.call("DELETE", `/admin/v1/points/xp/boosts/${res.body.id}`, undefined, admin)).status).toBe(200);
    const ended = (await boostRecords(res.body.id)).at(-1)!;
    expect(ended.fields.e).toBe(`end|xp|${res.body.id}|${Date.parse("2026-06-04T06:00:00Z")}|${Date.parse("2026-06-04T06:00:00.001Z")}`);
    await t.setClock("2026-06-04T06:00:00.001Z");
    const [started] = await receiver.waitFor(1, userBoostEvent("points.boost_started", res.body.id));
    const [finished] = await receiver.waitFor(1, userBoostEvent("points.boost_finished", res.body.id));
    expect(started!.body).toMatchObject({ timestamp: "2026-06-04T06:00:00.000Z" });
    expect(finished!.body).toMatchObject({ timestamp: "2026-06-04T06:00:00.001Z", boost: { id: res.body.id, status: "finished", end: "2026-06-04T06:00:00.001Z" } });
  });

  it("leaderboard.finished with the top rankings and leaderboard.started at the run boundary", async () => {
    await t.setClock("2026-06-08T00:00:00Z");
    const [finished] = await receiver.waitFor(1, of("leaderboard.finished"));
    const [started] = await receiver.waitFor(1, of("leaderboard.started"));
    expect(finished!.body).toMatchObject({
      timestamp: "2026-06-08T00:00:00.000Z",
      leaderboard: { key: "weekly-xp", status: "finished", run: "2026-06-01", rankings: expect.any(Array) },
    });
    const rankings = finished!.body.leaderboard.rankings as { userId: string; userName: string | null; rank: number; value: number }[];
    expect(rankings.map((r) => r.userId)).toEqual(expect.arrayContaining(["ada", "tim"]));
    // Each with the user's name, read for the payload (null for a user without one).
    expect(rankings.find((r) => r.userId === "ada")!.userName).toBe("Ada");
    expect(rankings[0]!.rank).toBe(1);
    // The run's top 10 as its page reads them: the same entries, names and rank numbers.
    const page = await t.call("GET", "/v1/leaderboards/weekly-xp?run=2026-06-01&limit=10");
    expect(page.status).toBe(200);
    expect(rankings).toEqual(page.body.rankings);
    expect(started!.body).toMatchObject({ timestamp: "2026-06-08T00:00:00.000Z", leaderboard: { key: "weekly-xp", status: "active", run: "2026-06-08", rankings: [] } });
  });
});

describe("the admin API", () => {
  it("lists deliveries with status and attempts, and shows one with its log and payload", async () => {
    await t.app.webhooks!.settled(tenantId);
    const list = await t.call("GET", "/admin/v1/webhooks/deliveries?status=delivered&type=points.level_changed", undefined, admin);
    expect(list.status).toBe(200);
    expect(list.body.deliveries.length).toBeGreaterThanOrEqual(2);
    const one = list.body.deliveries[0];
    expect(one).toMatchObject({ type: "points.level_changed", endpoint: "main", status: "delivered", attempts: 1, lastError: null, responseStatus: 200 });
    const detail = await t.call("GET", `/admin/v1/webhooks/deliveries/${one.id}`, undefined, admin);
    expect(detail.status).toBe(200);
    expect(detail.body.payload).toMatchObject({ id: one.eventId, type: "points.level_changed" });
    expect(detail.body.log).toEqual([expect.stringMatching(/attempt 1: HTTP 200 in \d+ ms$/)]);
    // Pages: limit and offset walk the list without overlap.
    const all = (await t.call("GET", "/admin/v1/webhooks/deliveries?limit=500", undefined, admin)).body.deliveries.map((d: { id: string }) => d.id);
    const first = (await t.call("GET", "/admin/v1/webhooks/deliveries?limit=3", undefined, admin)).body.deliveries.map((d: { id: string }) => d.id);
    const second = (await t.call("GET", "/admin/v1/webhooks/deliveries?limit=3&offset=3", undefined, admin)).body.deliveries.map((d: { id: string }) => d.id);
    expect([...first, ...second]).toEqual(all.slice(0, 6));
    expect(new Set(all).size).toBe(all.length);
    const ofUser = (await t.call("GET", "/admin/v1/webhooks/deliveries?userId=tim&type=points.changed", undefined, admin)).body.deliveries;
    expect(ofUser.length).toBeGreaterThan(0);
    expect(ofUser.every((d: { userId: string; type: string }) => d.userId === "tim" && d.type === "points.changed")).toBe(true);
    const overview = await t.call("GET", "/admin/v1/webhooks", undefined, admin);
    expect(overview.body).toMatchObject({ endpoints: [{ key: "main", url: receiver.url, events: [...WEBHOOK_EVENT_TYPES], coalesce: {}, timeoutSeconds: 10, secrets: 2 }], deliveries: { dead: 0 } });
    expect(JSON.stringify(overview.body)).not.toContain(OLD_SECRET);
  });

  it("answers 404 for an unknown delivery, 401 with an API key, 422 for a bad status", async () => {
    expect((await t.call("GET", "/admin/v1/webhooks/deliveries/nope", undefined, admin)).status).toBe(404);
    expect((await t.call("GET", "/admin/v1/webhooks/deliveries")).status).toBe(401);
    expect((await t.call("GET", "/admin/v1/webhooks/deliveries?status=lost", undefined, admin)).status).toBe(422);
    // An empty filter is no filter, as an empty endpoint, userId or limit is (it was 400 "status is required").
    const unfiltered = await t.call("GET", "/admin/v1/webhooks/deliveries?limit=500", undefined, admin);
    expect(await t.call("GET", "/admin/v1/webhooks/deliveries?status=&type=&endpoint=&userId=&limit=500", undefined, admin)).toEqual(unfiltered);
    // limit 1 to 500 (README: Webhooks).
    for (const limit of ["0", "501"]) {
      expect(await t.call("GET", `/admin/v1/webhooks/deliveries?limit=${limit}`, undefined, admin)).toEqual({ status: 422, body: { error: "limit must be between 1 and 500" } });
    }
    expect((await t.call("GET", "/admin/v1/webhooks/deliveries?limit=500", undefined, admin)).status).toBe(200);
    expect(await t.call("GET", "/admin/v1/webhooks/deliveries?endpoint=nope", undefined, admin)).toEqual({ status: 404, body: { error: "Webhook endpoint not found: nope" } });
    expect((await t.call("POST", "/admin/v1/webhooks/deliveries/nope/replay", {}, admin)).status).toBe(404);
    expect((await t.call("POST", "/admin/v1/webhooks/deliveries/replay", { ids: ["a"], status: "dead" }, admin)).status).toBe(400);
    // Neither is as refused as both; and `limit` (like endpoint and type) selects by status only.
    expect(await t.call("POST", "/admin/v1/webhooks/deliveries/replay", {}, admin)).toEqual({ status: 400, body: { error: "give either ids or status" } });
    expect((await t.call("POST", "/admin/v1/webhooks/deliveries/replay", { ids: ["a"], limit: 5 }, admin)).status).toBe(400);
    // The bulk replay's filters as the listing's: a typo answered 200 with nothing replayed.
    expect(await t.call("POST", "/admin/v1/webhooks/deliveries/replay", { status: "dead", endpoint: "nope" }, admin)).toEqual({ status: 404, body: { error: "Webhook endpoint not found: nope" } });
    const badType = await t.call("POST", "/admin/v1/webhooks/deliveries/replay", { status: "dead", type: "points.exploded" }, admin);
    expect([badType.status, badType.body.error]).toEqual([422, expect.stringContaining("type must be one of achievement.completed, streak.started")]);
    expect((await t.call("GET", "/admin/v1/webhooks/deliveries?type=points.exploded", undefined, admin)).body).toEqual(badType.body);
    // A number too large for a double parses as Infinity: a semantic error (422), named as such.
    const huge = await t.call("POST", "/admin/v1/webhooks/deliveries/replay", '{"status":"dead","limit":1e400}', admin);
    expect(huge).toEqual({ status: 422, body: { error: "body.limit must be a finite number (got Infinity)" } });
  });
});

describe("the consumer's own loop (as the service runs it)", () => {
  it("wakes on a new record (XREADGROUP BLOCK on the hook streams), delivers its events, and stops at once", async () => {
    const consumer = t.app.webhooks!.consumer!;
    consumer.start();
    try {
      expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "looped", tz: "UTC" }, value: 1 })).status).toBe(201);
      // Another part of the service does the work: wait for its effect (bounded by waitFor), not for a time.
      const got = await receiver.waitFor(1, of("achievement.completed", "looped"));
      expect(got[0]!.body).toMatchObject({ type: "achievement.completed", user: { id: "looped" } });
    } finally {
      await consumer.stop();
    }
    expect(await t.app.webhooks!.drain()).toBe(0);
  });
});

describe("a weekly streak's payloads", () => {
  it("streak.started and streak.extended carry `started`, the local day the streak began (a Wednesday), not its week's Monday", async () => {
    const weeklyReceiver = await startReceiver();
    const weekly = await startTestApp({
      yaml: tenantYaml(
        uniqueTenantId("whw"),
        `
    metrics: [{ key: lessons, name: Lessons }]
    streak:
      frequency: weekly
      metrics: [{ metric: lessons, threshold: 1 }]
    webhooks:
      - key: main
        url: ${weeklyReceiver.url}
        secret: ${SECRET}
        events: [streak.started, streak.extended]
`,
      ),
      manualClock: "2026-06-03T12:00:00Z",
    });
    try {
      const lesson = () => weekly.call("POST", "/v1/metrics/lessons/event", { user: { id: "wed", tz: "UTC" }, value: 1 });
      expect((await lesson()).status).toBe(201);
      await weekly.setClock("2026-06-09T12:00:00Z"); // Tuesday of the next week
      expect((await lesson()).status).toBe(201);
      await weekly.app.webhooks!.drain();
      const got = await weeklyReceiver.waitFor(3, () => true);
      const streaks = got.map((r) => [r.body.type, r.body.streak.length, r.body.streak.started, r.body.streak.periodStart]);
      expect(streaks.sort()).toEqual([
        ["streak.extended", 1, "2026-06-03", "2026-06-01"],
        ["streak.extended", 2, "2026-06-03", "2026-06-08"],
        ["streak.started", 1, "2026-06-03", "2026-06-01"],
      ]);
    } finally {
      await weekly.close();
      await weeklyReceiver.close();
    }
  });
});
