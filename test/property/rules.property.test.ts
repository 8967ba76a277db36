import { readFileSync } from "node:fs";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventReply } from "../../src/api/events.js";
import { onTheWire } from "../helpers/wire.js";
import { pointsMapJson } from "../../src/api/points-json.js";
import { userProfileFields } from "../../src/api/user-input.js";
import { achievementJson } from "../../src/api/wire.js";
import type { ManualClock } from "../../src/clock.js";
import { toMicro } from "../../src/domain/decimal.js";
import {
  applyComplete,
  applyEvent,
  applyStreakAdmin,
  applyTimeTicks,
  applyUpsert,
  applyUserBoost,
  emptyState,
  readUserPoints,
  modelBoardOrder,
  modelRank,
  refreshThresholds,
  type ModelState,
} from "../../src/domain/model.js";
import { activeRun, boardStatus, memberUser, runOfDay } from "../../src/domain/leaderboards.js";
import { fromMicro } from "../../src/domain/decimal.js";
import type { CompiledTenant } from "../../src/config/compiled.js";
import { localDayIndex, periodOfDay } from "../../src/domain/periods.js";
import { runTimeTrigger } from "../../src/jobs/time-triggers.js";
import { awardJson } from "../../src/api/wire.js";
import { startAppOnOwnRedis, type TestApp } from "../helpers/app.js";
import { expectStateEqual } from "./state-check.js";
import { propertyParameters } from "../helpers/property.js";

/**
 * The oracle test for every rule of the rules issue: boosts (global, cohort, per user, stacked,
 * rounding), event and user attribute filters, streak, achievement, time and first-identification
 * triggers, API, streak and composite achievements, freezes and restores, through HTTP and
 * through the reference model. Rerun a failure with FC_SEED=<seed>.
 */
const YAML = readFileSync(new URL("./rules.yaml", import.meta.url), "utf8");
const API = { "x-api-key": "prop-rules-key" };
const ADMIN = { "x-api-key": "prop-rules-admin" };
const USERS = ["r0", "r1", "r2"];
const START = Date.parse("2026-03-05T09:00:00Z");

type Command =
  | { kind: "event"; user: string; metric: "lessons" | "quiz"; value: number; tz: string | null; source: string | null; level: string | null; plan: string | null; idem: string | null }
  | { kind: "identify"; user: string; plan: string | null; region: string | null; tz: string | null }
  | { kind: "complete"; user: string; achievement: "profile" | "pro-only"; plan: string | null }
  | { kind: "boost"; user: string; system: "xp" | "gems"; multiplier: number; startIn: number; length: number | null; rounding: "down" | "up" | "nearest" }
  | { kind: "endBoost"; pick: number }
  | { kind: "freeze"; user: string; count: number }
  | { kind: "restore"; user: string }
  | { kind: "advance"; ms: number }
  | { kind: "outage"; ms: number }
  | { kind: "read"; user: string; system: "xp" | "gems" | "coins" }
  | { kind: "board"; board: string; region: "eu" | "us"; user: string | null; offset: number; limit: number };

