import { describe, expect, it } from "vitest";
import { uniqueTenantId, withTestApp, type TestApp } from "../helpers/app.js";
import { lessonsStreakTenantYaml, tenantYaml, xpSystemTenantYaml } from "../helpers/tenant-yaml.js";

/**
 * What happens to stored data when the operator edits the tenant file between two starts (same
 * tenant id, same Redis): each describe starts the service twice (or more) on one tenant with
 * different rules. The project's decisions: what a user holds is kept, never confiscated; an edit
 * takes effect from the start that reads it, never re-paying or re-counting what was done before.
 * (rule-edges.test.ts holds the earlier ones: maxPoints and streak.freezes.max lowered, a metric
 * trigger's threshold changed, autoEarn's everyDays changed.)
 */

const event = (t: TestApp, user: Record<string, unknown>, value: number, metric = "lessons", attributes?: Record<string, string>) =>
  t.call("POST", `/v1/metrics/${metric}/event`, attributes ? { user, value, attributes } : { user, value });

const xpOf = async (t: TestApp, user: string) => (await t.call("GET", `/v1/users/${user}/points/xp`)).body.total as number;

/** The tenant `tenantId` with the metric lessons, an event attribute `source`, and the system xp with `triggers` (a YAML list's items). */
const xpTenant = (tenantId: string, triggers: string): string => xpSystemTenantYaml(tenantId, triggers, "", "    attributes: { event: [source] }\n");

describe("a metric trigger added to a metric users have progress on", () => {
  // Counted from the metric total 0, the new trigger paid every multiple of the user's progress
  // before it existed at the user's next event (500 lessons: 5 000 XP for one more lesson), and
  // only to the users who came back; a filtered trigger added the same way counts from 0 events.
  const tenantId = uniqueTenantId();
  const yaml = (triggers: string) => xpTenant(tenantId, `{ key: start, type: metric, metric: lessons, threshold: 1000, points: 1 }${triggers}`);

  it("pays from the start that added it: the progress made before is not paid, a fall and a rise back to it neither", async () => {
    await withTestApp({ yaml: yaml("") }, async (t) => {
      expect((await event(t, { id: "veteran" }, 50)).body.total).toBe(50);
      expect((await event(t, { id: "faller" }, 50)).body.total).toBe(50);
    });
    await withTestApp({ yaml: yaml(", { key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 10 }") }, async (t) => {
      // 50 → 52: the 51st and 52nd lessons, not 52.
      expect((await event(t, { id: "veteran" }, 2)).body.points.xp).toMatchObject({ added: 20, total: 20 });
      // 50 → 40 → 53: the mark is the total the trigger found (50), so 51 to 53 pay.
      expect((await event(t, { id: "faller" }, -10)).body.points).toEqual({});
      expect((await event(t, { id: "faller" }, 13)).body.points.xp).toMatchObject({ added: 30, total: 30 });
      // A new user: from 0, as ever.
      expect((await event(t, { id: "newcomer" }, 2)).body.points.xp).toMatchObject({ added: 20, total: 20 });
    });
  });
});

describe("a metric trigger given filters, then its filters removed", () => {
  // The trigger keeps its key, and with it its high-water mark. Given filters, it counts its own
  // sum of the events that pass them; removing them, the metric total again. The mark of the one
  // count was taken against the other: given filters, a mark of the total (50) left the trigger
  // paying nothing until the filtered events summed past it (a stall of 50 lessons); removed, a
  // mark of the filtered sum (2) paid the whole difference to the total (48 lessons of events the
  // filter had refused) at once.
  const tenantId = uniqueTenantId();
  const yaml = (filter: string) => xpTenant(tenantId, `{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 10${filter} }`);
  const mobile = { source: "mobile" };

  it("starts the count it now counts at the start that changed it: the own sum from 0, the total from where it stands", async () => {
    await withTestApp({ yaml: yaml("") }, async (t) => {
      expect((await event(t, { id: "u" }, 50)).body.points.xp).toMatchObject({ added: 500, total: 500 });
    });
    await withTestApp({ yaml: yaml(", eventAttributes: { source: mobile }") }, async (t) => {
      // The first mobile lesson pays (it was paid nothing until the 51st before).
      expect((await event(t, { id: "u" }, 1, "lessons", mobile)).body.points.xp).toMatchObject({ added: 10, total: 510 });
      expect((await event(t, { id: "u" }, 47)).body.points).toEqual({});
      expect((await event(t, { id: "u" }, 1, "lessons", mobile)).body.points.xp).toMatchObject({ added: 10, total: 520 });
      expect((await t.call("GET", "/v1/users/u/metrics/lessons")).body.current).toBe(99);
    });
    await withTestApp({ yaml: yaml("") }, async (t) => {
      // The total is 99: the next lesson pays one (it paid 48 × 10 at once before).
      expect((await event(t, { id: "u" }, 1)).body.points.xp).toMatchObject({ added: 10, total: 530 });
    });
    await withTestApp({ yaml: yaml(", eventAttributes: { source: mobile }") }, async (t) => {
      // Filters given again: the own sum starts at 0 again, not at the 2 it held.
      expect((await event(t, { id: "u" }, 1, "lessons", mobile)).body.points.xp).toMatchObject({ added: 10, total: 540 });
    });
  });
});

