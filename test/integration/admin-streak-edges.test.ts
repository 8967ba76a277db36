import { describe, expect, it } from "vitest";
import { dumpTenant, uniqueTenantId, withTestApp, type TestApp } from "../helpers/app.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";
import { sweepExpiredStreaks } from "../../src/jobs/streak-expiry.js";

/**
 * Edges of the admin streak operations (POST /admin/v1/streaks/restore and /freezes,
 * lua/streakAdmin-9.lua, src/api/admin-streaks.ts) that the oracle property tests reach too
 * rarely to hold them (found by mutation testing): each test fails when the rule it names is
 * broken. No background jobs: only the requests settle the streaks, at the instants chosen.
 */

const ADMIN = { "x-api-key": "demo-admin-key" };

function streakTenant(frequency: "daily" | "weekly" | "monthly", streak = ""): string {
  return tenantYaml(
    uniqueTenantId(),
    `
    metrics: [{ key: lessons, name: Lessons }]
    streak:
      frequency: ${frequency}
      metrics: [{ metric: lessons, threshold: 1 }]
${streak}`,
  );
}

async function lesson(t: TestApp, id: string, at: string): Promise<void> {
  await t.setClock(at);
  const res = await t.call("POST", "/v1/metrics/lessons/event", { user: { id }, value: 1 });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
}

describe("the restore window (README: 90 days daily, 52 weeks weekly, 24 months monthly)", () => {
  // Two users, each with a streak of 1 lost long ago: `inside` extended in the first period of the
  // window (the current period minus the window), `outside` in the period just before it.
  it.each([
    ["daily", "2025-12-31T12:00:00Z", "2026-01-01T12:00:00Z", "2026-04-01T12:00:00Z"], // 1 January + 90 days
    ["weekly", "2025-12-29T12:00:00Z", "2026-01-05T12:00:00Z", "2027-01-04T12:00:00Z"], // the week of 5 January + 52 weeks
    ["monthly", "2025-12-15T12:00:00Z", "2026-01-15T12:00:00Z", "2028-01-15T12:00:00Z"], // January 2026 + 24 months
  ] as const)("%s: the window's first period is in it, the period before is not", async (frequency, outsideAt, insideAt, now) => {
    await withTestApp({ manualClock: outsideAt, jobs: false, yaml: streakTenant(frequency) }, async (t) => {
      await lesson(t, "outside", outsideAt);
      await lesson(t, "inside", insideAt);
      await t.setClock(now);
      const res = await t.call("POST", "/admin/v1/streaks/restore", { users: [{ id: "inside" }, { id: "outside" }] }, ADMIN);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        restoredUsers: ["inside"],
        issues: [{ userId: "outside", level: "warning", reason: "No streak to restore", severity: "warning", message: "No streak to restore" }],
      });
      expect((await t.call("GET", "/v1/users/inside/streak")).body.length).toBe(1);
      expect((await t.call("GET", "/v1/users/outside/streak")).body.length).toBe(0);
    });
  });
});

describe("a restored streak's deadline (the instant the rankings count it lost)", () => {
  it("is the end of tomorrow when restored on a day already extended, the end of today otherwise", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: streakTenant("daily") }, async (t) => {
      // Both extended 1 to 3 June; 4 June missed. `today` extends on 5 June (a new streak of 1),
      // then both are restored to 3 on 5 June.
      for (const day of ["01", "02", "03"]) {
        await lesson(t, "today", `2026-06-${day}T12:00:00Z`);
        await lesson(t, "lapsed", `2026-06-${day}T12:00:00Z`);
      }
      await lesson(t, "today", "2026-06-05T12:00:00Z");
      const res = await t.call("POST", "/admin/v1/streaks/restore", { users: [{ id: "today" }, { id: "lapsed" }] }, ADMIN);
      expect(res.body).toEqual({ restoredUsers: ["today", "lapsed"], issues: [] });
      const active = async () =>
        (await t.call("GET", "/v1/streaks/rankings?type=active")).body.map((r: { userId: string; streakLength: number }) => [r.userId, r.streakLength]);
      // Ties by user id, descending.
      expect(await active()).toEqual([["today", 3], ["lapsed", 3]]);
      // 6 June: `lapsed` was not extended on 5 June, so its streak ended with 5 June; `today`'s
      // lives until 6 June ends. Neither sends anything.
      await t.setClock("2026-06-06T12:00:00Z");
      expect(await active()).toEqual([["today", 3]]);
      expect((await t.call("GET", "/v1/users/today/streak")).body.length).toBe(3);
      expect((await t.call("GET", "/v1/users/lapsed/streak")).body.length).toBe(0);
    });
  });
});