const HOUR = 3_600_000;
const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 8, arbitrary: fc.record({
    kind: fc.constant("event" as const),
    user: fc.constantFrom(...USERS),
    metric: fc.constantFrom("lessons" as const, "quiz" as const),
    value: fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 1, max: 3 }) }, fc.constantFrom(0.5, 1.5, 2.25, -1, 0.3)),
    // Kiritimati (UTC+14) and Pago Pago (UTC-11): moves east that skip a local day (bridged).
    tz: fc.constantFrom(null, "UTC", "Asia/Kolkata", "America/Denver", "Pacific/Kiritimati", "Pacific/Pago_Pago"),
    source: fc.constantFrom(null, "web", "mobile"),
    level: fc.constantFrom(null, "hard", "easy"),
    plan: fc.constantFrom(null, "pro", "free"),
    idem: fc.option(fc.constantFrom("a", "b"), { freq: 4 }),
  }) },
  { weight: 2, arbitrary: fc.record({
    kind: fc.constant("identify" as const),
    user: fc.constantFrom(...USERS),
    plan: fc.constantFrom(null, "pro", "free"),
    region: fc.constantFrom(null, "eu", "us"),
    tz: fc.constantFrom(null, "UTC", "Asia/Kolkata", "Pacific/Kiritimati", "Pacific/Pago_Pago"),
  }) },
  { weight: 1, arbitrary: fc.record({
    kind: fc.constant("complete" as const),
    user: fc.constantFrom(...USERS),
    achievement: fc.constantFrom("profile" as const, "pro-only" as const),
    plan: fc.constantFrom(null, "pro"),
  }) },
  { weight: 1, arbitrary: fc.record({
    kind: fc.constant("boost" as const),
    user: fc.constantFrom(...USERS),
    system: fc.constantFrom("xp" as const, "gems" as const),
    multiplier: fc.constantFrom(2, 1.5, 0.5, 1.1, 3.333333),
    startIn: fc.constantFrom(0, HOUR, 30 * HOUR),
    length: fc.option(fc.constantFrom(2 * HOUR, 48 * HOUR), { freq: 3 }),
    rounding: fc.constantFrom("down" as const, "up" as const, "nearest" as const),
  }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("endBoost" as const), pick: fc.nat(10) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("freeze" as const), user: fc.constantFrom(...USERS), count: fc.integer({ min: 1, max: 3 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("restore" as const), user: fc.constantFrom(...USERS) }) },
  { weight: 3, arbitrary: fc.record({
    kind: fc.constant("advance" as const),
    ms: fc.oneof(fc.integer({ min: 60_000, max: 5 * HOUR }), fc.integer({ min: 22 * HOUR, max: 26 * HOUR }), fc.integer({ min: 46 * HOUR, max: 50 * HOUR }), fc.integer({ min: 4 * 24 * HOUR, max: 9 * 24 * HOUR })),
  }) },
  // The clock moves while the time triggers' ticks do not run (their workers down): what is due
  // waits for the next "advance", which pays it as a catch-up; requests meanwhile see the new time.
  { weight: 1, arbitrary: fc.record({
    kind: fc.constant("outage" as const),
    ms: fc.oneof(fc.integer({ min: 60_000, max: 5 * HOUR }), fc.integer({ min: 20 * HOUR, max: 50 * HOUR }), fc.integer({ min: 49 * HOUR, max: 100 * HOUR })),
  }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("read" as const), user: fc.constantFrom(...USERS), system: fc.constantFrom("xp" as const, "gems" as const, "coins" as const) }) },
  { weight: 2, arbitrary: fc.record({
    kind: fc.constant("board" as const),
    board: fc.constantFrom("xp-ever", "lessons-2d", "streaks", "gems-region", "quiz-monthly"),
    region: fc.constantFrom("eu" as const, "us" as const),
    user: fc.option(fc.constantFrom(...USERS), { freq: 2 }),
    offset: fc.integer({ min: -2, max: 2 }),
    limit: fc.integer({ min: 1, max: 4 }),
  }) },
);

let t: TestApp;
let closeApp: (() => Promise<void>) | undefined;
beforeAll(async () => {
  // Time triggers run through runTimeTrigger (the worker's own function) when the clock moves;
  // the BullMQ path is tested in test/integration/time-triggers.test.ts.
  // Its own redis-server with no background jobs: FLUSHDB between runs would remove BullMQ's queues under its workers.
  ({ t, close: closeApp } = await startAppOnOwnRedis({ yaml: YAML, manualClock: true }));
});
afterAll(async () => closeApp?.());

