import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { loadConfigText } from "../../src/config/load.js";
import { applyComplete, applyEvent, applyStreakAdmin, applyTimeTicks, applyUpsert, applyUserBoost, emptyState, readUserPoints, refreshThresholds, streakState, type ModelState } from "../../src/domain/model.js";
import type { CompiledTenant } from "../../src/config/compiled.js";
import { localDayIndex, periodOfDay } from "../../src/domain/periods.js";
import { settleCopy, viewStreak } from "../../src/domain/streak.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";

/**
 * Edges of the reference model that its property tests with the Lua reach too rarely; the Lua's
 * side of each is driven through the API in test/integration (named beside each describe). The
 * demo's `coins` system pays 5 a day from first identification (`daily-allowance`) and 1 for
 * every 1 `lessons` sent with the event attribute source=mobile (`mobile-lesson`).
 */
const tenant = loadConfigText(readFileSync(new URL("../../config/demo.yaml", import.meta.url), "utf8"), "demo.yaml", {})[0]!;
const DAY = 86_400_000;
const T0 = Date.parse("2026-12-20T12:00:00Z");
const boost = (id: string, multiplier: number, start: number, end: number) => ({ id, multiplier, start, end, rounding: "down" as const });

function userWithDoubleDay() {
  const state = emptyState();
  applyUpsert(tenant, state, "u", "upsert", [["tz", "UTC"]], T0); // due T0 + 1 day
  applyUserBoost(tenant, state, "u", "coins", "add", boost("double", 2, T0 + 0.5 * DAY, T0 + 1.5 * DAY), T0);
  return state;
}

// lua/userBoost-3.lua; test/integration/time-triggers.test.ts
describe("finished user boosts in the model", () => {
  it("keeps a finished boost while an interval due inside it is unpaid", () => {
    const state = userWithDoubleDay();
    applyUserBoost(tenant, state, "u", "coins", "add", boost("later", 3, T0 + 20 * DAY, T0 + 21 * DAY), T0 + 3 * DAY + 3_600_000);
    expect(state.users.get("u")!.boosts.get("coins")!.map((b) => b.id)).toEqual(["double", "later"]);
    applyTimeTicks(tenant, state, T0 + 3 * DAY + 3_600_000);
    // Intervals due T0 + 1 day (inside the boost: 10), + 2 days and + 3 days (5 each).
    expect(readUserPoints(state, "u", "coins", 10)!.awards.map((a) => a.awarded)).toEqual([20]);
  });

  it("drops it once every interval it covers is paid", () => {
    const state = userWithDoubleDay();
    applyTimeTicks(tenant, state, T0 + 3 * DAY + 3_600_000);
    applyUserBoost(tenant, state, "u", "coins", "add", boost("later", 3, T0 + 20 * DAY, T0 + 21 * DAY), T0 + 3 * DAY + 3_600_000);
    expect(state.users.get("u")!.boosts.get("coins")!.map((b) => b.id)).toEqual(["later"]);
  });
});

// lua/event-2.lua; test/integration/rule-edges.test.ts
describe("a filtered trigger's running sum in the model", () => {
  it("saturates at +9e9 units though the metric total stays small", () => {
    const state = emptyState();
    const lesson = (n: number, value: number, source: string) =>
      applyEvent(tenant, state, { metricKey: "lessons", userId: "m", now: T0 + n, eventId: `e${n}`, idempotencyKey: null, valueMicro: value * 1e6, tz: null, profile: [], eventAttributes: { source } });
    for (let i = 0; i < 10; i++) {
      lesson(2 * i, 1e9, "mobile");
      lesson(2 * i + 1, -1e9, "web");
    }
    const coins = readUserPoints(state, "m", "coins", 100)!;
    expect(coins.total).toBe(9e9);
    expect(state.users.get("m")!.metrics.get("lessons")).toBe(0);
  });
});

