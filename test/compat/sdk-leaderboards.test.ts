import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TrophyApi, TrophyApiClient } from "@trophyso/node";
import { demoConfig, startTestApp, type TestApp } from "../helpers/app.js";
import { rejection } from "../helpers/sdk.js";

/**
 * Leaderboards through the unmodified SDK (@trophyso/node 1.0.42; trophy-compat §2.2 #17, #23,
 * #24, §3.7): leaderboards.all, leaderboards.get, users.leaderboard and the `leaderboards` field
 * of metrics.event. The SDK parses every body with its own schemas, so a shape it cannot read
 * fails the test with a ParseError (or a TypeError on a null extended object, §4).
 *
 * The demo tenant's boards (xp-all-time: perpetual on xp; weekly-lessons: every 7 days from
 * Monday 5 January 2026) plus a board broken down by the demo's `plan` attribute and one that is
 * still scheduled. The clock starts on Monday 2 March 2026, the first day of a weekly run.
 */
const EXTRA_BOARDS = `
      - key: plan-xp
        name: XP by plan
        rankBy: points
        points: xp
        start: "2026-01-01"
        breakdownAttribute: plan
      - key: spring-lessons
        name: Spring lessons
        rankBy: metric
        metric: lessons
        start: "2026-04-01"
        end: "2026-06-01"
`;

let app: TestApp;
let trophy: TrophyApiClient;

beforeAll(async () => {
  app = await startTestApp({ yaml: demoConfig().yaml + EXTRA_BOARDS, manualClock: "2026-03-02T12:00:00Z", jobs: false });
  trophy = new TrophyApiClient({ apiKey: app.apiKey, environment: { api: `${app.url}/v1`, admin: `${app.url}/admin/v1` } });
});
afterAll(async () => app.close());

async function tick(ms: number): Promise<void> {
  await app.setClock(new Date(app.clock.now() + ms).toISOString());
}


describe("metrics.event: the leaderboards field", () => {
  it("holds each board the event moved as MetricEventLeaderboardResponse, the user's group included", async () => {
    const ada = await trophy.metrics.event("lessons", { user: { id: "sdk-lb-ada", name: "Ada", attributes: { plan: "pro" } }, value: 3 });
    // Not spring-lessons: it is scheduled.
    expect(Object.keys(ada.leaderboards).sort()).toEqual(["plan-xp", "weekly-lessons", "xp-all-time"]);
    const weekly = ada.leaderboards["weekly-lessons"]!;
    expect(weekly).toMatchObject({
      key: "weekly-lessons",
      name: "Lessons this week",
      rankBy: "metric",
      metricKey: "lessons",
      metricName: "Lessons completed",
      start: "2026-01-05",
      runUnit: "day",
      runInterval: 7,
      maxParticipants: 1000,
      threshold: 0,
      rank: 1,
    });
    expect(weekly.id).toMatch(/^[0-9a-f-]{36}$/);
    // Nulls on the wire (no end, no previous rank, no group) come back undefined.
    expect(weekly.end).toBeUndefined();
    expect(weekly.previousRank).toBeUndefined();
    expect(weekly.breakdownAttributeValue).toBeUndefined();
    expect(ada.leaderboards["xp-all-time"]).toMatchObject({ rankBy: "points", pointsSystemKey: "xp", pointsSystemName: "XP", rank: 1, threshold: 0 });
    expect(ada.leaderboards["plan-xp"]).toMatchObject({ breakdownAttribute: "plan", breakdownAttributeValue: "pro", rank: 1 });
  });

  it("leaves out the breakdown board for a user without the attribute, and reports previousRank", async () => {
    await tick(1);
    const bo = await trophy.metrics.event("lessons", { user: { id: "sdk-lb-bo", name: "Bo", attributes: { plan: "free" } }, value: 2 });
    expect(bo.leaderboards["xp-all-time"]).toMatchObject({ rank: 2 });
    expect(bo.leaderboards["plan-xp"]).toMatchObject({ breakdownAttributeValue: "free", rank: 1 });
    await tick(1);
    const cy = await trophy.metrics.event("lessons", { user: { id: "sdk-lb-cy" }, value: 1 });
    expect(Object.keys(cy.leaderboards).sort()).toEqual(["weekly-lessons", "xp-all-time"]);
    expect(cy.leaderboards["xp-all-time"]).toMatchObject({ rank: 3 });
    await tick(1);
    const again = await trophy.metrics.event("lessons", { user: { id: "sdk-lb-bo" }, value: 2 });
    expect(again.leaderboards["xp-all-time"]).toMatchObject({ rank: 1, previousRank: 2 });
    expect(again.leaderboards["weekly-lessons"]).toMatchObject({ rank: 1, previousRank: 2 });
    // A metric with no board moves none.
    expect((await trophy.metrics.event("api-calls", { user: { id: "sdk-lb-bo" }, value: 1 })).leaderboards).toEqual({});
  });
});