async function runSequence(commands: Command[]): Promise<void> {
  await t.redis.flushdb();
  const clock = t.clock as ManualClock;
  await clock.set(START);
  const context = t.app.tenants.all.find((c) => c.tenant.id === "propx")!;
  const { tenant, store } = context;
  const model: ModelState = emptyState();
  const boosts: { id: string; user: string; system: string; start: number; end: number | null; multiplier: number; rounding: "down" | "up" | "nearest" }[] = [];

  for (const cmd of commands) {
    const now = clock.now();
    switch (cmd.kind) {
      case "advance": {
        await clock.set(now + cmd.ms);
        for (let i = 1; i <= store.tenantRules.rules.tt.length; i++) await runTimeTrigger(store, i, clock.now());
        applyTimeTicks(tenant, model, clock.now());
        // Moving the manual clock refreshed the service's thresholds before the ticks ran.
        refreshThresholds(tenant, model, clock.now());
        break;
      }
      case "outage": {
        await clock.set(now + cmd.ms);
        refreshThresholds(tenant, model, clock.now());
        break;
      }
      case "board": {
        await expectBoardsEqual(tenant, model, cmd, now);
        break;
      }
      case "read": {
        const res = await t.call("GET", `/v1/users/${cmd.user}/points/${cmd.system}?awards=100`, undefined, API);
        const expected = readUserPoints(model, cmd.user, cmd.system, 100);
        if (expected === null) expect(res.status).toBe(404);
        else {
          const system = tenant.systemByKey.get(cmd.system)!;
          expect(res.body.total).toBe(expected.total);
          expect(res.body.awards).toEqual(expected.awards.map((a) => awardJson(tenant, system, cmd.user, a)));
        }
        break;
      }
      case "event": {
        const user: Record<string, unknown> = { id: cmd.user };
        if (cmd.tz) user.tz = cmd.tz;
        if (cmd.plan) user.attributes = { plan: cmd.plan };
        const attributes: Record<string, string> = {};
        if (cmd.source) attributes.source = cmd.source;
        if (cmd.level) attributes.level = cmd.level;
        const headers: Record<string, string> = { ...API };
        if (cmd.idem) headers["idempotency-key"] = cmd.idem;
        const res = await t.call("POST", `/v1/metrics/${cmd.metric}/event`, { user, value: cmd.value, attributes }, headers);
        const result = applyEvent(tenant, model, {
          metricKey: cmd.metric,
          userId: cmd.user,
          now,
          eventId: res.body.eventId,
          idempotencyKey: cmd.idem,
          valueMicro: toMicro(cmd.value),
          tz: cmd.tz,
          profile: userProfileFields(user as { id: string }, tenant.userAttributes),
          eventAttributes: attributes,
        });
        const expected = onTheWire(eventReply(context, tenant.metricByKey.get(cmd.metric)!.id, cmd.user, now, { ...result, nowDay: localDayIndex(now, result.tz) }, cmd.idem));
        expect({ status: res.status, body: res.body }).toEqual({ status: expected.status, body: expected.body });
        break;
      }
      case "identify": {
        const body: Record<string, unknown> = {};
        if (cmd.tz) body.tz = cmd.tz;
        const attributes: Record<string, string> = {};
        if (cmd.plan) attributes.plan = cmd.plan;
        if (cmd.region) attributes.region = cmd.region;
        body.attributes = attributes;
        const res = await t.call("PUT", `/v1/users/${cmd.user}`, body, API);
        expect(res.status).toBe(200);
        const result = applyUpsert(tenant, model, cmd.user, "upsert", userProfileFields({ id: cmd.user, ...body } as never, tenant.userAttributes), now);
        expect(res.body.created).toBe(new Date(model.users.get(cmd.user)!.created).toISOString());
        expect(res.body.updated).toBe(new Date(model.users.get(cmd.user)!.updated).toISOString());
        expect(result.status).not.toBe("missing");
        break;
      }
      case "complete": {
        const user: Record<string, unknown> = { id: cmd.user };
        if (cmd.plan) user.attributes = { plan: cmd.plan };
        const res = await t.call("POST", `/v1/achievements/${cmd.achievement}/complete`, { user }, API);
        const result = applyComplete(tenant, model, cmd.user, cmd.achievement, userProfileFields(user as { id: string }, tenant.userAttributes), now);
        if (result.status === "ineligible") expect(res.status).toBe(422);
        else if (result.status === "already") {
          expect(res.status).toBe(200);
          expect(res.body.achievement.achievedAt).toBe(new Date(result.achievedAt).toISOString());
          expect(res.body.points).toEqual({});
        } else {
          expect(res.status).toBe(201);
          expect(res.body.points).toEqual(JSON.parse(pointsMapJson(tenant, cmd.user, result.points).text));
          expect(res.body.achievements).toEqual(result.completed.map((k) => achievementJson(tenant, tenant.achievementByKey.get(k)!, now)));
        }
        break;
      }
      case "boost": {
        const start = now + cmd.startIn;
        const end = cmd.length === null ? null : start + cmd.length;
        const res = await t.call("POST", `/admin/v1/points/${cmd.system}/boosts`, {
          userId: cmd.user,
          name: "b",
          multiplier: cmd.multiplier,
          start: new Date(start).toISOString(),
          end: end === null ? null : new Date(end).toISOString(),
          rounding: cmd.rounding,
        }, ADMIN);
        const boost = { id: res.body.id as string, multiplier: cmd.multiplier, start, end, rounding: cmd.rounding };
        const applied = applyUserBoost(tenant, model, cmd.user, cmd.system, "add", boost, now);
        expect(res.status).toBe(applied ? 201 : 404);
        if (applied) boosts.push({ ...boost, user: cmd.user, system: cmd.system });
        break;
      }
      case "endBoost": {
        const boost = boosts[cmd.pick % Math.max(1, boosts.length)];
        if (!boost) break;
        const res = await t.call("DELETE", `/admin/v1/points/${boost.system}/boosts/${boost.id}`, undefined, ADMIN);
        expect(res.status).toBe(200);
        const live = boost.end === null || boost.end > now;
        if (live) applyUserBoost(tenant, model, boost.user, boost.system, "end", { ...boost }, now);
        boost.end = live ? (boost.start > now ? boost.start : now) : boost.end;
        break;
      }
      case "freeze": {
        const res = await t.call("POST", "/admin/v1/streaks/freezes", { freezes: Array.from({ length: cmd.count }, () => ({ userId: cmd.user })) }, ADMIN);
        expect(res.status).toBe(200);
        const result = applyStreakAdmin(tenant, model, cmd.user, "freeze", cmd.count, now);
        const expectedIssues =
          result.status === "missing" ? ["User does not exist"] : result.status === "frozen" && result.granted < cmd.count ? ["Would exceed maximum freeze limit"] : [];
        expect(res.body.issues.map((i: { reason: string }) => i.reason)).toEqual(expectedIssues);
        break;
      }
      case "restore": {
        const res = await t.call("POST", "/admin/v1/streaks/restore", { users: [{ id: cmd.user }] }, ADMIN);
        expect(res.status).toBe(200);
        const tz = model.users.get(cmd.user)?.profile.get("tz") ?? "UTC";
        const result = applyStreakAdmin(tenant, model, cmd.user, "restore", periodOfDay(localDayIndex(now, tz), "daily") - 90, now);
        expect(res.body.restoredUsers).toEqual(result.status === "restored" ? [cmd.user] : []);
        break;
      }
    }
  }
  await expectStateEqual(t, tenant, model);
  for (const board of tenant.leaderboards) {
    for (const user of USERS) await expectBoardsEqual(tenant, model, { kind: "board", board: board.key, region: "eu", user, offset: 0, limit: 3 }, clock.now());
  }
}