// lua/includes/leaderboards.lua fellSince; test/integration/leaderboards.test.ts ("values that fell since the threshold was read")
describe("a board's values that fell since its threshold was read, in the model", () => {
  it("leave a climber past the board's new last place on it, though not past the threshold read before", () => {
    const boards = loadConfigText(
      tenantYaml("falls", "    metrics: [{ key: sc, name: Score }]\n    leaderboards:\n      - { key: two, name: Two, rankBy: metric, metric: sc, start: \"2026-01-01\", maxParticipants: 2 }\n"),
      "falls.yaml",
      {},
    )[0]!;
    const state = emptyState();
    const score = (n: number, userId: string, value: number) =>
      applyEvent(boards, state, { metricKey: "sc", userId, now: T0 + n, eventId: `e${n}`, idempotencyKey: null, valueMicro: value * 1e6, tz: null, profile: [], eventAttributes: null });
    const rankOf = (result: ReturnType<typeof score>) => (result.outcome.kind === "processed" ? result.outcome.boards[0]?.rank : undefined);
    score(1, "a", 10);
    score(2, "b", 9);
    score(3, "c", 8);
    refreshThresholds(boards, state, T0 + 3); // 9
    score(4, "a", -9); // the board: b 9, c 8
    expect(rankOf(score(5, "d", 8.5))).toBe(2);
    // Read again (8.5): a value that ties it, reached later, is behind it.
    refreshThresholds(boards, state, T0 + 6);
    expect(rankOf(score(7, "e", 8.5))).toBeNull();
  });
});

// lua/streakAdmin-9.lua; test/integration/admin-streak-edges.test.ts, test/integration/streaks.test.ts ("weekly: `started`")
describe("a restore in the model", () => {
  const streakTenant = (frequency: "daily" | "weekly") =>
    loadConfigText(
      tenantYaml("restore", `    metrics: [{ key: lessons, name: Lessons }]\n    streak:\n      frequency: ${frequency}\n      metrics: [{ metric: lessons, threshold: 1 }]\n`),
      "restore.yaml",
      {},
    )[0]!;
  const lesson = (tenant: CompiledTenant, state: ModelState, userId: string, at: string) =>
    applyEvent(tenant, state, { metricKey: "lessons", userId, now: Date.parse(at), eventId: `${userId}-${at}`, idempotencyKey: null, valueMicro: 1e6, tz: null, profile: [], eventAttributes: null });
  /** As POST /admin/v1/streaks/restore asks it: the window's first period is the current one less the window (UTC users). */
  const restore = (tenant: CompiledTenant, state: ModelState, userId: string, at: string, window: number) =>
    applyStreakAdmin(tenant, state, userId, "restore", periodOfDay(localDayIndex(Date.parse(at), "UTC"), tenant.streak!.frequency) - window, Date.parse(at));

  it("finds a streak in the window's first period, not in the period before", () => {
    const daily = streakTenant("daily");
    const state = emptyState();
    lesson(daily, state, "outside", "2025-12-31T12:00:00Z");
    lesson(daily, state, "inside", "2026-01-01T12:00:00Z");
    // 1 January + 90 days.
    expect(restore(daily, state, "inside", "2026-04-01T12:00:00Z", 90)).toEqual({ status: "restored", length: 1 });
    expect(restore(daily, state, "outside", "2026-04-01T12:00:00Z", 90)).toEqual({ status: "nothing-to-restore" });
  });

  it("keeps the deadline a move west placed for a streak last covered ahead of today", () => {
    const daily = streakTenant("daily");
    const state = emptyState();
    // Kiritimati (UTC+14): 2 to 4 June, then lost; 10 June. Then Pago Pago (UTC-11), on its 9 June.
    for (const at of ["2026-06-01T12:00:00Z", "2026-06-02T12:00:00Z", "2026-06-03T12:00:00Z", "2026-06-09T12:00:00Z"]) {
      applyEvent(daily, state, { metricKey: "lessons", userId: "w", now: Date.parse(at), eventId: at, idempotencyKey: null, valueMicro: 1e6, tz: "Pacific/Kiritimati", profile: [["tz", "Pacific/Kiritimati"]], eventAttributes: null });
    }
    const now = Date.parse("2026-06-09T12:00:00Z");
    applyUpsert(daily, state, "w", "update", [["tz", "Pacific/Pago_Pago"]], now);
    expect(state.streakDeadline.get("w")).toBe(Date.parse("2026-06-11T11:00:00Z"));
    const window = periodOfDay(localDayIndex(now, "Pacific/Pago_Pago"), "daily") - 90;
    expect(applyStreakAdmin(daily, state, "w", "restore", window, now)).toEqual({ status: "restored", length: 3 });
    expect(state.streakDeadline.get("w")).toBe(Date.parse("2026-06-11T11:00:00Z"));
  });

  it("weekly: a restored streak begins on its first week's Monday, though the lost streak began on another day of that week", () => {
    const weekly = streakTenant("weekly");
    const state = emptyState();
    for (const monday of ["2026-04-06T10:00:00Z", "2026-04-13T10:00:00Z", "2026-04-20T10:00:00Z"]) lesson(weekly, state, "rb", monday);
    lesson(weekly, state, "rb", "2026-05-08T10:00:00Z"); // Friday: a new streak of 1, begun that day
    expect(restore(weekly, state, "rb", "2026-05-25T10:00:00Z", 52)).toEqual({ status: "restored", length: 3 });
    const now = Date.parse("2026-05-25T10:00:00Z");
    const nowDay = localDayIndex(now, "UTC");
    const nowPeriod = periodOfDay(nowDay, "weekly");
    const { streak } = settleCopy(weekly, streakState(state.users.get("rb")), nowDay, nowPeriod);
    expect(viewStreak(weekly.streak!, streak, nowDay, nowPeriod)).toMatchObject({ length: 3, started: "2026-05-04" });
  });
});

