import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, uniqueTenantId, withTestApp, type TestApp } from "../helpers/app.js";
import { lessonsStreakTenantYaml, tenantYaml } from "../helpers/tenant-yaml.js";
import { startReceiver } from "../helpers/webhook-receiver.js";

/**
 * Edges of the event path's rules that the oracle property tests reach too rarely to hold them
 * (found by mutation testing lua/: each test here fails when the rule it names is broken in the
 * Lua, and passes with the rule as the spec and src/domain/model.ts state it). Each describe has
 * its own tenant, so the numbers are the rules' alone.
 */

const event = (t: TestApp, user: Record<string, unknown>, value: number, metric = "lessons") =>
  t.call("POST", `/v1/metrics/${metric}/event`, { user, value });

describe("metric triggers and boosts", () => {
  let t: TestApp;
  let tenantId: string;
  beforeAll(async () => {
    tenantId = uniqueTenantId();
    t = await startTestApp({
      manualClock: "2026-05-31T12:00:00Z",
      yaml: tenantYaml(
        tenantId,
        `
    metrics: [{ key: lessons, name: Lessons }]
    points:
      - key: xp
        name: XP
        triggers: [{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 10 }]
        boosts:
          - { key: june, name: June, multiplier: 2, start: "2026-06-01T00:00:00Z", end: "2026-07-01T00:00:00Z" }
`,
      ),
    });
  });
  afterAll(async () => t.close());

  it("never pays a multiple below the high-water mark again, even after falling one micro-unit under it", async () => {
    const u = { id: "hw-micro" };
    expect((await event(t, u, 2)).body.points.xp).toMatchObject({ added: 20, total: 20 });
    const down = await event(t, u, -0.000001);
    expect(down.body.total).toBe(1.999999);
    expect(down.body.points).toEqual({});
    // Back to 2: the multiple 2 was paid when 2 was first reached.
    const back = await event(t, u, 0.000001);
    expect(back.body.total).toBe(2);
    expect(back.body.points).toEqual({});
  });

  it("applies a global boost from its start instant (inclusive), not from the millisecond after", async () => {
    const u = { id: "boost-start" };
    await t.setClock("2026-05-31T23:59:59.999Z");
    expect((await event(t, u, 1)).body.points.xp.added).toBe(10);
    await t.setClock("2026-06-01T00:00:00.000Z");
    expect((await event(t, u, 1)).body.points.xp.added).toBe(20);
  });

  it("stops a global boost at its end instant (exclusive): the millisecond before is boosted, the end is not", async () => {
    // Spec: "Boost active | time reaches end | ... | multiplication stops".
    const u = { id: "boost-end" };
    await t.setClock("2026-06-30T23:59:59.999Z");
    expect((await event(t, u, 1)).body.points.xp.added).toBe(20);
    await t.setClock("2026-07-01T00:00:00.000Z");
    expect((await event(t, u, 1)).body.points.xp.added).toBe(10);
  });

  it("snaps a product that misses an integer by float noise: 100 x 1.1 rounded up is 110, not 111", async () => {
    await t.setClock("2026-07-02T00:00:00Z");
    const u = { id: "noise" };
    expect((await event(t, u, 1)).body.points.xp.added).toBe(10);
    const boost = await t.call(
      "POST",
      "/admin/v1/points/xp/boosts",
      { userId: "noise", name: "Ten percent", multiplier: 1.1, start: "2026-07-02T00:00:00Z", end: null, rounding: "up" },
      { "x-api-key": "demo-admin-key" },
    );
    expect(boost.status).toBe(201);
    // Ten multiples crossed at once: 100 points, boosted as one amount (100 x 1.1 = 110.00000000000001).
    expect((await event(t, u, 10)).body.points.xp.added).toBe(110);
  });

  it("keeps the last 100 awards per user and system: the stored list is trimmed, not left to grow", async () => {
    const u = { id: "many-awards" };
    for (let i = 0; i < 125; i++) expect((await event(t, u, 1)).status).toBe(201);
    const read = await t.call("GET", "/v1/users/many-awards/points/xp?awards=100");
    expect(read.body.total).toBe(1250);
    expect(read.body.awards).toHaveLength(100);
    const [listKey] = await scanKeys(t, `{${tenantId}:*}:aw:xp:many-awards`);
    // Trimmed to 100 whenever a push takes it past 120 (lua/includes/points.lua AWARDS_SLACK): the
    // 121st award left 100, four more make 104.
    expect(await t.redis.llen(listKey!)).toBe(104);
  });
});