/** A page of a board and a user's entry, against the model's board order and rank rule. */
async function expectBoardsEqual(tenant: CompiledTenant, model: ModelState, cmd: Extract<Command, { kind: "board" }>, now: number): Promise<void> {
  const board = tenant.leaderboardByKey.get(cmd.board)!;
  const query = new URLSearchParams({ limit: String(cmd.limit) });
  if (board.breakdownAttribute) query.set("userAttributes", `region:${cmd.region}`);
  const run = activeRun(board, now) ?? (boardStatus(board, now) === "finished" ? runOfDay(board, board.endDay! - 1) : null);
  const group = run === null ? new Map() : (model.boards.get(`${board.key}:${run}:${board.breakdownAttribute ? cmd.region : ""}`) ?? new Map());
  const order = modelBoardOrder(group);
  const unit = (v: number) => (board.rankBy === "metric" ? fromMicro(v) : v);
  const ranked = order.map((e) => ({ userId: memberUser(e.member), value: unit(e.value), rank: modelRank(board, group, e.value, e.member) }));
  if (cmd.user === null) {
    query.set("offset", String(Math.max(0, cmd.offset)));
    const res = await t.call("GET", `/v1/leaderboards/${board.key}?${query}`, undefined, API);
    expect(res.status).toBe(200);
    const start = Math.max(0, cmd.offset);
    const expected = ranked.slice(start, Math.min(start + cmd.limit, board.maxParticipants));
    expect(res.body.rankings.map((r: { userId: string; rank: number; value: number }) => ({ userId: r.userId, value: r.value, rank: r.rank })), `${board.key} page`).toEqual(expected);
  } else {
    const res = await t.call("GET", `/v1/users/${cmd.user}/leaderboards/${board.key}?numEvents=100`, undefined, API);
    if (!model.users.has(cmd.user)) {
      expect(res.status).toBe(404);
      return;
    }
    const mine = ranked.find((r) => r.userId === cmd.user);
    const entry = model.users.get(cmd.user)!.boards.get(board.key);
    const onOwnGroup = entry && run !== null && entry.run === run;
    // On the board: within the first maxParticipants entries in board order (the listed ones).
    const rank = mine && ranked.indexOf(mine) < board.maxParticipants ? mine.rank : null;
    if (!board.breakdownAttribute) {
      expect(res.body.rank, `${board.key} rank of ${cmd.user}`).toBe(onOwnGroup ? rank : null);
      expect(res.body.value, `${board.key} value of ${cmd.user}`).toBe(onOwnGroup && rank !== null ? unit(entry.value) : null);
    }
    // "Around me": offset counts from the user's position.
    query.set("userId", cmd.user);
    query.set("offset", String(cmd.offset));
    const around = await t.call("GET", `/v1/leaderboards/${board.key}?${query}`, undefined, API);
    expect(around.status).toBe(200);
    const position = ranked.findIndex((r) => r.userId === cmd.user);
    const start = Math.max(0, position + cmd.offset);
    const window = position < 0 || !onOwnGroup || rank === null ? [] : ranked.slice(start, start + cmd.limit).filter((_, i) => start + i < board.maxParticipants);
    expect(around.body.rankings.map((r: { userId: string; rank: number; value: number }) => ({ userId: r.userId, value: r.value, rank: r.rank })), `${board.key} around ${cmd.user}`).toEqual(window);
    const history = run === null ? [] : (model.boardHistory.get(`${board.key}:${run}:${cmd.user}`) ?? []);
    expect(res.body.history, `${board.key} history of ${cmd.user}`).toEqual(
      history.map((h) => ({
        timestamp: new Date(h.t).toISOString(),
        previousRank: h.pr,
        rank: h.r,
        previousValue: h.pv === null ? null : unit(h.pv),
        value: h.v === null ? null : unit(h.v),
      })),
    );
  }
}