describe("leaderboards.all", () => {
  it("lists every board that is not finished, with its status", async () => {
    const all = await trophy.leaderboards.all();
    expect(all.map((b) => [b.key, b.status])).toEqual([
      ["xp-all-time", "active"],
      ["weekly-lessons", "active"],
      ["plan-xp", "active"],
      ["spring-lessons", "scheduled"],
    ]);
    expect(all[0]).toMatchObject({ name: "XP all time", rankBy: "points", pointsSystemKey: "xp", pointsSystemName: "XP", start: "2026-01-01", maxParticipants: 1000 });
    expect(all[0]!.runUnit).toBeUndefined();
    expect(all[0]!.end).toBeUndefined();
    expect(all[1]).toMatchObject({ rankBy: "metric", metricKey: "lessons", runUnit: "day", runInterval: 7 });
    expect(all[2]).toMatchObject({ breakdownAttribute: "plan" });
    expect(all[3]).toMatchObject({ start: "2026-04-01", end: "2026-06-01" });
  });
});

describe("leaderboards.get", () => {
  it("returns the board with its rankings, names where the user has one", async () => {
    const board = await trophy.leaderboards.get("xp-all-time");
    expect(board).toMatchObject({ key: "xp-all-time", status: "active", rankBy: "points" });
    expect(board.rankings).toEqual([
      { userId: "sdk-lb-bo", userName: "Bo", rank: 1, value: 40 },
      { userId: "sdk-lb-ada", userName: "Ada", rank: 2, value: 30 },
      // userName null on the wire: dropped by the SDK.
      { userId: "sdk-lb-cy", rank: 3, value: 10 },
    ]);
  });

  it("pages with offset and limit, and around a user with userId", async () => {
    expect((await trophy.leaderboards.get("xp-all-time", { offset: 1, limit: 1 })).rankings.map((r) => r.userId)).toEqual(["sdk-lb-ada"]);
    const around = await trophy.leaderboards.get("xp-all-time", { userId: "sdk-lb-cy", offset: -1, limit: 2 });
    expect(around.rankings.map((r) => [r.userId, r.rank])).toEqual([
      ["sdk-lb-ada", 2],
      ["sdk-lb-cy", 3],
    ]);
    expect((await trophy.leaderboards.get("xp-all-time", { userId: "sdk-lb-nobody" })).rankings).toEqual([]);
  });

  it("reads a run by any of its days", async () => {
    const board = await trophy.leaderboards.get("weekly-lessons", { run: "2026-03-06", limit: 2 });
    expect(board.rankings.map((r) => [r.userId, r.rank, r.value])).toEqual([
      ["sdk-lb-bo", 1, 4],
      ["sdk-lb-ada", 2, 3],
    ]);
  });

  it("selects the group of a breakdown board with userAttributes", async () => {
    const pro = await trophy.leaderboards.get("plan-xp", { userAttributes: "plan:pro" });
    expect(pro).toMatchObject({ breakdownAttribute: "plan", status: "active" });
    expect(pro.rankings).toEqual([{ userId: "sdk-lb-ada", userName: "Ada", rank: 1, value: 30 }]);
    const free = await trophy.leaderboards.get("plan-xp", { userAttributes: "plan:free", userId: "sdk-lb-bo" });
    expect(free.rankings).toEqual([{ userId: "sdk-lb-bo", userName: "Bo", rank: 1, value: 40 }]);
  });

  it("maps a missing group to UnprocessableEntityError and an unknown board to NotFoundError", async () => {
    expect(await rejection(trophy.leaderboards.get("plan-xp"))).toBeInstanceOf(TrophyApi.UnprocessableEntityError);
    expect(await rejection(trophy.leaderboards.get("no-such-board"))).toBeInstanceOf(TrophyApi.NotFoundError);
  });
});