async function scanKeys(t: TestApp, match: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = "0";
  do {
    const [next, batch] = await t.redis.scan(cursor, "MATCH", match, "COUNT", 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== "0");
  return keys;
}

describe("a filtered trigger's running sum", () => {
  // Events the filter passes and events it does not can drive the trigger's own sum past the
  // metric total's range (the total stays within 0..1e9 here); the sum saturates at ±9e9 units.
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({
      yaml: tenantYaml(
        uniqueTenantId(),
        `
    metrics: [{ key: lessons, name: Lessons }]
    attributes: { event: [source] }
    points:
      - key: coins
        name: Coins
        triggers:
          - { key: up, type: metric, metric: lessons, threshold: 1000000000, points: 1, eventAttributes: { source: up } }
          - { key: down, type: metric, metric: lessons, threshold: 1000000000, points: 1, eventAttributes: { source: down } }
`,
      ),
    });
  });
  afterAll(async () => t.close());

  const send = (userId: string, value: number, source: string) => t.call("POST", "/v1/metrics/lessons/event", { user: { id: userId }, value, attributes: { source } });

  it("keeps each filtered trigger's sum apart: one user's events through two filters", async () => {
    const coins = async (source: string) => (await send("two-sums", 1e9, source)).body.points.coins?.added ?? 0;
    expect(await coins("up")).toBe(1);
    // down's own sum is 1e9 (one multiple), not the 2e9 of both filters' events.
    expect(await coins("down")).toBe(1);
    expect(await coins("up")).toBe(1);
    expect(await coins("other")).toBe(0);
  });

  it("stops paying at +9e9 units: the tenth billion through the filter pays nothing", async () => {
    const paid: number[] = [];
    for (let i = 1; i <= 10; i++) {
      const up = await send("sat-up", 1e9, "up");
      expect(up.status).toBe(201);
      paid.push(up.body.points.coins?.added ?? 0);
      expect((await send("sat-up", -1e9, "other")).body.total).toBe(0);
    }
    expect(paid).toEqual([1, 1, 1, 1, 1, 1, 1, 1, 1, 0]);
  });

  it("holds at -9e9 units: after twelve billions down, the tenth billion up crosses the first multiple", async () => {
    // Down through the filter, back up outside it: the sum falls to -9e9 and no further.
    for (let i = 0; i < 12; i++) {
      expect((await send("sat-down", -1e9, "down")).status).toBe(201);
      expect((await send("sat-down", 1e9, "other")).body.total).toBe(0);
    }
    // Up through the filter: nine billions bring the sum back to 0, the tenth pays (a sum kept at
    // -12e9 would need thirteen).
    const paid: number[] = [];
    for (let i = 1; i <= 10; i++) {
      paid.push((await send("sat-down", 1e9, "down")).body.points.coins?.added ?? 0);
      await send("sat-down", -1e9, "other");
    }
    expect(paid).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
  });
});

describe("event-attribute filters", () => {
  // Node evaluates them (domain/filters.ts) for the script's mask and for the reference model
  // alike, so the property tests cannot see them wrong: the numbers here are the spec's.
  it("pay only an event whose attributes match every pair; an absent attribute never matches", async () => {
    const yaml = tenantYaml(
      uniqueTenantId(),
      `
    metrics: [{ key: lessons, name: Lessons }]
    attributes: { event: [source, plan] }
    points:
      - key: coins
        name: Coins
        triggers:
          - { key: pro-mobile, type: metric, metric: lessons, threshold: 1, points: 5, eventAttributes: { source: mobile, plan: pro } }
`,
    );
    await withTestApp({ yaml }, async (t) => {
      const paid = async (attributes?: Record<string, string>) => {
        const res = await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "filtered" }, value: 1, ...(attributes ? { attributes } : {}) });
        expect(res.status).toBe(201);
        return res.body.points.coins?.added ?? 0;
      };
      expect(await paid()).toBe(0);
      expect(await paid({ source: "mobile" })).toBe(0);
      expect(await paid({ source: "mobile", plan: "free" })).toBe(0);
      expect(await paid({ source: "web", plan: "pro" })).toBe(0);
      // The trigger counts only the events that pass: this is its first unit.
      expect(await paid({ source: "mobile", plan: "pro" })).toBe(5);
      expect(await paid({ plan: "pro" })).toBe(0);
    });
  });
});

describe("composite achievements across metrics", () => {
  // An event's script gets only the achievements its metric can reach (src/store/rules.ts): a
  // composite is among them when any of its prerequisites is, with all its prerequisites.
  it("an event on one metric completes a composite whose other prerequisite another metric completed", async () => {
    const yaml = tenantYaml(
      uniqueTenantId(),
      `
    metrics: [{ key: lessons, name: Lessons }, { key: quizzes, name: Quizzes }]
    achievements:
      - { key: lesson-1, name: Lesson, type: metric, metric: lessons, value: 1 }
      - { key: quiz-1, name: Quiz, type: metric, metric: quizzes, value: 1 }
      - { key: both, name: Both, type: composite, achievements: [lesson-1, quiz-1] }
`,
    );
    await withTestApp({ yaml }, async (t) => {
      const keys = async (metric: string, user: string) => (await event(t, { id: user }, 1, metric)).body.achievements.map((a: { key: string }) => a.key);
      expect(await keys("quizzes", "q-first")).toEqual(["quiz-1"]);
      expect(await keys("lessons", "q-first")).toEqual(["lesson-1", "both"]);
      expect(await keys("lessons", "l-first")).toEqual(["lesson-1"]);
      expect(await keys("quizzes", "l-first")).toEqual(["quiz-1", "both"]);
    });
  });
});

