import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";

/**
 * Edges of POST /v1/achievements/{key}/complete (lua/complete-4.lua, includes/achievements.lua,
 * src/api/complete.ts) that the oracle property tests reach too rarely to hold them (found by
 * mutation testing): each test fails when the rule it names is broken.
 *
 * Two API achievements, a and b; composites of both: `both` for everyone (7 XP), `pro-both` for
 * plan=pro users only (100 XP); a perpetual XP board.
 */

let t: TestApp;

beforeAll(async () => {
  const yaml = tenantYaml(
    uniqueTenantId("compl"),
    `
    metrics: [{ key: lessons, name: Lessons }]
    attributes: { user: [plan] }
    points:
      - key: xp
        name: XP
        triggers:
          - { key: on-both, type: achievement, achievement: both, points: 7 }
          - { key: on-pro-both, type: achievement, achievement: pro-both, points: 100 }
    achievements:
      - { key: a, name: A, type: api }
      - { key: b, name: B, type: api }
      - { key: both, name: Both, type: composite, achievements: [a, b] }
      - { key: pro-both, name: Pro both, type: composite, achievements: [a, b], userAttributes: { plan: pro } }
    leaderboards:
      - { key: xp-board, name: XP, rankBy: points, points: xp, start: "2026-01-01" }
`,
  );
  t = await startTestApp({ yaml, manualClock: "2026-03-02T12:00:00Z", jobs: false });
});
afterAll(async () => t.close());

const complete = (key: string, user: Record<string, unknown>) => t.call("POST", `/v1/achievements/${key}/complete`, { user });
const keys = (res: { body: { achievements: { key: string }[] } }) => res.body.achievements.map((a) => a.key);

describe("a completion that unlocks composites", () => {
  it("completes a composite only with its last prerequisite, and only for users its filter matches", async () => {
    const first = await complete("a", { id: "ann" });
    expect([first.status, keys(first), first.body.points]).toEqual([201, ["a"], {}]);
    const second = await complete("b", { id: "ann" });
    expect(second.status).toBe(201);
    // `pro-both` is not ann's: no plan.
    expect(keys(second)).toEqual(["b", "both"]);
    expect(second.body.points.xp).toMatchObject({ added: 7, total: 7 });

    await complete("a", { id: "pat", attributes: { plan: "pro" } });
    const pro = await complete("b", { id: "pat" });
    expect(keys(pro)).toEqual(["b", "both", "pro-both"]);
    expect(pro.body.points.xp).toMatchObject({ added: 107, total: 107 });
  });

  it("counts each achievement it completed once, and moves the boards its points changed", async () => {
    const all = await t.call("GET", "/v1/achievements");
    expect(all.body.map((a: { key: string; completions: number }) => [a.key, a.completions])).toEqual([
      ["a", 2],
      ["b", 2],
      ["both", 2],
      ["pro-both", 1],
    ]);
    const board = await t.call("GET", "/v1/leaderboards/xp-board");
    expect(board.body.rankings.map((r: { userId: string; value: number }) => [r.userId, r.value])).toEqual([
      ["pat", 107],
      ["ann", 7],
    ]);
  });
});

describe("the completionId", () => {
  it("is one per user and achievement: the same when completed again, another for another user", async () => {
    const once = await complete("a", { id: "cid-1" });
    const again = await complete("a", { id: "cid-1" });
    const other = await complete("a", { id: "cid-2" });
    const otherAchievement = await complete("b", { id: "cid-1" });
    expect([once.status, again.status, other.status, otherAchievement.status]).toEqual([201, 200, 201, 201]);
    expect(again.body.completionId).toBe(once.body.completionId);
    expect(new Set([once.body.completionId, other.body.completionId, otherAchievement.body.completionId]).size).toBe(3);
  });
});