describe("a composite achievement added, or a part taken out of it, when users have done all its parts", () => {
  // A composite completed only when its last prerequisite did: one added to the config after a
  // user had done all its parts (or whose missing part the config took out) had nothing left to
  // complete it, for ever, where a metric achievement added later completes at the next event.
  const tenantId = uniqueTenantId();
  const yaml = (composites: string) =>
    tenantYaml(
      tenantId,
      `
    metrics: [{ key: lessons, name: Lessons }, { key: quizzes, name: Quizzes }]
    points:
      - key: xp
        name: XP
        triggers: [{ key: both-done, type: achievement, achievement: both, points: 7 }]
    achievements:
      - { key: lesson-1, name: Lesson, type: metric, metric: lessons, value: 1 }
      - { key: quiz-1, name: Quiz, type: metric, metric: quizzes, value: 1 }
      - { key: profile, name: Profile, type: api }
${composites}`,
    );
  const keys = (res: { body: { achievements: { key: string }[] } }) => res.body.achievements.map((a) => a.key);

  it("completes it at the user's next event that meets one of its parts again, and pays its triggers", async () => {
    await withTestApp({ yaml: yaml("      - { key: both, name: Both, type: composite, achievements: [lesson-1, quiz-1, profile] }\n") }, async (t) => {
      for (const id of ["early", "late"]) {
        expect(keys(await event(t, { id }, 1, "lessons"))).toEqual(["lesson-1"]);
        expect(keys(await event(t, { id }, 1, "quizzes"))).toEqual(["quiz-1"]);
      }
    });
    // The API part taken out, and a composite of the composite added.
    await withTestApp(
      { yaml: yaml("      - { key: both, name: Both, type: composite, achievements: [lesson-1, quiz-1] }\n      - { key: all, name: All, type: composite, achievements: [both] }\n") },
      async (t) => {
        const res = await event(t, { id: "early" }, 1, "lessons");
        expect(keys(res)).toEqual(["both", "all"]);
        expect(res.body.points.xp).toMatchObject({ added: 7, total: 7 });
        // Once: the next event completes nothing.
        expect(keys(await event(t, { id: "early" }, 1, "quizzes"))).toEqual([]);
        const listed = (await t.call("GET", "/v1/users/early/achievements")).body.map((a: { key: string }) => a.key);
        expect(listed).toEqual(expect.arrayContaining(["both", "all"]));
        // An event below every part's value meets none: nothing yet for "late".
        expect(keys(await event(t, { id: "late" }, -5, "quizzes"))).toEqual([]);
        expect(keys(await event(t, { id: "late" }, 1, "lessons"))).toEqual(["both", "all"]);
      },
    );
    // A composite added above a composite done: looked through to it.
    await withTestApp({ yaml: yaml("      - { key: both, name: Both, type: composite, achievements: [lesson-1, quiz-1] }\n      - { key: top, name: Top, type: composite, achievements: [both] }\n") }, async (t) => {
      expect(keys(await event(t, { id: "early" }, 1, "quizzes"))).toEqual(["top"]);
    });
  });
});