describe("maxPoints lowered below a total already reached", () => {
  const tenantId = uniqueTenantId();
  const yaml = (cap: number) =>
    tenantYaml(
      tenantId,
      `
    metrics: [{ key: lessons, name: Lessons }]
    points:
      - key: coins
        name: Coins
        maxPoints: ${cap}
        triggers: [{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 60 }]
`,
    );

  it("keeps the total above the new cap: a grant changes nothing, it does not cut the total down", async () => {
    await withTestApp({ manualClock: "2026-06-01T00:00:00Z", yaml: yaml(100) }, async (first) => {
      expect((await event(first, { id: "rich" }, 1)).body.points.coins).toMatchObject({ added: 60, total: 60 });
      expect((await event(first, { id: "rich" }, 1)).body.points.coins).toMatchObject({ added: 40, total: 100 });
    });
    await withTestApp({ manualClock: "2026-06-02T00:00:00Z", yaml: yaml(50) }, async (second) => {
      const res = await event(second, { id: "rich" }, 1);
      expect(res.status).toBe(201);
      expect(res.body.points).toEqual({});
      expect((await second.call("GET", "/v1/users/rich/points/coins")).body.total).toBe(100);
    });
  });
});

describe("a metric trigger's threshold changed in the config", () => {
  const tenantId = uniqueTenantId();
  const yaml = (threshold: number, points: number) =>
    tenantYaml(tenantId, `    metrics: [{ key: lessons, name: Lessons }]\n    points:\n      - key: coins\n        name: Coins\n        triggers: [{ key: per-lessons, type: metric, metric: lessons, threshold: ${threshold}, points: ${points} }]\n`);

  it("pays the new amount for each multiple of the new threshold above the high-water mark, nothing again for progress made", async () => {
    await withTestApp({ yaml: yaml(10, 100) }, async (first) => {
      expect((await event(first, { id: "hw" }, 12)).body.points.coins).toMatchObject({ added: 100, total: 100 });
    });
    await withTestApp({ yaml: yaml(5, 7) }, async (second) => {
      // 12 → 14: no multiple of 5 above 12 crossed (10 was paid under the old rule).
      expect((await event(second, { id: "hw" }, 2)).body.points).toEqual({});
      // 14 → 21: 15 and 20 crossed, 7 each.
      expect((await event(second, { id: "hw" }, 7)).body.points.coins).toMatchObject({ added: 14, total: 114 });
    });
  });
});


/** lessonsStreakTenantYaml for a new tenant, unless `tenantId` names one (a config edited between two starts). */
const streakTenant = (frequency: "daily" | "weekly" | "monthly", streak: string, rest = "", tenantId = uniqueTenantId()): string =>
  lessonsStreakTenantYaml(tenantId, frequency, streak, rest);

const freezes = (initial: number, max: number, everyDays: number, amount = 1) =>
  `      freezes:\n        initial: ${initial}\n        max: ${max}\n        autoEarn: { everyDays: ${everyDays}, amount: ${amount} }\n`;