/* ---------- The tenant file edited between two starts: one state, the rules of each start in turn ---------- */

const edited = (body: string) => loadConfigText(tenantYaml("edited", body), "edited.yaml", {})[0]!;
function send(rules: CompiledTenant, state: ModelState, userId: string, n: number, value: number, metricKey = "lessons", eventAttributes: Record<string, string> | null = null) {
  const result = applyEvent(rules, state, { metricKey, userId, now: T0 + n, eventId: `e${n}`, idempotencyKey: null, valueMicro: value * 1e6, tz: null, profile: [], eventAttributes });
  if (result.outcome.kind !== "processed") throw new Error("not processed");
  return result.outcome;
}
const added = (outcome: ReturnType<typeof send>) => outcome.points.find((p) => p.systemKey === "xp")?.added ?? 0;

// lua/event-2.lua step 6a; test/integration/config-edits.test.ts
describe("a metric trigger added, given filters or stripped of them, in the model", () => {
  const rules = (triggers: string) =>
    edited(`    attributes: { event: [source] }\n    metrics: [{ key: lessons, name: Lessons }]\n    points:\n      - key: xp\n        name: XP\n        triggers: [${triggers}]\n`);
  const start = "{ key: start, type: metric, metric: lessons, threshold: 1000, points: 1 }";
  const perLesson = (filter = "") => `{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 10${filter} }`;
  const mobile = { source: "mobile" };

  it("added: its mark starts at the total it finds, not at 0", () => {
    const state = emptyState();
    send(rules(start), state, "u", 1, 50);
    const later = rules(`${start}, ${perLesson()}`);
    expect(added(send(later, state, "u", 2, -10))).toBe(0);
    expect(added(send(later, state, "u", 3, 13))).toBe(30);
  });

  it("given filters: its own sum and its mark start at 0; stripped of them: its mark starts at the total", () => {
    const state = emptyState();
    expect(added(send(rules(perLesson()), state, "u", 1, 50))).toBe(500);
    const filtered = rules(perLesson(", eventAttributes: { source: mobile }"));
    expect(added(send(filtered, state, "u", 2, 1, "lessons", mobile))).toBe(10);
    send(filtered, state, "u", 3, 47);
    expect(added(send(filtered, state, "u", 4, 1, "lessons", mobile))).toBe(10);
    expect(added(send(rules(perLesson()), state, "u", 5, 1))).toBe(10);
    expect(added(send(filtered, state, "u", 6, 1, "lessons", mobile))).toBe(10);
  });
});

