import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { demoConfig, startTestApp, type TestApp } from "../helpers/app.js";

/**
 * GET /v1/points/{key}/summary?userAttributes=...: only users whose attributes match every pair
 * (trophy-compat §2.2 #21), from the per-shard groups by attribute value, kept up to date when a
 * total or an attribute changes.
 */
let t: TestApp;
beforeAll(async () => {
  const yaml = demoConfig().yaml.replace("      user: [plan]", "      user: [plan, region]");
  t = await startTestApp({ yaml, manualClock: "2026-03-02T12:00:00Z", jobs: false });
  const lessons = async (id: string, attributes: Record<string, string> | null, value: number) =>
    t.call("POST", "/v1/metrics/lessons/event", { user: attributes ? { id, attributes } : { id }, value });
  await lessons("p1", { plan: "pro", region: "eu" }, 3); // 30 xp
  await lessons("p2", { plan: "pro", region: "us" }, 12); // 120 xp
  await lessons("f1", { plan: "free", region: "eu" }, 1); // 10 xp
  await lessons("n1", null, 5); // no attributes
  await t.call("PUT", "/v1/users/z1", { attributes: { plan: "pro", region: "eu" } }); // no xp at all
});
afterAll(async () => t.close());

const users = (body: { from: number; to: number; users: number }[]) => body.filter((r) => r.users > 0).map((r) => [r.from, r.to, r.users]);

describe("points summary filtered by user attributes", () => {
  it("one pair counts that group, users without points in 0..0", async () => {
    const pro = await t.call("GET", "/v1/points/xp/summary?userAttributes=plan:pro");
    expect(pro.status).toBe(200);
    expect(users(pro.body)).toEqual([[0, 0, 1], [1, 100, 1], [101, 200, 1]]);
    const free = await t.call("GET", "/v1/points/xp/summary?userAttributes=plan:free");
    // Up to 10 the ten ranges are one point wide.
    expect(users(free.body)).toEqual([[10, 10, 1]]);
  });

  it("several pairs must all match", async () => {
    const res = await t.call("GET", "/v1/points/xp/summary?userAttributes=plan:pro,region:eu");
    expect(users(res.body)).toEqual([[0, 0, 1], [21, 30, 1]]);
  });

  it("an attribute change moves the user between groups, with their totals", async () => {
    await t.call("PATCH", "/v1/users/p2", { attributes: { plan: "free" } });
    expect(users((await t.call("GET", "/v1/points/xp/summary?userAttributes=plan:pro")).body)).toEqual([[0, 0, 1], [21, 30, 1]]);
    expect(users((await t.call("GET", "/v1/points/xp/summary?userAttributes=plan:free")).body)).toEqual([[1, 100, 1], [101, 200, 1]]);
    // A new total is reflected in the group at once.
    await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "f1" }, value: 20 });
    expect(users((await t.call("GET", "/v1/points/xp/summary?userAttributes=plan:free")).body)).toEqual([[101, 200, 1], [201, 300, 1]]);
  });

  it("a total of exactly 1 counts as points, not in 0..0, under one pair or several", async () => {
    // A mobile lesson pays 1 coin (config/demo.yaml): lua/pointsHistogram-2.lua counts a total
    // of 1 among the users with points, also where several pairs intersect the groups.
    const res = await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "c1", attributes: { plan: "pro", region: "ap" } }, value: 1, attributes: { source: "mobile" } });
    expect(res.body.points.coins.total).toBe(1);
    for (const filter of ["region:ap", "plan:pro,region:ap"]) {
      expect(users((await t.call("GET", `/v1/points/coins/summary?userAttributes=${filter}`)).body), filter).toEqual([[1, 1, 1]]);
    }
  });

  it("an empty value counts the users saved with the empty string, not those without the attribute", async () => {
    await t.call("PUT", "/v1/users/e1", { attributes: { plan: "" } });
    await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "e1" }, value: 2 }); // 20 xp
    await t.call("PUT", "/v1/users/e2", { attributes: { plan: "", region: "eu" } }); // no xp at all
    // n1 (no attributes, 50 xp) is not among them.
    const res = await t.call("GET", "/v1/points/xp/summary?userAttributes=plan:");
    expect(res.status).toBe(200);
    expect(users(res.body)).toEqual([[0, 0, 1], [11, 20, 1]]);
    expect(users((await t.call("GET", "/v1/points/xp/summary?userAttributes=plan:,region:eu")).body)).toEqual([[0, 0, 1]]);
    // A value set later moves the user out of the empty group.
    await t.call("PATCH", "/v1/users/e1", { attributes: { plan: "pro" } });
    expect(users((await t.call("GET", "/v1/points/xp/summary?userAttributes=plan:")).body)).toEqual([[0, 0, 1]]);
  });

  it("an undeclared attribute is refused", async () => {
    expect((await t.call("GET", "/v1/points/xp/summary?userAttributes=tier:gold")).status).toBe(422);
  });

  it("a value with a control character is malformed (400), on every read that takes the filter, as on a leaderboard's", async () => {
    // No stored attribute value can hold one: it answered 200 with no users before.
    for (const path of ["/v1/points/xp/summary", "/v1/achievements"]) {
      expect(await t.call("GET", `${path}?userAttributes=plan:pr%01o`), path).toEqual({ status: 400, body: { error: "userAttributes values must be without control characters" } });
    }
  });
});