// No background jobs: only the events settle the streaks, at the instants the tests choose.
describe("streak freezes: auto-earned grants and consumptions in day order", () => {
  it("credits a grant due on the very day a missed period is to consume a freeze, before consuming it", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: streakTenant("daily", freezes(0, 2, 2)) }, async (t) => {
      const u = { id: "same-day" };
      expect((await event(t, u, 1)).body.currentStreak).toMatchObject({ length: 1, freezes: 0 });
      // 2 June missed. On 3 June the grant earned that day (2 days after 1 June) covers 2 June.
      await t.setClock("2026-06-03T12:00:00Z");
      expect((await event(t, u, 1)).body.currentStreak).toMatchObject({ length: 2, freezes: 0, extended: true });
    });
  });

  it("records the freezes an event consumed in its stream record, where streak.freeze_consumed comes from", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: streakTenant("daily", freezes(1, 1, 30)) }, async (t) => {
      const u = { id: "consumer" };
      expect((await event(t, u, 1)).body.currentStreak).toMatchObject({ length: 1, freezes: 1 });
      // 2 June missed, and no sweep ran: the event of 3 June consumes the freeze.
      await t.setClock("2026-06-03T12:00:00Z");
      expect((await event(t, u, 1)).body.currentStreak).toMatchObject({ length: 2, freezes: 0 });
      const { store } = t.app.tenants.all[0]!;
      const records = await t.redis.xrange(store.keys.prefix(store.shard("consumer")) + "x", "-", "+");
      const parts = records.map(([, fields]) => fields.join(" "));
      expect(parts.filter((text) => /(^|[ ;])fc:1([ ;]|$)/.test(text))).toHaveLength(1);
    });
  });

  it("never holds more than the maximum: grants at the maximum are lost, whether or not a period waits for a freeze", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: streakTenant("daily", freezes(2, 2, 1)) }, async (t) => {
      // A streak with two missed days: grants on 2 and 3 June come while at the maximum; the
      // consumptions for 2 and 3 June take one each; the grant of 4 June refills one.
      const live = { id: "interleaved" };
      expect((await event(t, live, 1)).body.currentStreak).toMatchObject({ length: 1, freezes: 2 });
      // No streak at all: three grants due at once, none above the maximum.
      const idle = { id: "idle" };
      expect((await event(t, idle, 0.5)).body.currentStreak).toMatchObject({ length: 0, freezes: 2 });
      await t.setClock("2026-06-04T12:00:00Z");
      expect((await event(t, live, 1)).body.currentStreak).toMatchObject({ length: 2, freezes: 1, extended: true });
      expect((await event(t, idle, 0.5)).body.currentStreak).toMatchObject({ length: 0, freezes: 2 });
    });
  });

  it("grants `amount` freezes every `everyDays` days, up to the maximum (found by mutation: every test's amount was 1)", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: streakTenant("daily", freezes(0, 5, 2, 3)) }, async (t) => {
      const live = { id: "live" };
      expect((await event(t, live, 1)).body.currentStreak).toMatchObject({ length: 1, freezes: 0, freezeAutoEarnAmount: 3 });
      const idle = { id: "idle" };
      expect((await event(t, idle, 0.5)).body.currentStreak).toMatchObject({ length: 0, freezes: 0 });
      // Grants on 3 and 5 June, 3 each, 5 held at most. The live streak: each missed day is
      // consumed the next day, after that day's grant: 3 June +3 −1 (2 June), 4 June −1 (3 June),
      // 5 June +3 −1 (4 June): 3 left, and the streak goes on.
      await t.setClock("2026-06-05T12:00:00Z");
      expect((await t.call("GET", "/v1/users/idle/streak")).body).toMatchObject({ length: 0, freezes: 5 });
      expect((await event(t, live, 1)).body.currentStreak).toMatchObject({ length: 2, freezes: 3, extended: true });
      expect((await event(t, idle, 0.5)).body.currentStreak).toMatchObject({ length: 0, freezes: 5 });
    });
  });

  it("credits the grants due after a streak is lost in the same settlement, as an admin grant sees them", async () => {
    // The event reply and the streak read settle again in the service; an admin grant settles in
    // Lua alone, then grants: the only route that shows what the stored settlement credited.
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: streakTenant("daily", freezes(0, 2, 7)) }, async (t) => {
      expect((await event(t, { id: "g" }, 1)).body.currentStreak).toMatchObject({ length: 1, freezes: 0 });
      // Lost on 3 June (2 June missed, no freeze); grants on 8 and 15 June: 2 held, the maximum.
      await t.setClock("2026-06-16T12:00:00Z");
      const grant = await t.call("POST", "/admin/v1/streaks/freezes", { freezes: [{ userId: "g" }] }, { "x-api-key": "demo-admin-key" });
      expect(grant.status).toBe(200);
      expect(grant.body.issues).toEqual([expect.objectContaining({ userId: "g", reason: "Would exceed maximum freeze limit" })]);
      expect((await t.call("GET", "/v1/users/g/streak")).body).toMatchObject({ length: 0, freezes: 2 });
    });
  });

  it("weekly: a missed week is consumed at the Monday that starts the next one, after that Monday's grant", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: streakTenant("weekly", freezes(0, 1, 14)) }, async (t) => {
      // Monday 1 June: week 1 extended. The week of 8 June missed. Monday 15 June: the grant (14
      // days after 1 June) and the consumption of the missed week fall on the same day.
      const u = { id: "weekly" };
      expect((await event(t, u, 1)).body.currentStreak).toMatchObject({ length: 1, periodStart: "2026-06-01" });
      await t.setClock("2026-06-15T12:00:00Z");
      expect((await event(t, u, 1)).body.currentStreak).toMatchObject({ length: 2, freezes: 0, started: "2026-06-01" });
    });
  });

  it("monthly: a missed January is due on 1 February, before a grant of 4 February", async () => {
    await withTestApp({ manualClock: "2025-12-01T12:00:00Z", jobs: false, yaml: streakTenant("monthly", freezes(0, 1, 65)) }, async (t) => {
      const u = { id: "monthly" };
      expect((await event(t, u, 1)).body.currentStreak).toMatchObject({ length: 1, periodStart: "2025-12-01" });
      // January missed: on 1 February no freeze is held (the first is earned on 4 February), so
      // the streak is lost; the grant is still credited.
      await t.setClock("2026-02-10T12:00:00Z");
      // The new streak began on the day of this lesson (`started`), not on the 1st.
      expect((await event(t, u, 1)).body.currentStreak).toMatchObject({ length: 1, freezes: 1, started: "2026-02-10" });
    });
  });
});