describe("a composite of API achievements only, added when users have completed all its parts", () => {
  // No event meets an API part again, and a second completion answered 200 and changed nothing:
  // such a composite never completed for the users who had all its parts before it was added.
  const tenantId = uniqueTenantId();
  const yaml = (withComposite: boolean) =>
    xpSystemTenantYaml(
      tenantId,
      withComposite ? "{ key: onboarded, type: achievement, achievement: onboarding, points: 25 }" : "{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 1 }",
      "",
      `    achievements:
      - { key: profile, name: Profile, type: api }
      - { key: avatar, name: Avatar, type: api }
${withComposite ? "      - { key: onboarding, name: Onboarded, type: composite, achievements: [profile, avatar] }\n" : ""}`,
    );
  const complete = (t: TestApp, key: string, user: string) => t.call("POST", `/v1/achievements/${key}/complete`, { user: { id: user } });

  it("completes it at the next completion of one of its parts: a 200 that carries the composite and what it paid, once", async () => {
    let achievedAt = "";
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: yaml(false) }, async (t) => {
      achievedAt = (await complete(t, "profile", "veteran")).body.achievement.achievedAt;
      expect((await complete(t, "avatar", "veteran")).status).toBe(201);
      expect((await complete(t, "profile", "halfway")).status).toBe(201);
    });
    await withTestApp({ manualClock: "2026-06-02T12:00:00Z", jobs: false, yaml: yaml(true) }, async (t) => {
      const again = await complete(t, "profile", "veteran");
      expect(again.status).toBe(200);
      // The part keeps its first completion; the composite is completed now.
      expect(again.body.achievement).toMatchObject({ key: "profile", achievedAt });
      expect(again.body.achievements).toEqual([expect.objectContaining({ key: "onboarding", achievedAt: "2026-06-02T12:00:00.000Z" })]);
      expect(again.body.points.xp).toMatchObject({ added: 25, total: 25 });
      expect(await xpOf(t, "veteran")).toBe(25);
      const listed = (await t.call("GET", "/v1/users/veteran/achievements")).body.map((a: { key: string }) => a.key);
      expect(listed).toContain("onboarding");
      // Once: the next completion of a part changes nothing.
      const third = await complete(t, "avatar", "veteran");
      expect(third.status).toBe(200);
      expect(third.body).toMatchObject({ points: {}, achievements: [] });
      expect(await xpOf(t, "veteran")).toBe(25);
      // A user missing a part: a second completion of the part done completes nothing.
      expect((await complete(t, "profile", "halfway")).body).toMatchObject({ points: {}, achievements: [] });
      // The missing part completes it as ever: 201, with the composite.
      const last = await complete(t, "avatar", "halfway");
      expect(last.status).toBe(201);
      expect(last.body.achievements.map((a: { key: string }) => a.key)).toEqual(["avatar", "onboarding"]);
    });
  });
});

describe("first identification's rules edited: user_creation triggers, streak.freezes.initial", () => {
  // Both apply at a user's first identification only: an edit reaches the users identified from
  // the start that reads it, and changes nothing for those identified before (no payment, no
  // freezes added or taken).
  const tenantId = uniqueTenantId();
  const yaml = (triggers: string, initial: number) =>
    lessonsStreakTenantYaml(
      tenantId,
      "daily",
      `      freezes: { initial: ${initial}, max: 5 }\n`,
      `    points:\n      - key: xp\n        name: XP\n        triggers: [{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 1 }${triggers}]\n`,
    );

  it("apply to the users identified from then on, and leave the others as they were", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: yaml("", 1) }, async (t) => {
      expect((await t.call("POST", "/v1/users", { id: "before" })).status).toBe(201);
    });
    await withTestApp({ manualClock: "2026-06-01T13:00:00Z", jobs: false, yaml: yaml(", { key: welcome, type: user_creation, points: 100 }", 3) }, async (t) => {
      expect((await t.call("PUT", "/v1/users/before", {})).status).toBe(200);
      expect(await xpOf(t, "before")).toBe(0);
      expect((await event(t, { id: "before" }, 0.5)).body.currentStreak).toMatchObject({ freezes: 1 });
      expect((await event(t, { id: "after" }, 0.5)).body).toMatchObject({ points: { xp: { added: 100 } }, currentStreak: { freezes: 3 } });
    });
  });
});