// lua/includes/achievements.lua completeAbove; test/integration/config-edits.test.ts
describe("a composite added when its parts are done, in the model", () => {
  const rules = (composites: string) =>
    edited(
      `    metrics: [{ key: lessons, name: Lessons }, { key: quizzes, name: Quizzes }]\n    achievements:\n      - { key: lesson-1, name: Lesson, type: metric, metric: lessons, value: 1 }\n      - { key: quiz-1, name: Quiz, type: metric, metric: quizzes, value: 1 }\n${composites}`,
    );

  it("completes at the next event that meets one of its parts again, a composite above it too", () => {
    const state = emptyState();
    send(rules(""), state, "u", 1, 1, "lessons");
    send(rules(""), state, "u", 2, 1, "quizzes");
    const later = rules("      - { key: both, name: Both, type: composite, achievements: [lesson-1, quiz-1] }\n      - { key: all, name: All, type: composite, achievements: [both] }\n");
    expect(send(later, state, "u", 3, 1, "lessons").achievements).toEqual(["both", "all"]);
    expect(send(later, state, "u", 4, 1, "lessons").achievements).toEqual([]);
    const top = rules("      - { key: both, name: Both, type: composite, achievements: [lesson-1, quiz-1] }\n      - { key: top, name: Top, type: composite, achievements: [both] }\n");
    expect(send(top, state, "u", 5, 1, "quizzes").achievements).toEqual(["top"]);
  });
});

// lua/complete-4.lua; test/integration/config-edits.test.ts
describe("a composite of API parts added when its parts are done, in the model", () => {
  const rules = (composite: string) =>
    edited(
      `    metrics: [{ key: lessons, name: Lessons }]\n    points:\n      - key: xp\n        name: XP\n        triggers: [{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 1 }${composite ? ", { key: onboarded, type: achievement, achievement: onboarding, points: 25 }" : ""}]\n    achievements:\n      - { key: profile, name: Profile, type: api }\n      - { key: avatar, name: Avatar, type: api }\n${composite}`,
    );

  it("completes at the next completion of a part done, answered as already done, once", () => {
    const state = emptyState();
    expect(applyComplete(rules(""), state, "u", "profile", [], T0).status).toBe("completed");
    expect(applyComplete(rules(""), state, "u", "avatar", [], T0 + 1).status).toBe("completed");
    const later = rules("      - { key: onboarding, name: Onboarded, type: composite, achievements: [profile, avatar] }\n");
    const again = applyComplete(later, state, "u", "profile", [], T0 + 2);
    expect(again).toMatchObject({ status: "already", achievedAt: T0, completed: ["onboarding"] });
    expect(again.status === "already" && again.points.map((p) => [p.systemKey, p.added])).toEqual([["xp", 25]]);
    expect(applyComplete(later, state, "u", "avatar", [], T0 + 3)).toEqual({ status: "already", achievedAt: T0 + 1, completed: [], points: [] });
  });
});

// lua/includes/streak.lua extendStreak (st.oi); test/integration/config-edits.test.ts
describe("a streak metric taken out of the streak and put back on a later day, in the model", () => {
  const rules = (streakMetrics: string) =>
    edited(`    metrics: [{ key: lessons, name: Lessons }, { key: quizzes, name: Quizzes }]\n    streak:\n      frequency: daily\n      metrics: [${streakMetrics}]\n`);
  const at = (rulesNow: CompiledTenant, state: ModelState, now: number, value: number, metricKey: string) => {
    const result = applyEvent(rulesNow, state, { metricKey, userId: "u", now, eventId: `e${now}`, idempotencyKey: null, valueMicro: value * 1e6, tz: null, profile: [], eventAttributes: null });
    if (result.outcome.kind !== "processed") throw new Error("not processed");
    return result.outcome.streak.length;
  };

  it("counts toward the day only the values sent that day", () => {
    const withLessons = rules("{ metric: lessons, threshold: 5 }");
    const state = emptyState();
    expect(at(withLessons, state, T0, 3, "lessons")).toBe(0);
    expect(at(rules("{ metric: quizzes, threshold: 2 }"), state, T0 + DAY, 1, "quizzes")).toBe(0);
    expect(at(withLessons, state, T0 + DAY + 1, 2, "lessons")).toBe(0);
    expect(at(withLessons, state, T0 + DAY + 2, 3, "lessons")).toBe(1);
  });
});