describe("streak freezes: the maximum lowered below what a user holds", () => {
  // As maxPoints lowered (above): what a user holds is kept. Grants add none while a user holds
  // the new maximum or more, and take none away (before, an auto-earned grant cut the freezes
  // held down to the new maximum, and reported a negative number earned).
  const tenantId = uniqueTenantId();
  const yaml = (max: number) => streakTenant("daily", freezes(Math.min(3, max), max, 2), "", tenantId);

  it("keeps the freezes held: they cover missed days as before, and grants and admin grants add none above the new maximum", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: yaml(3) }, async (first) => {
      expect((await event(first, { id: "keeper" }, 1)).body.currentStreak).toMatchObject({ length: 1, freezes: 3 });
      expect((await event(first, { id: "idle" }, 0.5)).body.currentStreak).toMatchObject({ length: 0, freezes: 3 });
    });
    await withTestApp({ manualClock: "2026-06-05T12:00:00Z", jobs: false, yaml: yaml(1) }, async (second) => {
      // keeper missed 2, 3 and 4 June. 3 June: the grant adds none (3 held, 1 the maximum), the
      // freeze for 2 June is used (2 left); 4 June: 3 June's (1 left); 5 June: the grant adds
      // none (1 held), 4 June's is used. The streak lives on.
      expect((await event(second, { id: "keeper" }, 1)).body.currentStreak).toMatchObject({ length: 2, freezes: 0, maxFreezes: 1, extended: true });
      // idle: grants on 3 and 5 June, at or above the maximum: still 3.
      expect((await second.call("GET", "/v1/users/idle/streak")).body).toMatchObject({ length: 0, freezes: 3, maxFreezes: 1 });
      const grant = await second.call("POST", "/admin/v1/streaks/freezes", { freezes: [{ userId: "idle" }] }, { "x-api-key": "demo-admin-key" });
      expect(grant.status).toBe(200);
      expect(grant.body.issues).toEqual([expect.objectContaining({ userId: "idle", reason: "Would exceed maximum freeze limit" })]);
      expect((await second.call("GET", "/v1/users/idle/streak")).body).toMatchObject({ freezes: 3 });
      // The admin grant settled in Lua alone: the stored count is still 3.
      expect((await event(second, { id: "idle" }, 0.5)).body.currentStreak).toMatchObject({ freezes: 3 });
    });
  });
});

describe("streak freezes: autoEarn's everyDays changed", () => {
  // Grants come everyDays after the last one (fgd). Counted from the day of first
  // identification, a raised everyDays left users without a grant for as many of its periods as
  // they had been credited, and a lowered one credited a burst of grants for the days behind.
  const tenantId = uniqueTenantId();
  const yaml = (everyDays: number) => streakTenant("daily", freezes(0, 50, everyDays), "", tenantId);
  // Below the streak's threshold: the user's freezes settle, no streak is involved.
  const visit = async (t: TestApp, id: string) => (await event(t, { id }, 0.5)).body.currentStreak.freezes as number;

  it("counts the next grant from the last one, whether everyDays was lowered or raised", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: yaml(7) }, async (t) => {
      expect(await visit(t, "u")).toBe(0);
      await t.setClock("2026-06-15T12:00:00Z");
      expect(await visit(t, "u")).toBe(2); // 8 and 15 June
    });
    // Each phase reads first (settled in the service, from what is stored), then sends an event
    // (settled in the script).
    const readFreezes = async (t: TestApp) => (await t.call("GET", "/v1/users/u/streak")).body.freezes as number;
    await withTestApp({ manualClock: "2026-06-18T12:00:00Z", jobs: false, yaml: yaml(1) }, async (t) => {
      expect(await readFreezes(t)).toBe(5); // 16, 17 and 18 June, not one a day since 1 June
      expect(await visit(t, "u")).toBe(5);
    });
    await withTestApp({ manualClock: "2026-06-24T12:00:00Z", jobs: false, yaml: yaml(7) }, async (t) => {
      expect(await visit(t, "u")).toBe(5);
      await t.setClock("2026-06-25T12:00:00Z");
      expect(await readFreezes(t)).toBe(6); // a week after 18 June, not 5 × 7 days after 1 June
      expect(await visit(t, "u")).toBe(6);
      expect((await t.call("GET", "/v1/users/u/streak")).body).toMatchObject({ freezes: 6, freezeAutoEarnInterval: 7 });
    });
  });

  it("counts a state written before the last grant's day was kept from the day of first identification, and keeps the day from its next settlement", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: yaml(7) }, async (t) => {
      expect(await visit(t, "old")).toBe(0);
      expect(await visit(t, "migrated")).toBe(0);
      await t.setClock("2026-06-15T12:00:00Z");
      expect(await visit(t, "old")).toBe(2);
      expect(await visit(t, "migrated")).toBe(2);
      // Take fgd out of the stored states, as a build before it left them.
      const { store } = t.app.tenants.all[0]!;
      const slot = Number(await t.redis.hget(store.keys.slots(), "fgd"));
      expect(slot).toBeGreaterThan(0);
      for (const id of ["old", "migrated"]) {
        const userKey = store.keys.prefix(store.shard(id)) + "u:" + id;
        await t.redis.eval("local s = cmsgpack.unpack(redis.call('HGET', KEYS[1], 's')); s[tonumber(ARGV[1])] = false; redis.call('HSET', KEYS[1], 's', cmsgpack.pack(s))", 1, userKey, slot);
      }
      // The read and the event count from 1 June by the 2 grants credited: the next on 22 June.
      // The event, crediting none, writes the day of the last grant (15 June) all the same.
      await t.setClock("2026-06-21T12:00:00Z");
      expect((await t.call("GET", "/v1/users/old/streak")).body.freezes).toBe(2);
      expect(await visit(t, "old")).toBe(2);
      expect(await visit(t, "migrated")).toBe(2);
      await t.setClock("2026-06-22T12:00:00Z");
      expect((await t.call("GET", "/v1/users/old/streak")).body.freezes).toBe(3);
      expect(await visit(t, "old")).toBe(3);
    });
    // everyDays lowered after that settlement: counted from 15 June (16 to 23 June: 8), not as 2
    // daily grants from 1 June (20 more).
    await withTestApp({ manualClock: "2026-06-23T12:00:00Z", jobs: false, yaml: yaml(1) }, async (t) => {
      expect(await visit(t, "migrated")).toBe(10);
    });
  });
});