describe("users.leaderboard", () => {
  it("returns the rank, the value and the history with Date timestamps, newest first", async () => {
    const bo = await trophy.users.leaderboard("sdk-lb-bo", "xp-all-time", { numEvents: 5 });
    expect(bo).toMatchObject({ key: "xp-all-time", rank: 1, value: 40 });
    expect(bo.history).toHaveLength(2);
    const [newest, first] = bo.history;
    expect(newest!.timestamp).toBeInstanceOf(Date);
    expect(newest!.timestamp!.toISOString()).toBe("2026-03-02T12:00:00.003Z");
    expect(newest).toMatchObject({ previousRank: 2, rank: 1, previousValue: 20, value: 40 });
    expect(first!.timestamp!.toISOString()).toBe("2026-03-02T12:00:00.001Z");
    expect(first).toMatchObject({ rank: 2, value: 20 });
    expect(first!.previousRank).toBeUndefined();
    expect(first!.previousValue).toBeUndefined();
    expect((await trophy.users.leaderboard("sdk-lb-bo", "xp-all-time", { numEvents: 1 })).history).toHaveLength(1);
  });

  it("reads a finished run with run=, after the user moved in the next one", async () => {
    await app.setClock("2026-03-09T09:00:00Z");
    const next = await trophy.metrics.event("lessons", { user: { id: "sdk-lb-ada" }, value: 1 });
    expect(next.leaderboards["weekly-lessons"]).toMatchObject({ rank: 1 });
    expect(next.leaderboards["weekly-lessons"]!.previousRank).toBeUndefined();

    const now = await trophy.users.leaderboard("sdk-lb-ada", "weekly-lessons");
    expect(now).toMatchObject({ rank: 1, value: 1 });
    const past = await trophy.users.leaderboard("sdk-lb-ada", "weekly-lessons", { run: "2026-03-02", numEvents: 10 });
    expect(past).toMatchObject({ rank: 2, value: 3 });
    expect(past.history.map((h) => [h.timestamp!.toISOString(), h.rank, h.value])).toEqual([["2026-03-02T12:00:00.000Z", 1, 3]]);
    // The previous week's board is unchanged by this week's events.
    expect((await trophy.leaderboards.get("weekly-lessons", { run: "2026-03-02" })).rankings.map((r) => r.userId)).toEqual(["sdk-lb-bo", "sdk-lb-ada", "sdk-lb-cy"]);
  });

  it("gives rank and value undefined for a user off the board", async () => {
    const off = await trophy.users.leaderboard("sdk-lb-cy", "plan-xp");
    expect(off.rank).toBeUndefined();
    expect(off.value).toBeUndefined();
    expect(off.history).toEqual([]);
  });

  it("maps an unknown user or board to NotFoundError and numEvents past 100 to UnprocessableEntityError", async () => {
    expect(await rejection(trophy.users.leaderboard("sdk-lb-nobody", "xp-all-time"))).toBeInstanceOf(TrophyApi.NotFoundError);
    expect(await rejection(trophy.users.leaderboard("sdk-lb-ada", "no-such-board"))).toBeInstanceOf(TrophyApi.NotFoundError);
    expect(await rejection(trophy.users.leaderboard("sdk-lb-ada", "xp-all-time", { numEvents: 101 }))).toBeInstanceOf(TrophyApi.UnprocessableEntityError);
  });
});
