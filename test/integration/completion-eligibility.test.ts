import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dumpTenant, startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";

/**
 * An API completion refused because the user's attributes do not match the achievement's
 * (422) writes nothing, though the request carries attributes: before, lua/complete-4.lua
 * applied the request's profile first, which moved the user between the attribute indexes
 * ({t:s}:uv:<attr>:<value>, {t:s}:pa:<sys>:<attr>:<value>) and so corrupted the filtered
 * summaries, and gave an unknown user a phantom index entry.
 */

let t: TestApp;
const tenantId = uniqueTenantId("elig");

beforeAll(async () => {
  const yaml = tenantYaml(
    tenantId,
    `
    metrics: [{ key: lessons, name: Lessons }]
    attributes: { user: [plan] }
    points:
      - key: xp
        name: XP
        triggers: [{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 10 }]
    achievements:
      - { key: pro-only, name: Pro only, type: api, userAttributes: { plan: pro } }
`,
  );
  t = await startTestApp({ yaml, manualClock: "2026-03-02T12:00:00Z", jobs: false });
  for (const id of ["bob", "ann"]) {
    expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id, attributes: { plan: "pro" } }, value: 1 })).status).toBe(201);
  }
});
afterAll(async () => t.close());

async function summaryUsers(plan: string): Promise<number> {
  const res = await t.call("GET", `/v1/points/xp/summary?userAttributes=plan:${plan}`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return (res.body as { users: number }[]).reduce((sum, bucket) => sum + bucket.users, 0);
}

describe("an API completion refused for the user's attributes", () => {
  it("writes nothing for a known user whose request sends other attributes", async () => {
    const before = await dumpTenant(t.redis, tenantId);
    const res = await t.call("POST", "/v1/achievements/pro-only/complete", { user: { id: "bob", attributes: { plan: "enterprise" } } });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ error: "User bob does not have the attributes achievement pro-only requires" });
    expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
    expect(await summaryUsers("pro")).toBe(2);
    expect(await summaryUsers("enterprise")).toBe(0);
  });

  it("quotes the user id cut to 64 UTF-16 units, as every message quotes what was sent", async () => {
    const id = "\u{1F9ED}".repeat(255);
    const res = await t.call("POST", "/v1/achievements/pro-only/complete", { user: { id, attributes: { plan: "enterprise" } } });
    expect(res).toEqual({ status: 422, body: { error: `User ${"\u{1F9ED}".repeat(32)} does not have the attributes achievement pro-only requires` } });
  });

  it("writes nothing for an unknown user", async () => {
    const before = await dumpTenant(t.redis, tenantId);
    const res = await t.call("POST", "/v1/achievements/pro-only/complete", { user: { id: "ghost", attributes: { plan: "enterprise" } } });
    expect(res.status).toBe(422);
    expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
    expect(await summaryUsers("enterprise")).toBe(0);
  });

  it("judges the attributes the request sends: a matching request completes and moves the user", async () => {
    const res = await t.call("POST", "/v1/achievements/pro-only/complete", { user: { id: "newcomer", attributes: { plan: "pro" } } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    // A stored match, overridden by the request, is refused.
    const refused = await t.call("POST", "/v1/achievements/pro-only/complete", { user: { id: "ann", attributes: { plan: "free" } } });
    expect(refused.status).toBe(422);
    expect(await summaryUsers("pro")).toBe(3);
    expect(await summaryUsers("free")).toBe(0);
  });
});