describe("a streak restored after a move west, last covered on a day the new calendar has not reached", () => {
  it("keeps the deadline the zone change placed: it is not moved a day earlier", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: streakTenant("daily") }, async (t) => {
      const kiritimati = async (at: string) => {
        await t.setClock(at);
        expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "w", tz: "Pacific/Kiritimati" }, value: 1 })).status).toBe(201);
      };
      // Kiritimati (UTC+14): 2 to 4 June extended, then lost; a new streak on 10 June.
      for (const at of ["2026-06-01T12:00:00Z", "2026-06-02T12:00:00Z", "2026-06-03T12:00:00Z", "2026-06-09T12:00:00Z"]) await kiritimati(at);
      // Then Pago Pago (UTC-11), where it is 9 June 01:00: the streak covers its 10 June.
      expect((await t.call("PATCH", "/v1/users/w", { tz: "Pacific/Pago_Pago" })).status).toBe(200);
      const { store } = t.app.tenants.all[0]!;
      const deadline = async () => Number(await t.redis.zscore(store.keys.streakDeadline(store.shard("w")), "w"));
      const placed = await deadline();
      expect(new Date(placed).toISOString()).toBe("2026-06-11T11:00:00.000Z");
      const res = await t.call("POST", "/admin/v1/streaks/restore", { users: [{ id: "w" }] }, ADMIN);
      expect(res.body).toEqual({ restoredUsers: ["w"], issues: [] });
      expect(await deadline()).toBe(placed);
      // 10 June 01:00 in Pago Pago: the streak covers today; it is in the active rankings.
      await t.setClock("2026-06-10T12:00:00Z");
      expect((await t.call("GET", "/v1/users/w/streak")).body).toMatchObject({ length: 3, rank: 1 });
      expect((await t.call("GET", "/v1/streaks/rankings?type=active")).body.map((r: { userId: string }) => r.userId)).toEqual(["w"]);
    });
  });
});

describe("the issues of a freeze grant and a restore", () => {
  it("none for a grant within the maximum; a warning past it; an error, in both fields, for an unknown user", async () => {
    const freezes = "      freezes: { initial: 0, max: 2 }\n";
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: streakTenant("daily", freezes) }, async (t) => {
      await lesson(t, "held", "2026-06-01T12:00:00Z");
      const grant = (...ids: string[]) => t.call("POST", "/admin/v1/streaks/freezes", { freezes: ids.map((userId) => ({ userId })) }, ADMIN);
      expect(await grant("held")).toEqual({ status: 200, body: { issues: [] } });
      expect(await grant("held", "held")).toEqual({
        status: 200,
        body: { issues: [{ userId: "held", level: "warning", reason: "Would exceed maximum freeze limit", severity: "warning", message: "Would exceed maximum freeze limit" }] },
      });
      expect((await t.call("GET", "/v1/users/held/streak")).body.freezes).toBe(2);
      const unknown = { userId: "ghost", level: "error", reason: "User does not exist", severity: "error", message: "User does not exist" };
      expect(await grant("ghost")).toEqual({ status: 200, body: { issues: [unknown] } });
      expect(await t.call("POST", "/admin/v1/streaks/restore", { users: [{ id: "ghost" }] }, ADMIN)).toEqual({ status: 200, body: { restoredUsers: [], issues: [unknown] } });
    });
  });
});