describe("streak triggers and streak achievements", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({
      manualClock: "2026-06-01T12:00:00Z",
      jobs: false,
      yaml: streakTenant(
        "daily",
        "",
        `    points:
      - key: xp
        name: XP
        triggers: [{ key: every-second-day, type: streak, length: 2, points: 5 }]
    achievements:
      - { key: three-days, name: Three days, type: streak, length: 3 }
`,
      ),
    });
  });
  afterAll(async () => t.close());

  it("a streak trigger pays at each multiple of its length, and only there; a streak achievement completes at its length", async () => {
    const u = { id: "daily" };
    const seen: { length: number; xp: number | null; achievements: string[] }[] = [];
    for (let day = 1; day <= 6; day++) {
      await t.setClock(`2026-06-0${day}T12:00:00Z`);
      const res = await event(t, u, 1);
      seen.push({ length: res.body.currentStreak.length, xp: res.body.points.xp?.added ?? null, achievements: res.body.achievements.map((a: { key: string }) => a.key) });
    }
    expect(seen).toEqual([
      { length: 1, xp: null, achievements: [] },
      { length: 2, xp: 5, achievements: [] },
      { length: 3, xp: null, achievements: ["three-days"] },
      { length: 4, xp: 5, achievements: [] },
      { length: 5, xp: null, achievements: [] },
      { length: 6, xp: 5, achievements: [] },
    ]);
  });
});

describe("streak.freeze_earned for an auto-earned freeze", () => {
  it("is sent when an event credits a freeze earned by the days since first identification", async () => {
    const receiver = await startReceiver();
    const hook = `      - { key: main, url: "${receiver.url}", secret: "a-test-secret-0123456789", events: [streak.freeze_earned] }\n`;
    const t = await startTestApp({ manualClock: "2026-06-01T12:00:00Z", yaml: streakTenant("daily", freezes(0, 2, 1)) + `    webhooks:\n${hook}` });
    try {
      // No streak (0.5 is below the threshold), so no deadline: only the second event settles.
      expect((await event(t, { id: "earner" }, 0.5)).body.currentStreak).toMatchObject({ freezes: 0 });
      await t.setClock("2026-06-02T12:00:00Z");
      expect((await event(t, { id: "earner" }, 0.5)).body.currentStreak).toMatchObject({ freezes: 1 });
      await t.app.webhooks!.drain();
      const [earned] = await receiver.waitFor(1, (r) => r.body.type === "streak.freeze_earned");
      expect(earned!.body).toMatchObject({ type: "streak.freeze_earned", timestamp: "2026-06-02T12:00:00.000Z", user: { id: "earner" }, earned: 1, freezes: 1 });
    } finally {
      await t.close();
      await receiver.close();
    }
  });
});

describe("leaderboard ranks in the event reply", () => {
  let t: TestApp;
  let tenantId: string;
  beforeAll(async () => {
    tenantId = uniqueTenantId();
    t = await startTestApp({
      manualClock: "2026-06-01T12:00:00Z",
      jobs: false,
      yaml: tenantYaml(
        tenantId,
        `
    shards: 2
    metrics: [{ key: lessons, name: Lessons }]
    leaderboards:
      - { key: dense-lessons, name: Dense lessons, rankBy: metric, metric: lessons, start: "2026-01-01", ranking: dense }
`,
      ),
    });
  });
  afterAll(async () => t.close());

  it("dense: counts the distinct values above, not the users (two tied above make rank 2)", async () => {
    for (const id of ["tied-a", "tied-b", "tied-c"]) expect((await event(t, { id }, 5)).body.leaderboards["dense-lessons"].rank).toBe(1);
    const res = await event(t, { id: "below" }, 3);
    expect(res.body.leaderboards["dense-lessons"]).toMatchObject({ rank: 2 });
    const page = await t.call("GET", "/v1/leaderboards/dense-lessons?limit=10");
    expect(page.body.rankings.map((r: { userId: string; rank: number }) => r.rank)).toEqual([1, 1, 1, 2]);
  });

  it("keeps the last 100 rank changes of a user in a run: the stored history is trimmed, not left to grow", async () => {
    // Alone in its value, the user's rank is given at every change: one history entry each.
    for (let i = 0; i < 125; i++) expect((await event(t, { id: "climber" }, 1)).status).toBe(201);
    const read = await t.call("GET", "/v1/users/climber/leaderboards/dense-lessons?numEvents=100");
    expect(read.body.history).toHaveLength(100);
    const [historyKey] = await scanKeys(t, `{${tenantId}:*}:lh:dense-lessons:*:climber`);
    const length = await t.redis.llen(historyKey!);
    expect(length).toBeGreaterThanOrEqual(100);
    expect(length).toBeLessThanOrEqual(120);
  });
});