describe("an achievement removed from the tenant file and added back", () => {
  const tenantId = uniqueTenantId();
  const yaml = (achievements: string) =>
    xpSystemTenantYaml(tenantId, "{ key: first, type: achievement, achievement: first-lesson, points: 50 }", "", `    achievements:\n      - { key: other, name: Other, type: api }\n${achievements}`);
  const first = "      - { key: first-lesson, name: First lesson, type: metric, metric: lessons, value: 1 }\n";

  it("keeps the users' completions: none completes it, nor is paid for it, a second time", async () => {
    await withTestApp({ yaml: yaml(first) }, async (t) => {
      expect((await event(t, { id: "u" }, 1)).body.points.xp).toMatchObject({ added: 50 });
    });
    // Without it (and without its trigger, which names it), the user goes on.
    const without = tenantYaml(tenantId, `    metrics: [{ key: lessons, name: Lessons }]\n    achievements:\n      - { key: other, name: Other, type: api }\n`);
    await withTestApp({ yaml: without }, async (t) => {
      expect((await event(t, { id: "u" }, 1)).body.achievements).toEqual([]);
    });
    await withTestApp({ yaml: yaml(first) }, async (t) => {
      const res = await event(t, { id: "u" }, 1);
      expect(res.body.achievements).toEqual([]);
      expect(res.body.points).toEqual({});
      const listed = (await t.call("GET", "/v1/users/u/achievements")).body.map((a: { key: string }) => a.key);
      expect(listed).toContain("first-lesson");
    });
  });
});

describe("streak freezes added to a tenant whose users exist", () => {
  // Decided (README, Streak freezes and restore): the users who exist get no `initial`, and their
  // auto-earned grants are counted from the day of first identification, so the first settlement
  // credits those of the days behind at once, up to `max`.
  const tenantId = uniqueTenantId();
  const yaml = (freezes: string) => lessonsStreakTenantYaml(tenantId, "daily", freezes);

  it("credits the grants behind at the first settlement, within max, and no initial", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: yaml("") }, async (t) => {
      expect((await event(t, { id: "early" }, 0.5)).body.currentStreak.freezes).toBeUndefined();
    });
    const freezes = (max: number) => `      freezes:\n        initial: 2\n        max: ${max}\n        autoEarn: { everyDays: 7, amount: 1 }\n`;
    await withTestApp({ manualClock: "2026-07-01T12:00:00Z", jobs: false, yaml: yaml(freezes(3)) }, async (t) => {
      // Grants on 8, 15, 22 and 29 June: 4 due, 3 at most; a user identified now gets `initial`.
      expect((await t.call("GET", "/v1/users/early/streak")).body).toMatchObject({ freezes: 3, maxFreezes: 3 });
      expect((await event(t, { id: "early" }, 0.5)).body.currentStreak.freezes).toBe(3);
      expect((await event(t, { id: "late" }, 0.5)).body.currentStreak.freezes).toBe(2);
    });
    await withTestApp({ manualClock: "2026-07-02T12:00:00Z", jobs: false, yaml: yaml(freezes(10)) }, async (t) => {
      // max raised: the 4 grants were counted (3 held), the next is on 6 July; `initial` is not given late.
      expect((await event(t, { id: "early" }, 0.5)).body.currentStreak.freezes).toBe(3);
    });
  });
});

describe("a streak metric taken out of the streak and put back on a later day", () => {
  // The period's values are restarted when an event of a streak metric finds another period
  // accumulated: only the metrics the streak counted then were restarted, so a metric out of the
  // streak that day kept its value of an earlier day, and put back the same day, counted it
  // toward today's threshold.
  const tenantId = uniqueTenantId();
  const yaml = (streakMetrics: string) =>
    tenantYaml(
      tenantId,
      `
    metrics: [{ key: lessons, name: Lessons }, { key: quizzes, name: Quizzes }]
    streak:
      frequency: daily
      metrics: [${streakMetrics}]
`,
    );
  const withLessons = "{ metric: lessons, threshold: 5 }";
  const quizzesOnly = "{ metric: quizzes, threshold: 2 }";

  it("counts toward today only the values sent today", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: yaml(withLessons) }, async (t) => {
      // 3 of 5 lessons on 1 June: no extension.
      expect((await event(t, { id: "u" }, 3)).body.currentStreak.length).toBe(0);
    });
    await withTestApp({ manualClock: "2026-06-02T12:00:00Z", jobs: false, yaml: yaml(quizzesOnly) }, async (t) => {
      // 2 June, lessons out of the streak: a quiz starts the day's accumulation.
      expect((await event(t, { id: "u" }, 1, "quizzes")).body.currentStreak.length).toBe(0);
    });
    await withTestApp({ manualClock: "2026-06-02T13:00:00Z", jobs: false, yaml: yaml(withLessons) }, async (t) => {
      // Lessons back the same day: 2 of 5 today (with 1 June's 3 it made 5 and extended).
      expect((await event(t, { id: "u" }, 2)).body.currentStreak.length).toBe(0);
      expect((await event(t, { id: "u" }, 3)).body.currentStreak.length).toBe(1);
    });
  });
});