describe("every points and achievement rule: HTTP + Lua equals the reference model", () => {
  it("agrees on random sequences of events, identifications, completions, boosts, freezes and clock jumps", async () => {
    await fc.assert(fc.asyncProperty(fc.array(commandArb, { minLength: 1, maxLength: 70 }), runSequence), propertyParameters(80));
  });

  // The time triggers' catch-up across boost windows (each interval boosted as at its due
  // instant), also after outages in which boosts were added and ended while intervals stayed
  // unpaid: the general sequences above reach it in about one run in a few hundred.
  it("agrees on time-trigger catch-ups across user boost windows", async () => {
    const focused = fc.oneof(
      { weight: 2, arbitrary: commandArb.filter((c) => c.kind === "identify") },
      { weight: 3, arbitrary: commandArb.filter((c) => c.kind === "boost" && c.system === "gems") },
      { weight: 1, arbitrary: commandArb.filter((c) => c.kind === "endBoost") },
      { weight: 3, arbitrary: commandArb.filter((c) => c.kind === "advance") },
      { weight: 3, arbitrary: commandArb.filter((c) => c.kind === "outage") },
      { weight: 1, arbitrary: commandArb.filter((c) => c.kind === "read") },
    );
    await fc.assert(fc.asyncProperty(fc.array(focused, { minLength: 1, maxLength: 30 }), runSequence), propertyParameters(120));
  });

  it("agrees on a catch-up after a user boost finished during an outage and another boost came", async () => {
    await runSequence([
      { kind: "identify", user: "r0", plan: null, region: null, tz: "UTC" },
      { kind: "boost", user: "r0", system: "gems", multiplier: 2, startIn: 0, length: 48 * HOUR, rounding: "down" },
      { kind: "outage", ms: 60 * HOUR },
      { kind: "boost", user: "r0", system: "gems", multiplier: 3, startIn: 30 * HOUR, length: 2 * HOUR, rounding: "down" },
      { kind: "advance", ms: HOUR },
      { kind: "read", user: "r0", system: "gems" },
    ]);
  });
});