describe("a streak restored on a day the new streak was already extended", () => {
  it("keeps today's extension: the restored streak is not extended twice today, and expires after tomorrow", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: streakTenant("daily", "") }, async (t) => {
      const u = { id: "restored" };
      for (const day of ["01", "02", "03"]) {
        await t.setClock(`2026-06-${day}T12:00:00Z`);
        expect((await event(t, u, 1)).status).toBe(201);
      }
      // 4 June missed; 5 June starts a new streak of 1, then the admin restores the 3.
      await t.setClock("2026-06-05T12:00:00Z");
      expect((await event(t, u, 1)).body.currentStreak).toMatchObject({ length: 1, started: "2026-06-05" });
      await t.setClock("2026-06-05T12:00:00.500Z");
      const res = await t.call("POST", "/admin/v1/streaks/restore", { users: [{ id: "restored" }] }, { "x-api-key": "demo-admin-key" });
      expect(res.body.restoredUsers).toEqual(["restored"]);
      expect((await event(t, u, 1)).body.currentStreak).toMatchObject({ length: 3, extended: false, started: "2026-06-03", expires: "2026-06-06" });
      // The history holds the restored streak (3 June to today, 1 to 3): before, 4 June read 0
      // and today 1 beside a streak of 3 that started on 3 June.
      const read = await t.call("GET", "/v1/users/restored/streak?historyPeriods=5");
      // `extended`: today's extension, kept.
      expect(read.body).toMatchObject({ length: 3, started: "2026-06-03", extended: "2026-06-05T12:00:00.000Z" });
      expect(read.body.streakHistory.map((h: { periodStart: string; length: number }) => [h.periodStart, h.length])).toEqual([
        ["2026-06-01", 1],
        ["2026-06-02", 2],
        ["2026-06-03", 1],
        ["2026-06-04", 2],
        ["2026-06-05", 3],
      ]);
      await t.setClock("2026-06-06T12:00:00Z");
      expect((await event(t, u, 1)).body.currentStreak).toMatchObject({ length: 4, started: "2026-06-03" });
      // Wrapped's longest streak walks the history back to its start: the same start.
      const wrapped = await t.call("GET", "/v1/users/restored/wrapped?year=2026");
      expect(wrapped.body.activity.entireYear.longestStreak).toMatchObject({ length: 4, started: "2026-06-03", periodStart: "2026-06-03", periodEnd: "2026-06-06" });
    });
  });
});

describe("a streak restored on a day not extended yet", () => {
  it("reads `extended` as the restore's instant: the extension before belongs to the lost streak", async () => {
    // Found by an audit (the twenty-eighth stop): `extended` showed 2 June, older than `started` (3 June).
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: streakTenant("daily", "") }, async (t) => {
      const u = { id: "lapsed" };
      for (const day of ["01", "02"]) {
        await t.setClock(`2026-06-${day}T12:00:00Z`);
        expect((await event(t, u, 1)).status).toBe(201);
      }
      await t.setClock("2026-06-04T09:30:00Z");
      const res = await t.call("POST", "/admin/v1/streaks/restore", { users: [{ id: "lapsed" }] }, { "x-api-key": "demo-admin-key" });
      expect(res.body.restoredUsers).toEqual(["lapsed"]);
      const read = await t.call("GET", "/v1/users/lapsed/streak");
      expect(read.body).toMatchObject({ length: 2, started: "2026-06-02", extended: "2026-06-04T09:30:00.000Z" });
      const bulk = await t.call("GET", "/v1/streaks?userIds=lapsed");
      expect(bulk.body).toEqual([{ userId: "lapsed", streakLength: 2, extended: "2026-06-04T09:30:00.000Z" }]);
    });
  });
});

describe("a restore asked of a streak extended yesterday, at its best length", () => {
  it("restores nothing: the streak is alive (extendable today) and already at that length", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: streakTenant("daily", "") }, async (t) => {
      const u = { id: "yesterday" };
      for (const day of ["01", "02"]) {
        await t.setClock(`2026-06-${day}T12:00:00Z`);
        expect((await event(t, u, 1)).status).toBe(201);
      }
      await t.setClock("2026-06-03T09:30:00Z");
      const res = await t.call("POST", "/admin/v1/streaks/restore", { users: [{ id: "yesterday" }] }, { "x-api-key": "demo-admin-key" });
      expect(res.body).toEqual({ restoredUsers: [], issues: [expect.objectContaining({ userId: "yesterday", level: "warning", reason: "Streak is already at maximum length" })] });
      const read = await t.call("GET", "/v1/users/yesterday/streak?historyPeriods=2");
      expect(read.body).toMatchObject({ length: 2, extended: "2026-06-02T12:00:00.000Z" });
      // No freezes in this tenant: the history's periods have no usedFreeze (trophy-compat §3.3).
      expect(read.body.streakHistory).toEqual([
        { periodStart: "2026-06-02", periodEnd: "2026-06-02", length: 2 },
        { periodStart: "2026-06-03", periodEnd: "2026-06-03", length: 0 },
      ]);
    });
  });
});