describe("a metric and a points system removed from the tenant file and added back", () => {
  // Their stored data stays under their keys (the user's state positions are never reused), so
  // the start that adds them back finds each user's totals, level, completions, boosts and
  // groups as they were; what happened meanwhile on the rest of the tenant is not lost either.
  const tenantId = uniqueTenantId();
  const full = tenantYaml(
    tenantId,
    `
    attributes: { user: [plan] }
    metrics: [{ key: lessons, name: Lessons }, { key: quizzes, name: Quizzes }]
    points:
      - key: xp
        name: XP
        triggers: [{ key: per-quiz, type: metric, metric: quizzes, threshold: 1, points: 10 }]
        levels: [{ key: bronze, name: Bronze, points: 20 }]
    achievements:
      - { key: quiz-2, name: Two quizzes, type: metric, metric: quizzes, value: 2 }
`,
  );
  const without = tenantYaml(tenantId, `\n    attributes: { user: [plan] }\n    metrics: [{ key: lessons, name: Lessons }]\n`);
  const ranges = async (t: TestApp, filter: string) =>
    ((await t.call("GET", `/v1/points/xp/summary?userAttributes=${filter}`)).body as { from: number; to: number; users: number }[]).filter((r) => r.users > 0).map((r) => [r.from, r.to, r.users]);

  it("keeps what each user held, and the groups of a user whose attributes changed meanwhile", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: full }, async (t) => {
      const res = await t.call("POST", "/v1/metrics/quizzes/event", { user: { id: "u", attributes: { plan: "free" } }, value: 3 });
      expect(res.body).toMatchObject({ points: { xp: { total: 30 } }, achievements: [{ key: "quiz-2" }] });
      const boost = await t.call("POST", "/admin/v1/points/xp/boosts", { userId: "u", name: "Own", multiplier: 2, start: "2026-06-01T12:00:00Z" }, { "x-api-key": "demo-admin-key" });
      expect(boost.status).toBe(201);
    });
    await withTestApp({ manualClock: "2026-06-01T13:00:00Z", jobs: false, yaml: without }, async (t) => {
      expect((await event(t, { id: "u" }, 1, "quizzes")).status).toBe(404);
      expect((await t.call("GET", "/v1/users/u/points/xp")).status).toBe(404);
      // u moves from free to pro while xp is out of the file.
      expect((await t.call("PATCH", "/v1/users/u", { attributes: { plan: "pro" } })).status).toBe(200);
    });
    await withTestApp({ manualClock: "2026-06-01T14:00:00Z", jobs: false, yaml: full }, async (t) => {
      const points = (await t.call("GET", "/v1/users/u/points/xp?awards=10")).body;
      expect(points).toMatchObject({ total: 30, level: { key: "bronze" } });
      expect(points.awards).toHaveLength(1);
      expect((await t.call("GET", "/v1/users/u/metrics/quizzes")).body.current).toBe(3);
      // u's 30 XP counted with pro, no longer with free.
      expect(await ranges(t, "plan:pro")).toEqual([[21, 30, 1]]);
      expect(await ranges(t, "plan:free")).toEqual([]);
      // The next quiz: the own boost still applies, the achievement is not completed again.
      const res = await event(t, { id: "u" }, 1, "quizzes");
      expect(res.body.points.xp).toMatchObject({ added: 20, total: 50 });
      expect(res.body.achievements).toEqual([]);
    });
  });
});
