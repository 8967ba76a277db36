import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/app.js";

/** The script is atomic per event: parallel requests neither lose nor double-count. */
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ manualClock: "2026-03-02T12:00:00Z" });
});
afterAll(async () => t.close());

const post = (user: string, key?: string) =>
  t.call("POST", "/v1/metrics/lessons/event", { user: { id: user, tz: "UTC" }, value: 1 }, key ? { "idempotency-key": key } : {});

describe("parallel events for one user", () => {
  it("100 events with distinct keys count exactly 100 times", async () => {
    const results = await Promise.all(Array.from({ length: 100 }, (_, i) => post("busy", `k${i}`)));
    expect(results.every((r) => r.status === 201)).toBe(true);
    expect(Math.max(...results.map((r) => r.body.total))).toBe(100);
    expect(new Set(results.map((r) => r.body.total)).size).toBe(100);
    const points = await t.call("GET", "/v1/users/busy/points/xp?awards=100");
    expect(points.body.total).toBe(1000);
    expect(points.body.awards).toHaveLength(100);
    // Exactly one event created the user: one first-identification award.
    const energy = await t.call("GET", "/v1/users/busy/points/energy?awards=100");
    expect(energy.body.awards.filter((a: any) => a.trigger.type === "user_creation")).toHaveLength(1);
  });

  it("100 events with the same key count once", async () => {
    const results = await Promise.all(Array.from({ length: 100 }, () => post("dup", "same")));
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    expect(results.filter((r) => r.status === 202)).toHaveLength(99);
    const original = results.find((r) => r.status === 201)!.body.eventId;
    expect(results.every((r) => r.body.eventId === original && r.body.total === 1)).toBe(true);
    expect((await t.call("GET", "/v1/users/dup/points/xp")).body.total).toBe(10);
  });

  it("100 events without keys for one new user create it once", async () => {
    const results = await Promise.all(Array.from({ length: 100 }, () => post("fresh")));
    expect(results.filter((r) => Object.keys(r.body.points).includes("energy") && r.body.points.energy.awards.some((a: any) => a.trigger.type === "user_creation"))).toHaveLength(1);
    expect(results.flatMap((r) => r.body.achievements.map((a: any) => a.key)).sort()).toEqual(["first-lesson", "ten-lessons"]);
  });
});