describe("a streak read after a move west, with periods extended ahead of the new local day", () => {
  it("still finds the current period's length in a history of one period", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: streakTenant("daily", "") }, async (t) => {
      // Kiritimati (UTC+14): 2 and 3 June extended; then Pago Pago (UTC-11), where it is 2 June.
      expect((await event(t, { id: "west", tz: "Pacific/Kiritimati" }, 1)).status).toBe(201);
      await t.setClock("2026-06-02T12:00:00Z");
      expect((await event(t, { id: "west" }, 1)).status).toBe(201);
      expect((await t.call("PATCH", "/v1/users/west", { tz: "Pacific/Pago_Pago" })).status).toBe(200);
      const read = await t.call("GET", "/v1/users/west/streak?historyPeriods=1");
      expect(read.body.streakHistory).toEqual([{ periodStart: "2026-06-02", periodEnd: "2026-06-02", length: 1 }]);
    });
  });
});

describe("a streak restored to thousands of periods", () => {
  /**
   * A user of 1 June 2026 whose history says the streak once reached 5 000 (a member of 1 June:
   * what the restore reads), lost by 4 June and restored then. The history's key and 1 June's period.
   */
  async function restoredVeteran(t: TestApp, userId: string): Promise<{ historyKey: string; june1: number }> {
    expect((await event(t, { id: userId }, 1)).status).toBe(201);
    const [historyKey] = await scanKeys(t, `*}:sh:${userId}`);
    const june1 = Number((await t.redis.zrange(historyKey!, 0, 0))[0]!.split(":")[0]);
    await t.redis.zadd(historyKey!, june1, `${june1}:5000`);
    await t.setClock("2026-06-04T12:00:00Z"); // lost
    const res = await t.call("POST", "/admin/v1/streaks/restore", { users: [{ id: userId }] }, { "x-api-key": "demo-admin-key" });
    expect(res.status).toBe(200);
    expect(res.body.restoredUsers).toEqual([userId]);
    return { historyKey: historyKey!, june1 };
  }

  it("writes its whole history (in ZADDs of 1000: one would pass Lua's unpack limit, after the history was cleared)", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: streakTenant("daily", "") }, async (t) => {
      const { historyKey, june1 } = await restoredVeteran(t, "veteran");
      expect(await t.redis.zcount(historyKey, june1 + 3 - 5000, june1 + 2)).toBe(5000);
      expect((await t.call("GET", "/v1/users/veteran/streak?historyPeriods=3")).body).toMatchObject({ length: 5000, started: "2012-09-25" });
    });
  });

  it("keeps the live streak's history whole when it trims, so wrapped finds where the streak began", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: streakTenant("daily", "") }, async (t) => {
      const { historyKey, june1 } = await restoredVeteran(t, "marathon");
      // 4 June is period 20608, a multiple of 64: this extension trims the history. Trimmed to
      // the last 800 periods, wrapped walked back to April 2024 and called that the start.
      expect((june1 + 3) % 64).toBe(0);
      expect((await event(t, { id: "marathon" }, 1)).body.currentStreak).toMatchObject({ length: 5001, started: "2012-09-25" });
      expect(await t.redis.zcard(historyKey)).toBe(5001);
      const wrapped = await t.call("GET", "/v1/users/marathon/wrapped?year=2026");
      expect(wrapped.body.activity.entireYear.longestStreak).toMatchObject({ length: 5001, started: "2012-09-25", periodEnd: "2026-06-04" });
    });
  });
});

describe("a zone change sent with an API achievement's completion", () => {
  it("moves a live streak's deadline to the new zone's calendar", async () => {
    const tenantId = uniqueTenantId();
    const yaml = tenantYaml(
      tenantId,
      `
    shards: 1
    metrics: [{ key: lessons, name: Lessons }]
    achievements:
      - { key: profile, name: Profile, type: api }
    streak:
      frequency: daily
      metrics: [{ metric: lessons, threshold: 1 }]
`,
    );
    await withTestApp({ manualClock: "2026-06-09T01:00:00Z", jobs: false, yaml }, async (t) => {
      const tokyo = { id: "mover", tz: "Asia/Tokyo" };
      expect((await event(t, tokyo, 1)).status).toBe(201);
      await t.setClock("2026-06-10T01:00:00Z");
      expect((await event(t, tokyo, 1)).body.currentStreak.length).toBe(2);
      // Tokyo's deadline: the end of June 11 there.
      expect(Number(await t.redis.zscore(`{${tenantId}:0}:sd`, "mover"))).toBe(Date.parse("2026-06-11T15:00:00Z"));
      await t.setClock("2026-06-10T17:00:00Z");
      const done = await t.call("POST", "/v1/achievements/profile/complete", { user: { id: "mover", tz: "America/New_York" } });
      expect(done.status).toBe(201);
      // Last extended June 10, New York's today: lost at New York's end of June 11.
      expect(Number(await t.redis.zscore(`{${tenantId}:0}:sd`, "mover"))).toBe(Date.parse("2026-06-12T04:00:00Z"));
    });
  });
});