describe("bad admin streak requests write nothing", () => {
  it("refuses a malformed user id to restore with 400", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: streakTenant("daily") }, async (t) => {
      await lesson(t, "seed", "2026-06-01T12:00:00Z");
      await t.setClock("2026-06-05T12:00:00Z");
      const tenantId = t.tenants[0]!.id;
      for (const id of ["", " seed", "seed\u0000", "x".repeat(256)]) {
        const before = await dumpTenant(t.redis, tenantId);
        const res = await t.call("POST", "/admin/v1/streaks/restore", { users: [{ id: "seed" }, { id }] }, ADMIN);
        expect(res, JSON.stringify(id)).toEqual({ status: 400, body: { error: "users[1].id must be 1-255 characters without control characters or surrounding spaces" } });
        expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
      }
    });
  });

  it("refuses a restore (and a freeze grant) with 422 on a tenant without a streak", async () => {
    const yaml = tenantYaml(uniqueTenantId(), "    metrics: [{ key: lessons, name: Lessons }]\n");
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml }, async (t) => {
      await lesson(t, "seed", "2026-06-01T12:00:00Z");
      const before = await dumpTenant(t.redis, t.tenants[0]!.id);
      const restore = await t.call("POST", "/admin/v1/streaks/restore", { users: [{ id: "seed" }] }, ADMIN);
      expect(restore).toEqual({ status: 422, body: { error: "This tenant has no streak" } });
      const grant = await t.call("POST", "/admin/v1/streaks/freezes", { freezes: [{ userId: "seed" }] }, ADMIN);
      expect(grant).toEqual({ status: 422, body: { error: "Streak freezes are not enabled for this tenant" } });
      expect(await dumpTenant(t.redis, t.tenants[0]!.id)).toEqual(before);
    });
  });
});

describe("a streak board broken down by an attribute, after the admin streak script", () => {
  // lua/streakAdmin-9.lua read the zone alone: updateBoards found no attribute and skipped the
  // breakdown boards, so a restored streak stayed off its group and a streak the sweep found lost
  // stayed on it (found by the rules property's breakdown streak boards).
  it("holds a restored streak in the user's group, and drops one the expiry sweep finds lost", async () => {
    const yaml = tenantYaml(
      uniqueTenantId(),
      `
    attributes: { user: [region] }
    metrics: [{ key: lessons, name: Lessons }]
    streak:
      frequency: daily
      metrics: [{ metric: lessons, threshold: 1 }]
    leaderboards:
      - { key: by-region, name: By region, rankBy: streak, start: "2026-01-01", breakdownAttribute: region }`,
    );
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml }, async (t) => {
      for (const at of ["2026-06-01T12:00:00Z", "2026-06-02T12:00:00Z", "2026-06-03T12:00:00Z"]) {
        await t.setClock(at);
        for (const id of ["back", "gone"]) {
          const res = await t.call("POST", "/v1/metrics/lessons/event", { user: { id, attributes: { region: "eu" } }, value: 1 });
          expect(res.status).toBe(201);
        }
      }
      const group = async () =>
        (await t.call("GET", "/v1/leaderboards/by-region?userAttributes=region:eu")).body.rankings.map((r: { userId: string; value: number }) => [r.userId, r.value]);
      expect(await group()).toEqual([["gone", 3], ["back", 3]]);
      // 4 and 5 June missed: both lost. The sweep settles them, leaving the board; `back` is restored to 3.
      await t.setClock("2026-06-06T12:00:00Z");
      const { store } = t.app.tenants.all[0]!;
      expect(await sweepExpiredStreaks(store, t.clock.now())).toBe(2);
      expect(await group()).toEqual([]);
      const res = await t.call("POST", "/admin/v1/streaks/restore", { users: [{ id: "back" }] }, ADMIN);
      expect(res.body).toEqual({ restoredUsers: ["back"], issues: [] });
      expect(await group()).toEqual([["back", 3]]);
    });
  });
});
