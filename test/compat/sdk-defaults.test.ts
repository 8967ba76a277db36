import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TrophyApi, TrophyApiClient } from "@trophyso/node";
import { demoConfig, startTestApp, type TestApp } from "../helpers/app.js";
import { errorBody, rejection } from "../helpers/sdk.js";

/**
 * The query defaults and bounds of the reads that page (trophy-compat §7.2 #3: awards 10,
 * leaderboard limit 10 / offset 0, rankings limit 10, numEvents 10; README: limit 0 to the board's size), through
 * the unmodified SDK, which leaves an unset parameter out of the query. Every list here has more
 * than 10 items to take, so a default of anything but 10 shows. Also two wire details a
 * mutation test found unchecked: a trigger's userAttributes, and breakdownAttributeValue null.
 */
let app: TestApp;
let trophy: TrophyApiClient;

beforeAll(async () => {
  // The demo tenant, its mobile-lesson trigger also limited to plan=pro users.
  const mobile = "{ key: mobile-lesson, type: metric, metric: lessons, threshold: 1, points: 1, eventAttributes: { source: mobile } }";
  const yaml = demoConfig().yaml.replace(mobile, `${mobile.slice(0, -2)}, userAttributes: { plan: pro } }`);
  expect(yaml).toContain("userAttributes: { plan: pro } }");
  app = await startTestApp({ yaml, manualClock: "2026-03-02T12:00:00Z", jobs: false });
  trophy = new TrophyApiClient({ apiKey: app.apiKey, environment: { api: `${app.url}/v1`, admin: `${app.url}/admin/v1` } });
  // 12 users on the boards, d-01 lowest; d-12 changes its value 12 times (12 history entries).
  for (let i = 1; i <= 11; i++) await trophy.metrics.event("lessons", { user: { id: `d-${String(i).padStart(2, "0")}` }, value: i });
  for (let i = 0; i < 12; i++) await trophy.metrics.event("lessons", { user: { id: "d-12" }, value: 1 });
});
afterAll(async () => app.close());

describe("users.points", () => {
  it("returns the 10 newest awards by default (also for an empty awards=), up to `awards` when given", async () => {
    const byDefault = await trophy.users.points("d-12", "xp");
    expect(byDefault.total).toBe(120);
    expect(byDefault.awards.map((a) => a.total)).toEqual([120, 110, 100, 90, 80, 70, 60, 50, 40, 30]);
    expect((await trophy.users.points("d-12", "xp", { awards: 11 })).awards).toHaveLength(11);
    const empty = await app.call("GET", "/v1/users/d-12/points/xp?awards=");
    expect(empty.status).toBe(200);
    expect(empty.body.awards.map((a: { total: number }) => a.total)).toEqual(byDefault.awards.map((a) => a.total));
  });
});

describe("leaderboards.get", () => {
  it("returns the top 10 without limit or offset, and up to 100 when asked", async () => {
    const page = await trophy.leaderboards.get("weekly-lessons");
    expect(page.rankings.map((r) => r.userId)).toEqual(["d-12", "d-11", "d-10", "d-09", "d-08", "d-07", "d-06", "d-05", "d-04", "d-03"]);
    expect(page.rankings[0]).toMatchObject({ rank: 1, value: 12 });
    expect((await trophy.leaderboards.get("weekly-lessons", { limit: 100 })).rankings).toHaveLength(12);
  });

  it("takes a limit up to the board's size (1000 participants here), and refuses a larger one with 422 {error}", async () => {
    expect((await trophy.leaderboards.get("weekly-lessons", { limit: 1000 })).rankings).toHaveLength(12);
    const err = await rejection(trophy.leaderboards.get("weekly-lessons", { limit: 1001 }));
    expect(err).toBeInstanceOf(TrophyApi.UnprocessableEntityError);
    expect(errorBody(err)).toBe("limit must be between 0 and 1000");
  });
});

describe("users.leaderboard", () => {
  it("returns the 10 newest history entries without numEvents, and up to 100 when asked", async () => {
    const own = await trophy.users.leaderboard("d-12", "weekly-lessons");
    expect(own).toMatchObject({ rank: 1, value: 12 });
    expect(own.history.map((h) => h.value)).toEqual([12, 11, 10, 9, 8, 7, 6, 5, 4, 3]);
    expect((await trophy.users.leaderboard("d-12", "weekly-lessons", { numEvents: 100 })).history).toHaveLength(12);
  });

  it("sends breakdownAttributeValue as null, not absent or empty, on a board without a breakdown", async () => {
    for (const user of ["d-12", "nobody-on-board"]) {
      if (user === "nobody-on-board") await trophy.users.create({ id: user });
      const raw = await app.call("GET", `/v1/users/${user}/leaderboards/weekly-lessons`);
      expect(raw.status).toBe(200);
      expect(raw.body).toHaveProperty("breakdownAttributeValue", null);
    }
  });
});

describe("streaks.rankings", () => {
  it("returns the top 10 active streaks without limit", async () => {
    const top = await trophy.streaks.rankings();
    expect(top).toHaveLength(10);
    expect(top.every((u) => u.streakLength === 1)).toBe(true);
    expect(await trophy.streaks.rankings({ limit: 100 })).toHaveLength(12);
  });
});

describe("points.system", () => {
  it("lists a trigger's user-attribute filter as [{key, value}] (trophy-compat §3.6)", async () => {
    const coins = await trophy.points.system("coins");
    // The one trigger of coins with an event filter (the SDK's type names neither `key` nor `eventAttributes`).
    const mobile = coins.triggers.find((t) => t.eventAttribute !== undefined);
    expect(mobile).toMatchObject({ type: "metric", eventAttribute: { key: "source", value: "mobile" }, userAttributes: [{ key: "plan", value: "pro" }] });
    // Without a filter the field is left out, as the hosted API does.
    const raw = await app.call("GET", "/v1/points/coins");
    expect(raw.body.triggers.find((t: { key: string }) => t.key === "daily-allowance")).not.toHaveProperty("userAttributes");
  });
});
