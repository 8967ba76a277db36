import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/app.js";

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ manualClock: "2026-03-02T12:00:00Z" });
});
afterAll(async () => t.close());

const event = (metric: string, user: Record<string, unknown>, value: number, headers: Record<string, string> = {}) =>
  t.call("POST", `/v1/metrics/${metric}/event`, { user, value }, headers);

describe("POST /v1/metrics/{key}/event", () => {
  it("creates the user, pays the first-identification trigger and the metric trigger, completes the achievement", async () => {
    const res = await event("lessons", { id: "ada", email: "ada@example.com", tz: "Europe/London" }, 1);
    expect(res.status).toBe(201);
    const body = res.body;
    expect(body.total).toBe(1);
    expect(body.metricId).toMatch(/^[0-9a-f-]{36}$/);
    expect(body.metricName).toBe("Lessons completed"); // service-spec, Metric
    expect(body.eventId).toMatch(/^[0-9a-f-]{36}$/);
    expect(body.achievements.map((a: any) => a.key)).toEqual(["first-lesson"]);
    expect(body.achievements[0].achievedAt).toBe("2026-03-02T12:00:00.000Z");
    expect(body.points.xp).toMatchObject({ key: "xp", total: 10, added: 10, maxPoints: null });
    expect(body.points.xp.awards).toHaveLength(1);
    expect(body.points.xp.awards[0]).toMatchObject({ awarded: 10, total: 10, trigger: { type: "metric", points: 10, metricThreshold: 1, metricName: "Lessons completed" } });
    expect(body.points.xp).not.toHaveProperty("level");
    expect(body.points.energy).toMatchObject({ total: 100, added: 100, maxPoints: 100 });
    expect(body.points.energy.awards[0].trigger).toMatchObject({ type: "user_creation", points: 100 });
    expect(body.currentStreak).toMatchObject({
      length: 1,
      frequency: "daily",
      started: "2026-03-02",
      periodStart: "2026-03-02",
      periodEnd: "2026-03-02",
      expires: "2026-03-03",
      extended: true,
    });
    // The demo boards the event moved: the perpetual XP board and the weekly lessons board.
    expect(Object.keys(body.leaderboards).sort()).toEqual(["weekly-lessons", "xp-all-time"]);
    expect(body.leaderboards["xp-all-time"]).toMatchObject({ rank: 1, previousRank: null, threshold: 0, rankBy: "points", maxParticipants: 1000 });
    expect(body).not.toHaveProperty("idempotencyKey");
  });

  it("pays each newly crossed multiple once, above the high-water mark", async () => {
    const user = { id: "hw-user" };
    expect((await event("lessons", user, 2.5)).body.points.xp.added).toBe(20);
    // 2.5 → 1.5: no new multiple crossed; total falls, no points change.
    const down = await event("lessons", user, -1);
    expect(down.body.total).toBe(1.5);
    expect(down.body.points).toEqual({});
    // 1.5 → 3.5: only the multiple 3 is new (2 was paid already).
    const up = await event("lessons", user, 2);
    expect(up.body.points.xp).toMatchObject({ added: 10, total: 30 });
  });

  it("reports a level only when it changes, by the strictly-exceeds rule", async () => {
    const user = { id: "leveller" };
    // 5 lessons → 50 XP: equal to bronze's 50, not above it.
    const five = await event("lessons", user, 5);
    expect(five.body.points.xp.total).toBe(50);
    expect(five.body.points.xp).not.toHaveProperty("level");
    const six = await event("lessons", user, 1);
    expect(six.body.points.xp.level).toMatchObject({ key: "bronze", points: 50 });
    const read = await t.call("GET", "/v1/users/leveller/points/xp?awards=2");
    expect(read.status).toBe(200);
    expect(read.body.level).toMatchObject({ key: "bronze" });
    expect(read.body.awards.map((a: any) => a.total)).toEqual([60, 50]);
  });

  it("never deducts below zero and never grants above maxPoints", async () => {
    const user = { id: "meter" };
    const first = await event("api-calls", user, 30);
    expect(first.body.points.energy).toMatchObject({ total: 70, added: 70 });
    expect(first.body.points.energy.awards.map((a: any) => a.awarded)).toEqual([100, -30]);
    const drain = await event("api-calls", user, 100);
    expect(drain.body.points.energy).toMatchObject({ total: 0, added: -70 });
    const empty = await event("api-calls", user, 1);
    expect(empty.body.points).toEqual({});
    const read = await t.call("GET", "/v1/users/meter/points/energy");
    expect(read.body.total).toBe(0);
  });

  it("keeps decimal totals exact", async () => {
    const user = { id: "decimals" };
    await event("api-calls", user, 0.1);
    const res = await event("api-calls", user, 0.2);
    expect(res.body.total).toBe(0.3);
  });

  it("replays an idempotency key with 202, the original event id and no side effects", async () => {
    const user = { id: "idem" };
    const first = await event("lessons", user, 1, { "idempotency-key": "lesson-42" });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ idempotencyKey: "lesson-42", idempotentReplayed: false });
    const again = await event("lessons", user, 1, { "idempotency-key": "lesson-42" });
    expect(again.status).toBe(202);
    expect(again.body).toMatchObject({ eventId: first.body.eventId, total: 1, achievements: [], points: {}, idempotentReplayed: true, idempotencyKey: "lesson-42" });
    expect(again.body.currentStreak).toMatchObject({ length: 1, extended: false });
    // Rule 4: the same key on another metric is a separate request.
    const other = await event("api-calls", user, 1, { "idempotency-key": "lesson-42" });
    expect(other.status).toBe(201);
  });

  it("answers a replay that sends another zone on the user's stored calendar: it writes nothing, the zone included", async () => {
    // 10:30 UTC is 23:30 on 1 March at Pago Pago (UTC-11), 00:30 on 3 March at Kiritimati (UTC+14).
    await t.setClock("2026-03-02T10:30:00Z");
    try {
      const first = await event("lessons", { id: "replay-zone", tz: "Pacific/Pago_Pago" }, 1, { "idempotency-key": "z-1" });
      expect(first.body.currentStreak).toMatchObject({ length: 1, periodStart: "2026-03-01", expires: "2026-03-02", extended: true });
      const { streakHistory: _history, rank: _rank, ...stored } = (await t.call("GET", "/v1/users/replay-zone/streak")).body;
      for (const tz of ["Pacific/Kiritimati", "Asia/Tokyo", "Pacific/Pago_Pago", null]) {
        const again = await t.call("POST", "/api/metrics/lessons/event", { user: { id: "replay-zone", tz }, value: 1 }, { "idempotency-key": "z-1" });
        expect(again.status, String(tz)).toBe(202);
        // Read on Kiritimati's calendar the streak looked lost (length 0: 2 March missed), though
        // the user's zone, and so the streak, stayed Pago Pago's.
        expect(again.body.currentStreak, String(tz)).toEqual({ ...stored, extended: false });
      }
      expect((await t.call("GET", "/v1/users/replay-zone")).body.tz).toBe("Pacific/Pago_Pago");
    } finally {
      await t.setClock("2026-03-02T12:00:00Z");
    }
  });

  it("serves the legacy /api path too", async () => {
    const res = await t.call("POST", "/api/metrics/lessons/event", { user: { id: "legacy" }, value: 1 });
    expect(res.status).toBe(201);
    expect(res.body.total).toBe(1);
  });
});
