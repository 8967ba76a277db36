import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { commandsDuring, type Observed } from "../helpers/monitor.js";
import { wavesDuring } from "../helpers/waves.js";
import { startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";
import { createRedisClient } from "../../src/store/redis-client.js";
import { activeRun, memberUser } from "../../src/domain/leaderboards.js";
import { boardKeys, entriesAround, userEntry } from "../../src/store/leaderboard-store.js";
import type { TenantStore } from "../../src/store/tenant-store.js";

/**
 * Leaderboards over HTTP (issue 5; trophy-compat §2.2 #17, #23, #24, §3.7, §5.6): runs of a
 * repeating board across the manual clock, a full board and its threshold, ties by first to reach
 * with the three ranking styles, a breakdown board, a streak board, "around me", the user
 * endpoint and the `leaderboards` map of event responses.
 *
 * Each describe block starts its own app and tenant, so each owns its clock. Every scenario
 * ranks by its own metric, so events of one never move the boards of another. Runs are UTC
 * windows; with the clock frozen, events share a millisecond and ties fall back to the user id
 * in descending byte order, so the tie tests move the clock by 1 ms between events.
 */
const YAML = (tenantId: string) =>
  tenantYaml(
    tenantId,
    `
    metrics:
      - { key: lessons, name: Lessons }
      - { key: runs, name: Runs }
      - { key: score, name: Score }
      - { key: pts, name: Points scored }
      - { key: km, name: Kilometres }
      - { key: steps, name: Steps }
      - { key: pings, name: Pings }
    points:
      - key: xp
        name: XP
        triggers:
          - { key: lesson, type: metric, metric: lessons, threshold: 1, points: 10 }
    streak:
      frequency: daily
      metrics:
        - { metric: lessons, threshold: 1 }
    attributes:
      user: [region, tier]
    leaderboards:
      # Three weekly runs (from Mondays 2 March, 9 March and 16 March 2026), finished from 23 March.
      - { key: sprint, name: Sprint, rankBy: metric, metric: runs, start: "2026-03-02", end: "2026-03-23", runUnit: day, runInterval: 7 }
      - { key: top3, name: Top three, rankBy: metric, metric: score, start: "2026-01-01", maxParticipants: 3 }
      - { key: ties-competition, name: Ties competition, rankBy: metric, metric: pts, start: "2026-01-01" }
      - { key: ties-dense, name: Ties dense, rankBy: metric, metric: pts, start: "2026-01-01", ranking: dense }
      - { key: ties-ordinal, name: Ties ordinal, rankBy: metric, metric: pts, start: "2026-01-01", ranking: ordinal }
      - { key: regional, name: Regional, rankBy: metric, metric: km, start: "2026-01-01", breakdownAttribute: region }
      - { key: streaks, name: Streaks, rankBy: streak, start: "2026-01-01" }
      - { key: walkers, name: Walkers, rankBy: metric, metric: steps, start: "2026-01-01" }
      - { key: xp-all-time, name: XP all time, description: Every XP point, rankBy: points, points: xp, start: "2026-01-01" }
      - { key: weekly-lessons, name: Lessons this week, rankBy: metric, metric: lessons, start: "2026-01-05", runUnit: day, runInterval: 7 }
      - { key: old-lessons, name: Old lessons, rankBy: metric, metric: lessons, start: "2026-01-01", end: "2026-02-01" }
      - { key: future-lessons, name: Future lessons, rankBy: metric, metric: lessons, start: "2026-12-01" }
`,
  );

/** A fresh app on a tenant of its own with the fields `body`, the manual clock at `start`; closed after the block. */
function useTenantApp(prefix: string, body: string, start: string): () => TestApp {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ yaml: tenantYaml(uniqueTenantId(prefix), body), manualClock: start, jobs: false });
  });
  afterAll(async () => t.close());
  return () => t;
}

/** A fresh app on its own tenant with the manual clock at `start`; closed after the block. */
function useApp(start: string): () => TestApp {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ yaml: YAML(uniqueTenantId("lb")), manualClock: start, jobs: false });
  });
  afterAll(async () => t.close());
  return () => t;
}

interface Ranking {
  userId: string;
  rank: number;
  value: number;
}

async function event(t: TestApp, metric: string, userId: string, value: number, attributes?: Record<string, string>) {
  const res = await t.call("POST", `/v1/metrics/${metric}/event`, { user: { id: userId, ...(attributes ? { attributes } : {}) }, value });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

async function board(t: TestApp, key: string, query = "") {
  const res = await t.call("GET", `/v1/leaderboards/${key}${query}`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

/** [userId, rank, value] of each ranking, in order. */
async function rows(t: TestApp, key: string, query = ""): Promise<[string, number, number][]> {
  return ((await board(t, key, query)).rankings as Ranking[]).map((r) => [r.userId, r.rank, r.value]);
}

async function userBoard(t: TestApp, userId: string, key: string, query = "") {
  const res = await t.call("GET", `/v1/users/${userId}/leaderboards/${key}${query}`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

async function statusOf(t: TestApp, key: string, query = ""): Promise<string | undefined> {
  const res = await t.call("GET", `/v1/leaderboards${query}`);
  expect(res.status).toBe(200);
  return (res.body as { key: string; status: string }[]).find((b) => b.key === key)?.status;
}

/** Moves the manual clock by `ms` (refreshes the thresholds). */
async function tick(t: TestApp, ms: number): Promise<void> {
  await t.setClock(new Date(t.clock.now() + ms).toISOString());
}

describe("a repeating board across its runs", () => {
  const app = useApp("2026-02-27T12:00:00Z");

  it("is scheduled before its start: listed, no run, no rankings, not moved by events", async () => {
    const t = app();
    expect(await statusOf(t, "sprint")).toBe("scheduled");
    const head = await board(t, "sprint");
    expect(head).toMatchObject({ key: "sprint", status: "scheduled", run: null, rankings: [], start: "2026-03-02", end: "2026-03-23", runUnit: "day", runInterval: 7 });
    const early = await event(t, "runs", "ann", 4);
    expect(early.leaderboards).toEqual({});
    expect(await userBoard(t, "ann", "sprint")).toMatchObject({ rank: null, value: null, history: [] });
  });

  it("is active from its start: the first run ranks the values reached in it", async () => {
    const t = app();
    await t.setClock("2026-03-02T00:00:00Z");
    expect(await statusOf(t, "sprint")).toBe("active");
    // ann's 4 runs were before the start: the board counts only what happens in the run.
    const first = await event(t, "runs", "ann", 5);
    expect(first.total).toBe(9);
    expect(first.leaderboards.sprint).toMatchObject({ rank: 1, previousRank: null, threshold: 0, run: "2026-03-02" });
    await event(t, "runs", "bob", 3);
    await event(t, "runs", "bob", 1);
    expect(await board(t, "sprint")).toMatchObject({ status: "active", run: "2026-03-02" });
    expect(await rows(t, "sprint")).toEqual([
      ["ann", 1, 5],
      ["bob", 2, 4],
    ]);
  });

  it("starts the next run from nothing; the finished run stays queryable by any of its days", async () => {
    const t = app();
    await t.setClock("2026-03-09T00:00:00Z");
    expect(await board(t, "sprint")).toMatchObject({ status: "active", run: "2026-03-09", rankings: [] });
    // ann's value resets: 1 in this run, not 6; previousRank is of this run only.
    const again = await event(t, "runs", "ann", 1);
    expect(again.leaderboards.sprint).toMatchObject({ rank: 1, previousRank: null, run: "2026-03-09" });
    const overtake = await event(t, "runs", "bob", 2);
    expect(overtake.leaderboards.sprint).toMatchObject({ rank: 1, previousRank: null });
    expect(await rows(t, "sprint")).toEqual([
      ["bob", 1, 2],
      ["ann", 2, 1],
    ]);
    // The first run, by its first day, a day inside it or its last day.
    const past = [
      ["ann", 1, 5],
      ["bob", 2, 4],
    ];
    for (const day of ["2026-03-02", "2026-03-05", "2026-03-08"]) {
      expect(await board(t, "sprint", `?run=${day}`)).toMatchObject({ status: "active", run: "2026-03-02" });
      expect(await rows(t, "sprint", `?run=${day}`)).toEqual(past);
    }
    // A run of the schedule that has not begun: 200, named, empty (README: Leaderboards).
    expect(await board(t, "sprint", "?run=2026-03-20")).toMatchObject({ status: "active", run: "2026-03-16", rankings: [] });
    expect(await userBoard(t, "bob", "sprint", "?run=2026-03-16")).toMatchObject({ run: "2026-03-16", rank: null, value: null, history: [] });
    expect(await rows(t, "sprint", "?run=2026-03-15")).toEqual([
      ["bob", 1, 2],
      ["ann", 2, 1],
    ]);
    // The user endpoint reads a past run too, with that run's history.
    const annPast = await userBoard(t, "ann", "sprint", "?run=2026-03-04");
    expect(annPast).toMatchObject({ run: "2026-03-02", rank: 1, value: 5 });
    expect(annPast.history).toEqual([{ timestamp: "2026-03-02T00:00:00.000Z", previousRank: null, rank: 1, previousValue: null, value: 5 }]);
    expect(await userBoard(t, "bob", "sprint", "?run=2026-03-02")).toMatchObject({ rank: 2, value: 4 });
    expect(await userBoard(t, "bob", "sprint")).toMatchObject({ run: "2026-03-09", rank: 1, value: 2 });
    // Around a user in the past run.
    expect(await rows(t, "sprint", "?run=2026-03-02&userId=bob&offset=-1")).toEqual(past);
    // A window that would begin above first place begins there, with the same limit (README).
    expect(await rows(t, "sprint", "?run=2026-03-02&userId=ann&offset=-5&limit=1")).toEqual(past.slice(0, 1));
  });

  it("is still active on the last millisecond before its end", async () => {
    const t = app();
    await t.setClock("2026-03-16T08:00:00Z");
    await event(t, "runs", "cyd", 7);
    await t.setClock("2026-03-22T23:59:59.999Z");
    expect(await statusOf(t, "sprint")).toBe("active");
    expect(await board(t, "sprint")).toMatchObject({ status: "active", run: "2026-03-16" });
    expect(await rows(t, "sprint")).toEqual([["cyd", 1, 7]]);
  });

  it("is finished from its end: hidden by default, listed with includeFinished, its runs still readable", async () => {
    const t = app();
    await t.setClock("2026-03-23T00:00:00Z");
    expect(await statusOf(t, "sprint")).toBeUndefined();
    expect(await statusOf(t, "sprint", "?includeFinished=false")).toBeUndefined();
    // Sent empty, it is as if not sent (README: an empty optional parameter is absent).
    expect(await statusOf(t, "sprint", "?includeFinished=")).toBeUndefined();
    expect(await statusOf(t, "sprint", "?includeFinished=true")).toBe("finished");
    // Boards that are not finished are listed either way.
    expect(await statusOf(t, "top3")).toBe("active");
    expect(await statusOf(t, "future-lessons")).toBe("scheduled");
    expect(await statusOf(t, "old-lessons")).toBeUndefined();
    expect(await statusOf(t, "old-lessons", "?includeFinished=true")).toBe("finished");

    // Without run: the last run.
    expect(await board(t, "sprint")).toMatchObject({ status: "finished", run: "2026-03-16" });
    expect(await rows(t, "sprint")).toEqual([["cyd", 1, 7]]);
    expect(await rows(t, "sprint", "?run=2026-03-03")).toEqual([
      ["ann", 1, 5],
      ["bob", 2, 4],
    ]);
    // Events no longer move it.
    const late = await event(t, "runs", "cyd", 100);
    expect(late.leaderboards).toEqual({});
    expect(await rows(t, "sprint")).toEqual([["cyd", 1, 7]]);
    expect(await userBoard(t, "cyd", "sprint")).toMatchObject({ status: "finished", run: "2026-03-16", rank: 1, value: 7 });
    // run= sent empty is as if not sent: the last run, on both reads.
    expect(await board(t, "sprint", "?run=")).toEqual(await board(t, "sprint"));
    expect(await userBoard(t, "cyd", "sprint", "?run=")).toEqual(await userBoard(t, "cyd", "sprint"));
  });

  it("refuses a run outside the board (422) and a malformed run (400)", async () => {
    const t = app();
    for (const run of ["2026-03-01", "2026-03-23", "2027-01-01"]) {
      const res = await t.call("GET", `/v1/leaderboards/sprint?run=${run}`);
      expect(res.status, run).toBe(422);
      expect(res.body).toEqual({ error: expect.any(String) });
    }
    for (const run of ["2026-3-2", "yesterday", "2026-02-30"]) {
      const res = await t.call("GET", `/v1/leaderboards/sprint?run=${run}`);
      expect(res.status, run).toBe(400);
      expect(res.body).toEqual({ error: expect.any(String) });
    }
    expect((await t.call("GET", "/v1/leaderboards?includeFinished=yes")).status).toBe(400);
  });
});

describe("a full board (maxParticipants 3)", () => {
  const app = useApp("2026-03-02T12:00:00Z");

  it("has room until the third participant: threshold 0", async () => {
    const t = app();
    const replies = [];
    for (const [id, value] of [["f1", 30], ["f2", 20], ["f3", 10]] as const) replies.push(await event(t, "score", id, value));
    expect(replies.map((r) => [r.leaderboards.top3.rank, r.leaderboards.top3.threshold])).toEqual([
      [1, 0],
      [2, 0],
      [3, 0],
    ]);
    expect(replies[2].leaderboards.top3).toMatchObject({ maxParticipants: 3 });
  });

  it("once the clock moves, a newcomer below the threshold (the 3rd value) is off the board", async () => {
    const t = app();
    await tick(t, 60_000);
    const low = await event(t, "score", "low", 5);
    expect(low.leaderboards.top3).toMatchObject({ rank: null, previousRank: null, threshold: 10 });
    expect(await rows(t, "top3")).toEqual([
      ["f1", 1, 30],
      ["f2", 2, 20],
      ["f3", 3, 10],
    ]);
    // Off the board before and after: not a rank change, so no history.
    expect(await userBoard(t, "low", "top3")).toMatchObject({ rank: null, history: [] });
    // Offsets past the board show nobody, even though more values are stored.
    expect(await rows(t, "top3", "?offset=3")).toEqual([]);
  });

  it("a newcomer above the threshold enters with its rank and pushes the last one off", async () => {
    const t = app();
    const high = await event(t, "score", "high", 15);
    expect(high.leaderboards.top3).toMatchObject({ rank: 3, previousRank: null, threshold: 10 });
    expect(await rows(t, "top3", "?limit=100")).toEqual([
      ["f1", 1, 30],
      ["f2", 2, 20],
      ["high", 3, 15],
    ]);
    // A board smaller than 100 takes any limit up to 100, as every board did before limits grew
    // with the board's size; past that, 422.
    expect(await t.call("GET", "/v1/leaderboards/top3?limit=101")).toEqual({ status: 422, body: { error: "limit must be between 0 and 100" } });
    expect(await userBoard(t, "f3", "top3")).toMatchObject({ rank: null });
    expect(await userBoard(t, "high", "top3")).toMatchObject({ rank: 3, value: 15 });
    // Around the pushed-off user: the window never reaches past the board.
    const around = await rows(t, "top3", "?userId=f3&offset=-1");
    expect(around.map(([id]) => id)).not.toContain("f3");
    expect(around.every(([, rank]) => rank <= 3)).toBe(true);
  });

  it("the threshold follows the board when the clock moves again; a climber from below enters", async () => {
    const t = app();
    await tick(t, 60_000);
    const climb = await event(t, "score", "low", 20);
    // low: 5 + 20 = 25, above the new threshold (15), second place; it had no rank before.
    expect(climb.leaderboards.top3).toMatchObject({ rank: 2, previousRank: null, threshold: 15 });
    expect(await rows(t, "top3")).toEqual([
      ["f1", 1, 30],
      ["low", 2, 25],
      ["f2", 3, 20],
    ]);
    const history = (await userBoard(t, "low", "top3")).history;
    expect(history).toEqual([{ timestamp: "2026-03-02T12:02:00.000Z", previousRank: null, rank: 2, previousValue: 5, value: 25 }]);
  });

  it("a newcomer that only ties the threshold is off the board: it reached the value last", async () => {
    const t = app();
    await tick(t, 60_000);
    // The board: f1 30, low 25, f2 20 (threshold 20). "tie" reaches 20 after f2 did.
    const tie = await event(t, "score", "tie", 20);
    expect(tie.leaderboards.top3).toMatchObject({ rank: null, previousRank: null, threshold: 20 });
    expect(await rows(t, "top3", "?limit=100")).toEqual([
      ["f1", 1, 30],
      ["low", 2, 25],
      ["f2", 3, 20],
    ]);
    // Reads agree with the listing: f2 (position 3) is on the board, "tie" (position 4, the same
    // competition rank number 3) is not, and has no window around it.
    expect(await userBoard(t, "f2", "top3")).toMatchObject({ rank: 3, value: 20 });
    expect(await userBoard(t, "tie", "top3")).toMatchObject({ rank: null, value: null, history: [] });
    expect(await rows(t, "top3", "?userId=tie&offset=-1")).toEqual([]);
  });
});

describe("ties: first to reach a value ranks first; three ranking styles", () => {
  const app = useApp("2026-03-02T12:00:00Z");
  const STYLES = { "ties-competition": [1, 2, 2, 4], "ties-dense": [1, 2, 2, 3], "ties-ordinal": [1, 2, 3, 4] } as const;

  it("orders equal values by the instant they were reached", async () => {
    const t = app();
    await event(t, "pts", "wes", 40);
    await tick(t, 1);
    await event(t, "pts", "yan", 30);
    await tick(t, 1);
    const early = await event(t, "pts", "xia", 10);
    await tick(t, 1);
    // xia reaches 30 after yan: behind yan although the same value.
    const reached = await event(t, "pts", "xia", 20);
    await tick(t, 1);
    await event(t, "pts", "zed", 10);

    for (const [key, ranks] of Object.entries(STYLES)) {
      expect(await rows(t, key), key).toEqual([
        ["wes", ranks[0], 40],
        ["yan", ranks[1], 30],
        ["xia", ranks[2], 30],
        ["zed", ranks[3], 10],
      ]);
    }
    // The event responses count ranks by the same rules; previousRank is xia's rank at 10.
    expect(early.leaderboards["ties-ordinal"].rank).toBe(3);
    expect(reached.leaderboards["ties-competition"]).toMatchObject({ rank: 2, previousRank: 3 });
    expect(reached.leaderboards["ties-dense"]).toMatchObject({ rank: 2, previousRank: 3 });
    expect(reached.leaderboards["ties-ordinal"]).toMatchObject({ rank: 3, previousRank: 3 });
    expect((await userBoard(t, "xia", "ties-ordinal")).rank).toBe(3);
    expect((await userBoard(t, "xia", "ties-competition")).rank).toBe(2);
    expect((await userBoard(t, "zed", "ties-dense")).rank).toBe(3);
  });

  it("pages and around-me windows carry the styles' rank numbers", async () => {
    const t = app();
    expect(await rows(t, "ties-competition", "?offset=2&limit=2")).toEqual([
      ["xia", 2, 30],
      ["zed", 4, 10],
    ]);
    expect(await rows(t, "ties-dense", "?userId=zed&offset=-1&limit=2")).toEqual([
      ["xia", 2, 30],
      ["zed", 3, 10],
    ]);
    expect(await rows(t, "ties-ordinal", "?userId=yan&offset=0&limit=2")).toEqual([
      ["yan", 2, 30],
      ["xia", 3, 30],
    ]);
  });

  it("a user who leaves a value and comes back reaches it anew", async () => {
    const t = app();
    await tick(t, 1);
    await event(t, "pts", "yan", -1);
    await tick(t, 1);
    const back = await event(t, "pts", "yan", 1);
    expect(back.leaderboards["ties-ordinal"]).toMatchObject({ rank: 3, previousRank: 3 });
    expect(await rows(t, "ties-ordinal")).toEqual([
      ["wes", 1, 40],
      ["xia", 2, 30],
      ["yan", 3, 30],
      ["zed", 4, 10],
    ]);
  });

  it("within one millisecond, ties fall back to the user id in descending order", async () => {
    const t = app();
    await tick(t, 1);
    await event(t, "pts", "tie-a", 5);
    await event(t, "pts", "tie-c", 5);
    await event(t, "pts", "tie-b", 5);
    expect((await rows(t, "ties-ordinal", "?offset=4")).map(([id, rank]) => [id, rank])).toEqual([
      ["tie-c", 5],
      ["tie-b", 6],
      ["tie-a", 7],
    ]);
    expect((await rows(t, "ties-competition", "?offset=4")).map(([, rank]) => rank)).toEqual([5, 5, 5]);
    expect((await rows(t, "ties-dense", "?offset=4")).map(([, rank]) => rank)).toEqual([4, 4, 4]);
  });

  it("equal values reached a day and weeks apart: the event script orders them by the instant too", async () => {
    // A member is "<13 digits of MAX - reachedAt>|<id>", compared by the script 4 bytes at a time
    // (board-order.lua memberAfter): instants a millisecond apart differ in the last 4 digits only,
    // a day apart in the middle 4, weeks apart in the first 4.
    const t = app();
    await tick(t, 1);
    const first = await event(t, "pts", "far-a", 7);
    await tick(t, 86_400_000);
    const second = await event(t, "pts", "far-b", 7);
    await tick(t, 40 * 86_400_000);
    const third = await event(t, "pts", "far-c", 7);
    expect([first, second, third].map((r) => r.leaderboards["ties-ordinal"].rank)).toEqual([5, 6, 7]);
    expect([first, second, third].map((r) => r.leaderboards["ties-competition"].rank)).toEqual([5, 5, 5]);
    expect((await rows(t, "ties-ordinal", "?offset=4&limit=3")).map(([id, rank]) => [id, rank])).toEqual([
      ["far-a", 5],
      ["far-b", 6],
      ["far-c", 7],
    ]);
  });

  it("within one millisecond, an id that extends another ranks ahead of it (bytes: the longer one is greater)", async () => {
    const t = app();
    await tick(t, 1);
    await event(t, "pts", "pq", 9);
    const longer = await event(t, "pts", "pq-x", 9);
    // Above 9: wes, xia, yan and zed. The event script compares the ids past their common bytes.
    expect(longer.leaderboards["ties-ordinal"].rank).toBe(5);
    expect((await rows(t, "ties-ordinal", "?offset=4&limit=2")).map(([id, rank]) => [id, rank])).toEqual([
      ["pq-x", 5],
      ["pq", 6],
    ]);
  });
});

describe("a breakdown board (breakdownAttribute region)", () => {
  const app = useApp("2026-03-02T12:00:00Z");

  it("ranks each group separately; the event response names the user's group", async () => {
    const t = app();
    const e1 = await event(t, "km", "eu-1", 10, { region: "eu" });
    expect(e1.leaderboards.regional).toMatchObject({ rank: 1, breakdownAttribute: "region", breakdownAttributeValue: "eu", threshold: 0 });
    const e2 = await event(t, "km", "eu-2", 20, { region: "eu" });
    expect(e2.leaderboards.regional).toMatchObject({ rank: 1, breakdownAttributeValue: "eu" });
    // 15 would be second in a single board; in its own group it is first.
    const us = await event(t, "km", "us-1", 15, { region: "us" });
    expect(us.leaderboards.regional).toMatchObject({ rank: 1, breakdownAttributeValue: "us" });

    expect(await rows(t, "regional", "?userAttributes=region:eu")).toEqual([
      ["eu-2", 1, 20],
      ["eu-1", 2, 10],
    ]);
    expect(await rows(t, "regional", "?userAttributes=region:us")).toEqual([["us-1", 1, 15]]);
    expect(await rows(t, "regional", "?userAttributes=region:mars")).toEqual([]);
    expect(await board(t, "regional", "?userAttributes=region:eu")).toMatchObject({ breakdownAttribute: "region", status: "active" });
    expect(await userBoard(t, "eu-1", "regional")).toMatchObject({ rank: 2, value: 10, breakdownAttributeValue: "eu" });
  });

  it("needs userAttributes naming the attribute (422)", async () => {
    const t = app();
    // tier is declared (plan is not): a well-formed filter without the board's attribute is 422 too.
    for (const query of ["", "?userAttributes=", "?userAttributes=plan:gold", "?userAttributes=tier:gold"]) {
      const res = await t.call("GET", `/v1/leaderboards/regional${query}`);
      expect(res.status, query).toBe(422);
      expect(res.body).toEqual({ error: expect.any(String) });
    }
    // Naming it with an empty value: well formed, but users whose region is empty are on no group.
    expect(await t.call("GET", "/v1/leaderboards/regional?userAttributes=region:")).toEqual({
      status: 422,
      body: { error: "Leaderboard regional is broken down by region: users whose region is empty are on no group; pass a value" },
    });
    // Naming it with a value no attribute can hold is malformed (400).
    for (const query of ["?userAttributes=region:%00", "?userAttributes=region:e%01u"]) {
      const res = await t.call("GET", `/v1/leaderboards/regional${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body).toEqual({ error: expect.stringContaining("userAttributes must be region:<value>") });
    }
    // Naming it twice: the first was taken, the second dropped without a word.
    expect(await t.call("GET", "/v1/leaderboards/regional?userAttributes=region:eu,region:us")).toEqual({ status: 400, body: { error: "userAttributes names the attribute region more than once" } });
  });

  it("refuses other pairs malformed (400) or undeclared (422) beside the group, as every read that takes userAttributes does", async () => {
    const t = app();
    // A declared attribute beside the group picks nothing and is taken.
    expect(await t.call("GET", "/v1/leaderboards/regional?userAttributes=region:eu,tier:gold")).toEqual(await t.call("GET", "/v1/leaderboards/regional?userAttributes=region:eu"));
    expect(await t.call("GET", "/v1/leaderboards/regional?userAttributes=region:eu,colour")).toEqual({ status: 400, body: { error: "userAttributes must be key:value pairs separated by commas" } });
    expect(await t.call("GET", "/v1/leaderboards/regional?userAttributes=region:eu,colour:%01")).toEqual({ status: 400, body: { error: "userAttributes values must be without control characters" } });
    expect(await t.call("GET", "/v1/leaderboards/regional?userAttributes=region:eu,colour:red")).toEqual({ status: 422, body: { error: "Invalid attribute keys: colour" } });
    expect(await t.call("GET", "/v1/leaderboards/regional?userAttributes=colour:red")).toEqual({ status: 422, body: { error: "Invalid attribute keys: colour" } });
  });

  it("a board without a breakdown ignores a well-formed userAttributes, and refuses a malformed or undeclared one as other reads do", async () => {
    const t = app();
    const whole = await t.call("GET", "/v1/leaderboards/walkers");
    expect(whole.status).toBe(200);
    expect(await t.call("GET", "/v1/leaderboards/walkers?userAttributes=region:eu")).toEqual(whole);
    expect(await t.call("GET", "/v1/leaderboards/walkers?userAttributes=region")).toEqual({ status: 400, body: { error: "userAttributes must be key:value pairs separated by commas" } });
    expect(await t.call("GET", "/v1/leaderboards/walkers?userAttributes=region:eu,region:us")).toEqual({ status: 400, body: { error: "userAttributes names the attribute region more than once" } });
    expect(await t.call("GET", "/v1/leaderboards/walkers?userAttributes=color:red")).toEqual({ status: 422, body: { error: "Invalid attribute keys: color" } });
  });

  it("leaves a user without the attribute, or with it empty, on no group", async () => {
    const t = app();
    const none = await event(t, "km", "nomad", 50);
    expect(none.leaderboards).toEqual({});
    expect(await userBoard(t, "nomad", "regional")).toMatchObject({ rank: null, value: null, history: [] });
    const blank = await event(t, "km", "blank", 50, { region: "" });
    expect(blank.leaderboards).toEqual({});
    expect(await userBoard(t, "blank", "regional")).toMatchObject({ rank: null, value: null, history: [] });
    for (const region of ["eu", "us"]) {
      expect((await rows(t, "regional", `?userAttributes=region:${region}`)).map(([id]) => id)).not.toContain("nomad");
    }
  });

  it("around me stays within the user's group", async () => {
    const t = app();
    expect(await rows(t, "regional", "?userAttributes=region:eu&userId=eu-1&offset=-1")).toEqual([
      ["eu-2", 1, 20],
      ["eu-1", 2, 10],
    ]);
    expect(await rows(t, "regional", "?userAttributes=region:us&userId=eu-1&offset=-1")).toEqual([]);
  });
});

describe("a streak board (rankBy streak)", () => {
  const app = useApp("2026-03-02T12:00:00Z");

  it("ranks by the current streak and moves with each extension", async () => {
    const t = app();
    const a1 = await event(t, "lessons", "sa", 1);
    expect(a1.leaderboards.streaks).toMatchObject({ rank: 1, previousRank: null, rankBy: "streak" });
    await event(t, "lessons", "sb", 1);
    await event(t, "lessons", "sc", 1);
    // A second lesson the same day does not extend the streak: the streak board does not move.
    const same = await event(t, "lessons", "sa", 1);
    expect(Object.keys(same.leaderboards)).not.toContain("streaks");

    await t.setClock("2026-03-03T12:00:00Z");
    const a2 = await event(t, "lessons", "sa", 1);
    expect(a2.currentStreak.length).toBe(2);
    expect(a2.leaderboards.streaks).toMatchObject({ rank: 1, previousRank: 1 });
    // Competition ranks: sb ties sa at 2 (behind it, having reached 2 a millisecond later).
    await tick(t, 1);
    const b2 = await event(t, "lessons", "sb", 1);
    expect(b2.leaderboards.streaks).toMatchObject({ rank: 1, previousRank: 1 });
    expect(await rows(t, "streaks")).toEqual([
      ["sa", 1, 2],
      ["sb", 1, 2],
      ["sc", 3, 1],
    ]);
  });

  it("drops a user whose streak is lost (an event after a missed day)", async () => {
    const t = app();
    await t.setClock("2026-03-05T12:00:00Z");
    // sb missed 4 March; an event of a metric outside the streak settles it: lost, off the board.
    const lost = await event(t, "pings", "sb", 1);
    expect(lost.currentStreak.length).toBe(0);
    expect(lost.leaderboards.streaks).toMatchObject({ rank: null, previousRank: 1 });
    expect(await userBoard(t, "sb", "streaks")).toMatchObject({ rank: null, value: null });
    expect((await userBoard(t, "sb", "streaks")).history[0]).toMatchObject({ previousRank: 1, rank: null, previousValue: 2, value: null });
    // sa missed it too, but a lesson starts a new streak: back to 1, not 3.
    const restart = await event(t, "lessons", "sa", 1);
    expect(restart.currentStreak.length).toBe(1);
    expect(restart.leaderboards.streaks).toMatchObject({ rank: 1, previousRank: 1 });
    // sc, whose streak of 1 was lost on 4 March, is gone once something settles it; until then
    // the board keeps the last length written. A lesson restarts it at 1, after sa.
    await tick(t, 1);
    await event(t, "lessons", "sc", 1);
    expect(await rows(t, "streaks")).toEqual([
      ["sa", 1, 1],
      ["sc", 1, 1],
    ]);
    expect(await userBoard(t, "sa", "streaks")).toMatchObject({ rank: 1, value: 1 });
  });
});

describe("around me (userId makes offset relative to the user)", () => {
  const app = useApp("2026-03-02T12:00:00Z");
  const ids = ["p1", "p2", "p3", "p4", "p5", "p6"];

  beforeAll(async () => {
    const t = app();
    for (const [i, id] of ids.entries()) await event(t, "steps", id, 60 - 10 * i);
  });

  const window = (from: number, to: number) => ids.slice(from, to).map((id) => [id, ids.indexOf(id) + 1, 60 - 10 * ids.indexOf(id)]);

  it.each([
    ["p4", -2, 5, window(1, 6)],
    ["p4", -1, 3, window(2, 5)],
    ["p4", 0, 2, window(3, 5)],
    ["p4", 1, 2, window(4, 6)],
    ["p4", 2, 3, window(5, 6)],
    ["p2", 3, 10, window(4, 6)],
    ["p4", -10, 3, window(0, 3)],
    ["p6", -1, 10, window(4, 6)],
    ["p1", 0, 1, window(0, 1)],
    ["p3", 5, 3, []],
  ])("userId=%s offset=%i limit=%i", async (userId, offset, limit, expected) => {
    expect(await rows(app(), "walkers", `?userId=${userId}&offset=${offset}&limit=${limit}`)).toEqual(expected);
  });

  it("gives empty rankings for a user who is not on the board", async () => {
    const t = app();
    expect(await rows(t, "walkers", "?userId=stranger&offset=-2")).toEqual([]);
  });

  it("refuses a negative offset without userId (422)", async () => {
    const res = await app().call("GET", "/v1/leaderboards/walkers?offset=-1");
    expect(res.status).toBe(422);
  });

  it("plain pages: offset and limit from the top", async () => {
    const t = app();
    expect(await rows(t, "walkers", "?offset=2&limit=2")).toEqual(window(2, 4));
    expect(await rows(t, "walkers")).toEqual(window(0, 6));
    expect(await rows(t, "walkers", "?limit=0")).toEqual([]);
    // An empty userId is no user, as an empty value of every optional parameter is: the top page.
    expect(await rows(t, "walkers", "?userId=&offset=2&limit=2")).toEqual(window(2, 4));
  });

  it("bounds offset by 1e8, down to -1e8 with userId (422 beyond)", async () => {
    const t = app();
    expect(await rows(t, "walkers", "?offset=100000000")).toEqual([]);
    expect((await t.call("GET", "/v1/leaderboards/walkers?offset=100000001")).status).toBe(422);
    expect(await rows(t, "walkers", "?userId=p4&offset=-100000000&limit=2")).toEqual(window(0, 2));
    expect((await t.call("GET", "/v1/leaderboards/walkers?userId=p4&offset=-100000001")).status).toBe(422);
  });
});

describe("many equal values on each shard", () => {
  // 300 users at one value in one millisecond (so ordered by user id, descending bytes), about 150
  // a shard (more than the 16 the scripts read at once: lua/includes/board-order.lua), between
  // users above and below them. Each shard's neighbours of a value used to be read by score
  // alone, so the ties on the user's shard hid the user's place: an around-me window started
  // elsewhere. And the ordinal rank read every tie.
  const app = useTenantApp(
    "crowd",
    `
    shards: 2
    metrics: [{ key: crowd, name: Crowd }]
    leaderboards:
      - { key: crowd, name: Crowd, rankBy: metric, metric: crowd, start: "2026-01-01" }
      - { key: crowd-ordinal, name: Crowd ordinal, rankBy: metric, metric: crowd, start: "2026-01-01", ranking: ordinal }
      - { key: crowd-250, name: Crowd of 250, rankBy: metric, metric: crowd, start: "2026-01-01", ranking: ordinal, maxParticipants: 250 }
      - { key: crowd-5000, name: Crowd of 5000, rankBy: metric, metric: crowd, start: "2026-01-01", ranking: ordinal, maxParticipants: 5000 }
`,
    "2026-03-02T12:00:00Z",
  );
  const tied = Array.from({ length: 300 }, (_, i) => `c-${String(i).padStart(3, "0")}`);
  // Two ids that JavaScript's < orders one way and Redis (bytes) the other: U+1F600 is above U+FFFD.
  const exotic = ["c-\u{1F600}", "c-\uFFFD"];
  let order: string[] = [];

  beforeAll(async () => {
    const t = app();
    await event(t, "crowd", "top-1", 5);
    await tick(t, 1);
    await event(t, "crowd", "top-2", 5);
    await tick(t, 1);
    for (const id of [...tied, ...exotic]) await event(t, "crowd", id, 2);
    await tick(t, 1);
    await event(t, "crowd", "low", 1);
    for (let offset = 0; offset < 305; offset += 100) order.push(...(await rows(t, "crowd-ordinal", `?offset=${offset}&limit=100`)).map(([id]) => id));
  });

  it("the board order: value, then first to reach it, then user id in descending byte order", () => {
    const sameMs = [...tied, ...exotic].sort((a, b) => Buffer.compare(Buffer.from(b), Buffer.from(a)));
    expect(sameMs.indexOf("c-\u{1F600}")).toBeLessThan(sameMs.indexOf("c-\uFFFD"));
    expect(order).toEqual(["top-1", "top-2", ...sameMs, "low"]);
  });

  it("one page holds the whole board past 100 entries (limit up to the board's size, trophy-compat §2.2 #24)", async () => {
    const t = app();
    expect((await rows(t, "crowd-ordinal", "?limit=1000")).map(([id]) => id)).toEqual(order);
    expect((await rows(t, "crowd-ordinal", "?offset=3&limit=300")).map(([id]) => id)).toEqual(order.slice(3, 303));
    expect(await t.call("GET", "/v1/leaderboards/crowd?limit=1001")).toEqual({ status: 422, body: { error: "limit must be between 0 and 1000" } });
    // A board of 250 pages up to 250; a board of 5000 up to 1000 a page (the cap: a larger board is read in pages).
    expect((await rows(t, "crowd-250", "?limit=250")).map(([id]) => id)).toEqual(order.slice(0, 250));
    expect(await t.call("GET", "/v1/leaderboards/crowd-250?limit=251")).toEqual({ status: 422, body: { error: "limit must be between 0 and 250" } });
    expect((await rows(t, "crowd-5000", "?limit=1000")).map(([id]) => id)).toEqual(order);
    expect(await t.call("GET", "/v1/leaderboards/crowd-5000?limit=1001")).toEqual({ status: 422, body: { error: "limit must be between 0 and 1000" } });
  });

  it("around-me windows are the board order's slices, for every user", async () => {
    const t = app();
    for (const [offset, limit] of [[-2, 5], [0, 1], [3, 2]] as const) {
      for (const [i, id] of order.entries()) {
        const got = (await rows(t, "crowd", `?userId=${encodeURIComponent(id)}&offset=${offset}&limit=${limit}`)).map(([u]) => u);
        const from = Math.max(0, i + offset);
        expect(got, `${id} offset ${offset} limit ${limit}`).toEqual(order.slice(from, from + limit));
      }
    }
  });

  /** The app's store, the "crowd" board, its run under way and that run's keys. */
  const crowdRun = (t: TestApp) => {
    const store = t.app.tenants.all[0]!.store;
    const board = store.tenant.leaderboards.find((b) => b.key === "crowd")!;
    const run = activeRun(board, t.clock.now())!;
    return { store, board, run, keys: boardKeys(store, board, run, "") };
  };

  it("a user's place and the entries around it are the same one call a shard (a Redis Cluster node's way) as in one call over every shard", async () => {
    const t = app();
    const { store, board, run, keys } = crowdRun(t);
    // A client that never asked whether Redis is standalone calls one shard at a time
    // (cross-shard.ts); Laurel's own client otherwise, whose turns gather the places.
    const perShardClient = createRedisClient(`redis://${t.redis.options.host}:${t.redis.options.port}`);
    await perShardClient.ping();
    const perShard = { ...store, redis: perShardClient } as unknown as TenantStore;
    try {
      for (const id of ["top-1", "c-150", "c-\uFFFD", "low"]) {
        const own = (await userEntry(store, board, run, id))!;
        for (const [before, after] of [[0, 0], [2, 3], [5, 0], [0, 4], [400, 400]] as const) {
          const together = await entriesAround(store, keys, own.value, own.member, before, after);
          expect(await entriesAround(perShard, keys, own.value, own.member, before, after), `${id} ${before} ${after}`).toEqual(together);
          // The window is the board order's slice around the user.
          const at = order.indexOf(id);
          expect(together!.position).toBe(at + 1);
          expect(together!.ahead.map((e) => memberUser(e.member))).toEqual(order.slice(Math.max(0, at - before), at));
          expect(together!.behind.map((e) => memberUser(e.member))).toEqual(order.slice(at, at + after));
        }
      }
      const { waves } = await wavesDuring(perShardClient, () => entriesAround(perShard, keys, 2, "x", 1, 1));
      // The place, a call a shard; then each shard's entries on both sides of it, one ZREVRANGE a shard.
      expect(waves.map((wave) => wave.length)).toEqual([store.tenant.shards, store.tenant.shards]);
      // Every user's place asked in one turn: still a call a shard, each entry as in one call over every shard.
      const entries = await Promise.all(order.map((id) => userEntry(store, board, run, id)));
      const gathered = await wavesDuring(perShardClient, () => Promise.all(entries.map((e) => entriesAround(perShard, keys, e!.value, e!.member, 0, 0))));
      expect(gathered.waves.map((wave) => wave.length)).toEqual([store.tenant.shards]);
      expect(gathered.result.map((place) => place!.position)).toEqual(order.map((_, at) => at + 1));
    } finally {
      perShardClient.disconnect();
    }
  });

  it("the places of a whole board asked for in one turn are one call, each as exact as alone (lua/boardPlaces-1.lua)", async () => {
    const t = app();
    const { store, board, run, keys } = crowdRun(t);
    const entries = await Promise.all(order.map((id) => userEntry(store, board, run, id)));
    // Every user (302 of them on one value, bisected on each shard), in a shuffled order, some twice.
    const asked = [...order.keys()].sort((a, b) => ((a * 7919) % 307) - ((b * 7919) % 307));
    asked.push(5, 150, 0);
    const { result, waves } = await wavesDuring(t.redis, () => Promise.all(asked.map((at) => entriesAround(store, keys, entries[at]!.value, entries[at]!.member, 0, 0))));
    expect(waves.map((wave) => wave.length)).toEqual([1]);
    expect(result.map((place) => place!.position)).toEqual(asked.map((at) => at + 1));
    // With a board's size, an entry with that many above is off (null): "low" alone, below 304.
    const sized = await Promise.all(asked.map((at) => entriesAround(store, keys, entries[at]!.value, entries[at]!.member, 0, 0, 100)));
    expect(sized.map((place) => place?.position ?? null)).toEqual(asked.map((at) => (order[at] === "low" ? null : at + 1)));
    // Off by the values above alone (two above "low"'s value with a board of two): -1 for it only.
    const low = entries[order.indexOf("low")]!;
    const small = await Promise.all([entriesAround(store, keys, low.value, low.member, 0, 0, 2), entriesAround(store, keys, entries[0]!.value, entries[0]!.member, 0, 0, 2)]);
    expect(small.map((place) => place?.position ?? null)).toEqual([null, 1]);
  });

  it("ordinal ranks are positions in that order: the user read, a page and an event", async () => {
    const t = app();
    for (const [i, id] of order.entries()) expect((await userBoard(t, encodeURIComponent(id), "crowd-ordinal")).rank, id).toBe(i + 1);
    expect((await rows(t, "crowd-ordinal", "?userId=c-100&offset=-1&limit=3")).map(([, rank]) => rank)).toEqual([
      order.indexOf("c-100"),
      order.indexOf("c-100") + 1,
      order.indexOf("c-100") + 2,
    ]);
    // Reached later than every tied user: an event's own rank counts all of them ahead.
    await tick(t, 1);
    const late = await event(t, "crowd", "c-late", 2);
    expect(late.leaderboards["crowd-ordinal"].rank).toBe(order.length);
    expect((await userBoard(t, "c-late", "crowd-ordinal")).rank).toBe(order.length);
    expect((await userBoard(t, "low", "crowd-ordinal")).rank).toBe(order.length + 1);
  });
});

describe("equal values on a shard around the page and the window: 16, 17 and 65 of them", () => {
  // board-order.lua tiesAhead (through lua/boardPlaces-1.lua) reads 16 equal values at once
  // (TIE_PAGE); past them it bisects positions until 8 candidates are left (TIE_WINDOW). 16: the
  // page exactly; 17: one past it; 65: bisected, every position among them read.
  const app = useTenantApp(
    "tie65",
    `
    shards: 1
    metrics: [{ key: crowd, name: Crowd }]
    leaderboards:
      - { key: crowd-ordinal, name: Crowd ordinal, rankBy: metric, metric: crowd, start: "2026-01-01", ranking: ordinal }
`,
    "2026-03-02T12:00:00Z",
  );

  it("ranks each by its position, the last one of each value too", async () => {
    const t = app();
    await event(t, "crowd", "top", 9);
    await tick(t, 1);
    const groups = [
      { value: 5, users: 16 },
      { value: 4, users: 17 },
      { value: 2, users: 65 },
    ].map(({ value, users }) => ({ value, tied: Array.from({ length: users }, (_, i) => `t${value}-${String(i).padStart(2, "0")}`) }));
    for (const { value, tied } of groups) {
      for (const id of tied) {
        await event(t, "crowd", id, value);
        await tick(t, 1);
      }
    }
    let ahead = 1;
    for (const { tied } of groups) {
      for (const [i, id] of tied.entries()) expect((await userBoard(t, id, "crowd-ordinal")).rank, id).toBe(ahead + i + 1);
      ahead += tied.length;
    }
  });
});

describe("on the board or off it, as an event response counts it", () => {
  // Found by an audit: the event script took a threshold of 0 or below for room on the board,
  // compared a competition or dense rank number (not the place) with maxParticipants, gave a
  // user who fell onto the threshold from above no rank though the board still listed them, and
  // ranked breakdown boards without their groups' thresholds.
  const app = useTenantApp(
    "cut",
    `
    metrics: [{ key: sc, name: Score }, { key: km, name: Kilometres }, { key: fa, name: Falls }, { key: ti, name: Ties }, { key: eq, name: Equal }]
    attributes:
      user: [region]
    leaderboards:
      - { key: s5c, name: Five, rankBy: metric, metric: sc, start: "2026-01-01", maxParticipants: 5 }
      - { key: s5d, name: Five dense, rankBy: metric, metric: sc, start: "2026-01-01", maxParticipants: 5, ranking: dense }
      - { key: s5o, name: Five ordinal, rankBy: metric, metric: sc, start: "2026-01-01", maxParticipants: 5, ranking: ordinal }
      - { key: f5c, name: Five falls, rankBy: metric, metric: fa, start: "2026-01-01", maxParticipants: 5 }
      - { key: f5d, name: Five falls dense, rankBy: metric, metric: fa, start: "2026-01-01", maxParticipants: 5, ranking: dense }
      - { key: f5o, name: Five falls ordinal, rankBy: metric, metric: fa, start: "2026-01-01", maxParticipants: 5, ranking: ordinal }
      - { key: e1c, name: One, rankBy: metric, metric: eq, start: "2026-01-01", maxParticipants: 1 }
      - { key: e1o, name: One ordinal, rankBy: metric, metric: eq, start: "2026-01-01", maxParticipants: 1, ranking: ordinal }
      - { key: t2c, name: Two ties, rankBy: metric, metric: ti, start: "2026-01-01", maxParticipants: 2 }
      - { key: t2d, name: Two ties dense, rankBy: metric, metric: ti, start: "2026-01-01", maxParticipants: 2, ranking: dense }
      - { key: bd, name: By region, rankBy: metric, metric: km, start: "2026-01-01", maxParticipants: 3, breakdownAttribute: region }
      - { key: bdd, name: By region dense, rankBy: metric, metric: km, start: "2026-01-01", maxParticipants: 3, breakdownAttribute: region, ranking: dense }
`,
    "2026-02-01T00:00:00Z",
  );
  const boards = ["s5c", "s5d", "s5o"];
  const fallBoards = ["f5c", "f5d", "f5o"];
  const ranks = (body: { leaderboards: Record<string, { rank: number | null }> }, keys: string[]) => keys.map((k) => body.leaderboards[k]?.rank);

  it("a full board of negative values: a newcomer tying the threshold is off it, in every style", async () => {
    for (const [i, id] of ["n-a", "n-b", "n-c", "n-d", "n-e"].entries()) {
      await tick(app(), 1);
      await event(app(), "sc", id, -(i + 1));
    }
    await tick(app(), 1000);
    const late = await event(app(), "sc", "n-f", -5);
    expect(ranks(late, boards)).toEqual([null, null, null]);
    expect(late.leaderboards.s5c.threshold).toBe(-5);
    for (const key of boards) {
      const read = await userBoard(app(), "n-f", key);
      expect([read.rank, read.history], key).toEqual([null, []]);
    }
  });

  it("a user falling onto the threshold from above keeps the place the board lists", async () => {
    for (const [i, id] of ["f-a", "f-b", "f-c", "f-d", "f-e"].entries()) {
      await tick(app(), 1);
      await event(app(), "sc", id, 100 - i);
    }
    await tick(app(), 1000);
    // f-a: 100 -> 95, the threshold (f-e's 96) and below it, but the board holds five.
    const fell = await event(app(), "sc", "f-a", -5);
    expect(ranks(fell, boards)).toEqual([5, 5, 5]);
    expect(fell.leaderboards.s5c.previousRank).toBe(1);
    expect((await rows(app(), "s5c")).map(([id]) => id)).toEqual(["f-b", "f-c", "f-d", "f-e", "f-a"]);
    expect((await userBoard(app(), "f-a", "s5c")).history[0]).toMatchObject({ previousRank: 1, rank: 5, value: 95 });
  });

  it("values that fell since the threshold was read: a climber past the board's new last place is on it", async () => {
    // Found by an audit (the twenty-seventh stop): the threshold is read at most a second before
    // (here: when the clock last moved), and values can fall. k-a..k-e hold 50..46 (threshold 46);
    // k-a falls to 1, so the board's fifth place is now 45 (k-f); k-g climbs to 45.5 without the
    // clock moving: above the board's last place, below the threshold read before the fall.
    for (const [i, id] of ["k-a", "k-b", "k-c", "k-d", "k-e", "k-f"].entries()) {
      await tick(app(), 1);
      await event(app(), "fa", id, 50 - i);
    }
    await tick(app(), 1000);
    await event(app(), "fa", "k-a", -49);
    const climb = await event(app(), "fa", "k-g", 45.5);
    // Competition, dense and ordinal: k-b 49, k-c 48, k-d 47, k-e 46, k-g 45.5.
    expect(ranks(climb, fallBoards)).toEqual([5, 5, 5]);
    expect((await rows(app(), "f5c")).map(([id]) => id)).toEqual(["k-b", "k-c", "k-d", "k-e", "k-g"]);
    // Its rank history has the entry, so the next change has a previous rank.
    expect((await userBoard(app(), "k-g", "f5c")).history[0]).toMatchObject({ previousRank: null, rank: 5, value: 45.5 });
    expect((await event(app(), "fa", "k-g", 10)).leaderboards.f5c).toMatchObject({ rank: 1, previousRank: 5 });
  });

  it("a fall from below the threshold is not counted: it frees no place", async () => {
    // The run's falls counter ({t}:lbc:<board>:<run>, field f) holds k-a's fall of the test above.
    const falls = async () => {
      const keys = await app().redis.keys(`{${app().tenants[0]!.id}}:lbc:f5c:*`);
      expect(keys).toHaveLength(1);
      return Number(await app().redis.hget(keys[0]!, "f"));
    };
    expect(await falls()).toBe(1);
    await tick(app(), 1000);
    // The board: k-g 55.5, k-b 49, k-c 48, k-d 47, k-e 46 (the threshold); k-f 45 falls to 44.
    expect(ranks(await event(app(), "fa", "k-f", -1), fallBoards)).toEqual([null, null, null]);
    expect(await falls()).toBe(1);
    expect(ranks(await event(app(), "fa", "k-h", 45.5), fallBoards)).toEqual([null, null, null]);
    // One from the board is: k-e 46 -> 45, behind k-h (45.5), off the board; then k-f 44 -> 45.7
    // passes k-h, the board's fifth place, though not the threshold read before the fall.
    expect(ranks(await event(app(), "fa", "k-e", -1), fallBoards)).toEqual([null, null, null]);
    expect(await falls()).toBe(2);
    expect(ranks(await event(app(), "fa", "k-f", 1.7), fallBoards)).toEqual([5, 5, 5]);
  });

  it("a value equal to the threshold reached in the same millisecond by a greater id is ahead of it", async () => {
    // Found by a review (the twenty-eighth stop): the threshold (5, e-a's) is read in the
    // millisecond e-a reached it; e-b reaches 5 in that millisecond, and the greater id ranks first.
    await tick(app(), 1000);
    await event(app(), "eq", "e-a", 5);
    await app().setClock(new Date(app().clock.now()).toISOString()); // reads the threshold, same instant
    expect(ranks(await event(app(), "eq", "e-b", 5), ["e1c", "e1o"])).toEqual([1, 1]);
    expect((await rows(app(), "e1c")).map(([id]) => id)).toEqual(["e-b"]);
    // A millisecond later, a tie is behind it: off the board.
    await tick(app(), 1);
    expect(ranks(await event(app(), "eq", "e-c", 5), ["e1c", "e1o"])).toEqual([null, null]);
  });

  it("a value equal to a threshold read in an earlier millisecond is off the board uncounted", async () => {
    // A manual clock reads the thresholds at every move, so a change right after one is in the
    // millisecond of the read (counted). Read again as if a millisecond earlier (the system
    // clock's refresh, every second): the threshold (5) is then trusted, and no place counted.
    const { store } = app().app.tenants.all[0]!;
    const now = app().clock.now();
    await store.thresholds.refresh(now, () => now - 1);
    const counts = (seen: Observed) =>
      seen.luaCommands.filter((c) => c[0]!.toLowerCase() === "zcount" && c[1]!.startsWith(`{${store.tenant.id}:`) && c[1]!.includes(":lb:e1c:")).length;
    let reply: Awaited<ReturnType<typeof event>> | undefined;
    const seen = await commandsDuring(inject("redisUrl"), async () => (reply = await event(app(), "eq", "e-d", 5)), app().redis);
    expect(ranks(reply!, ["e1c"])).toEqual([null]);
    expect(counts(seen)).toBe(0);
    // e-d's 5 was reached after e-b's: the board still lists e-b alone.
    expect((await rows(app(), "e1c")).map(([id]) => id)).toEqual(["e-b"]);
  });

  it("a board that filled since its threshold was read: a tie reached last beyond its last place is off it", async () => {
    // The threshold read last said room (-inf); within the millisecond three users reach 5, the
    // greater id first (the same millisecond orders by id, descending): t-a's place is third.
    await tick(app(), 1000);
    const replies = [];
    for (const id of ["t-c", "t-b", "t-a"]) replies.push(await event(app(), "ti", id, 5));
    expect(replies.map((r) => ranks(r, ["t2c", "t2d"]))).toEqual([
      [1, 1],
      [1, 1],
      [null, null],
    ]);
    expect((await rows(app(), "t2c")).map(([id]) => id)).toEqual(["t-c", "t-b"]);
    // Dense: two ahead at 9 leave 5 a dense rank of 2, but the place (third) is off the board.
    await tick(app(), 1000);
    for (const id of ["t-d", "t-e"]) await event(app(), "ti", id, 9);
    expect(ranks(await event(app(), "ti", "t-f", 6), ["t2c", "t2d"])).toEqual([null, null]);
  });

  it("a breakdown group that is full: a newcomer below its last place is off it (competition and dense)", async () => {
    for (const id of ["g-a", "g-b", "g-c"]) {
      await tick(app(), 1);
      await event(app(), "km", id, 10, { region: "eu" });
    }
    await tick(app(), 600_000);
    const low = await event(app(), "km", "g-d", 1, { region: "eu" });
    expect(ranks(low, ["bd", "bdd"])).toEqual([null, null]);
    expect((await userBoard(app(), "g-d", "bdd")).history).toEqual([]);
    // A tie with the group's last place, reached later, is off it too; in another group, first.
    const tie = await event(app(), "km", "g-e", 10, { region: "eu" });
    expect(ranks(tie, ["bd", "bdd"])).toEqual([null, null]);
    expect(ranks(await event(app(), "km", "g-f", 1, { region: "us" }), ["bd", "bdd"])).toEqual([1, 1]);
  });
});

describe("two processes with thresholds read at different times", () => {
  // Each process reads its thresholds on its own (every second; here when its manual clock
  // moves). A fall judged by a process whose threshold is older than the fall before it must
  // still count, or a process that read the threshold after that first fall trusts it.
  let a: TestApp;
  let b: TestApp;
  beforeAll(async () => {
    const yaml = tenantYaml(
      uniqueTenantId("two"),
      `
    metrics: [{ key: sc, name: Score }]
    leaderboards:
      - { key: two, name: Two, rankBy: metric, metric: sc, start: "2026-01-01", maxParticipants: 2 }
`,
    );
    a = await startTestApp({ yaml, manualClock: "2026-02-01T00:00:00Z", jobs: false });
    b = await startTestApp({ yaml, manualClock: "2026-02-01T00:00:00Z", jobs: false });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
  });

  it("a fall below a stale threshold counts, so the other process does not trust its newer one", async () => {
    for (const [i, id] of ["p-a", "p-b", "p-c"].entries()) {
      await tick(a, 1);
      await event(a, "sc", id, 10 - i);
    }
    await tick(a, 1000); // a reads the threshold 9 (p-b's)
    await event(a, "sc", "p-a", -9); // 10 -> 1: the board is p-b 9, p-c 8
    await tick(b, 2000); // b reads 8, after that fall
    // p-c 8 -> 0 through a, below a's threshold (9) but on the board: the board is p-b 9, p-a 1.
    expect((await event(a, "sc", "p-c", -8)).leaderboards.two.rank).toBeNull();
    // p-d reaches 5 through b: below b's threshold (8), above the board's last place.
    expect((await event(b, "sc", "p-d", 5)).leaderboards.two.rank).toBe(2);
    expect((await rows(b, "two")).map(([id]) => id)).toEqual(["p-b", "p-d"]);
  });
});

describe("GET /v1/users/{id}/leaderboards/{key}", () => {
  const app = useApp("2026-03-02T12:00:00Z");

  beforeAll(async () => {
    const t = app();
    await event(t, "steps", "lead", 100);
    await tick(t, 1000);
    await event(t, "steps", "hist", 10);
    await tick(t, 1000);
    await event(t, "steps", "hist", 200);
    await tick(t, 1000);
    await event(t, "steps", "hist", -150);
  });

  it("returns the board, the rank and value, and the history newest first", async () => {
    const t = app();
    const res = await userBoard(t, "hist", "walkers");
    expect(res).toMatchObject({ key: "walkers", name: "Walkers", rankBy: "metric", metricKey: "steps", metricName: "Steps", status: "active", rank: 2, value: 60 });
    expect(res.history).toEqual([
      { timestamp: "2026-03-02T12:00:03.000Z", previousRank: 1, rank: 2, previousValue: 210, value: 60 },
      { timestamp: "2026-03-02T12:00:02.000Z", previousRank: 2, rank: 1, previousValue: 10, value: 210 },
      { timestamp: "2026-03-02T12:00:01.000Z", previousRank: null, rank: 2, previousValue: null, value: 10 },
    ]);
  });

  it("bounds the history by numEvents (0 to 100)", async () => {
    const t = app();
    expect((await userBoard(t, "hist", "walkers", "?numEvents=1")).history.map((h: any) => h.value)).toEqual([60]);
    expect((await userBoard(t, "hist", "walkers", "?numEvents=0")).history).toEqual([]);
    expect((await userBoard(t, "hist", "walkers", "?numEvents=100")).history).toHaveLength(3);
    for (const [query, status] of [["?numEvents=101", 422], ["?numEvents=-1", 422], ["?numEvents=ten", 400]] as const) {
      const res = await t.call("GET", `/v1/users/hist/leaderboards/walkers${query}`);
      expect(res.status, query).toBe(status);
      expect(res.body).toEqual({ error: expect.any(String) });
    }
  });

  it("keeps 100 events of history at most", async () => {
    const t = app();
    // Past 120 entries the script trims the history to the newest 100 (README: the newest 100-120
    // are kept): the 121st event trims it, and a read of 100 still finds them all.
    for (let i = 0; i < 121; i++) await event(t, "steps", "busy", 1);
    const res = await userBoard(t, "busy", "walkers", "?numEvents=100");
    expect(res.value).toBe(121);
    expect(res.history).toHaveLength(100);
    expect(res.history[0]).toMatchObject({ previousValue: 120, value: 121 });
    expect(res.history[99]).toMatchObject({ previousValue: 21, value: 22 });
    const [key, ...others] = await t.redis.keys(`{${t.tenants[0]!.id}:*}:lh:walkers:*:busy`);
    expect(others).toEqual([]);
    expect(await t.redis.llen(key!)).toBeGreaterThanOrEqual(100);
    expect(await t.redis.llen(key!)).toBeLessThanOrEqual(120);
  });

  it("404s an unknown user or an unknown board", async () => {
    const t = app();
    const user = await t.call("GET", "/v1/users/nobody/leaderboards/walkers");
    expect(user.status).toBe(404);
    expect(user.body.error).toMatch(/user/i);
    const key = await t.call("GET", "/v1/users/hist/leaderboards/no-such-board");
    expect(key.status).toBe(404);
    expect(key.body.error).toMatch(/leaderboard/i);
    expect((await t.call("GET", "/v1/leaderboards/no-such-board")).status).toBe(404);
  });

  it("a known user with no value on the board: rank and value null, no history", async () => {
    const t = app();
    expect(await userBoard(t, "lead", "top3")).toMatchObject({ key: "top3", rank: null, value: null, history: [] });
  });

  it("reads the user and their history in one round trip, then the rank: two in all (were five, then three)", async () => {
    const t = app();
    const { result, waves } = await wavesDuring(t.redis, () => userBoard(t, "hist", "walkers"));
    // Ranked (2nd, or 3rd once the history test's busy walker is on the board).
    expect(result).toMatchObject({ rank: expect.any(Number), value: 60 });
    // The user's read (a script) and the history's LRANGE together; then the rank: the values
    // above and the place among equal values, one call over every shard (lua/boardPlaces-1.lua),
    // with the user's entry read again right behind it (unmoved: the rank is the entry's;
    // store/leaderboard-store.ts userBoardRank).
    expect(waves[0]).toHaveLength(2);
    expect(waves[0]).toContain("lrange");
    expect(waves).toHaveLength(2);
    expect(waves[1]).toHaveLength(2);
  });

  it("reads the page around a user in four round trips: the user, the place, its neighbours, the names with the first rank", async () => {
    const t = app();
    const { result, waves } = await wavesDuring(t.redis, () => t.call("GET", "/v1/leaderboards/walkers?userId=hist&offset=-1&limit=3"));
    expect((result.body as { rankings: { userId: string }[] }).rankings.map((r) => r.userId)).toContain("hist");
    // The user's entry (a script); the place (one call over every shard, lua/boardPlaces-1.lua);
    // each shard's entries on either side of it, plain ZREVRANGEs (read in the place's call they
    // cost Redis a quarter more: strings made in Lua, bench/README.md, the fiftieth stop); the
    // names (an HGET a user) with the first entry's rank.
    expect(waves).toHaveLength(4);
    expect(waves[1]).toHaveLength(1);
    expect(waves[2]!.every((name) => name === "zrevrange")).toBe(true);
    expect(waves[3]).toContain("hget");
  });

  it("reads a page's names and its ranks in one round trip", async () => {
    const t = app();
    const { result, waves } = await wavesDuring(t.redis, () => t.call("GET", "/v1/leaderboards/walkers"));
    expect((result.body as { rankings: unknown[] }).rankings.length).toBeGreaterThanOrEqual(2);
    // The page (a ZREVRANGE a shard), then the names (an HGET a user) with the first entry's rank (one count over every shard).
    expect(waves).toHaveLength(2);
    expect(waves[1]).toContain("hget");
    // Beside the HGETs, the rank's one script (FCALL, or EVALSHA with LAUREL_LUA=eval).
    expect(waves[1]!.filter((name) => name !== "hget")).toHaveLength(1);
  });
});

describe("the leaderboards map of an event response", () => {
  const app = useApp("2026-03-02T12:00:00Z");

  it("lists exactly the boards the event moved, in the MetricEventLeaderboardResponse shape", async () => {
    const t = app();
    const first = await event(t, "lessons", "ev-1", 2);
    // Active boards on lessons, on xp (paid by lessons) and the streak; not the finished
    // old-lessons nor the scheduled future-lessons.
    expect(Object.keys(first.leaderboards).sort()).toEqual(["streaks", "weekly-lessons", "xp-all-time"]);
    expect(first.leaderboards["xp-all-time"]).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      key: "xp-all-time",
      name: "XP all time",
      description: "Every XP point",
      rankBy: "points",
      pointsSystemKey: "xp",
      pointsSystemName: "XP",
      breakdownAttribute: null,
      breakdownAttributeValue: null,
      start: "2026-01-01",
      end: null,
      runUnit: null,
      runInterval: null,
      maxParticipants: 1000,
      ranking: "competition",
      run: "2026-01-01",
      threshold: 0,
      rank: 1,
      previousRank: null,
    });
    expect(first.leaderboards["weekly-lessons"]).toMatchObject({ metricKey: "lessons", metricName: "Lessons", runUnit: "day", runInterval: 7, run: "2026-03-02", rank: 1 });
    expect(first.leaderboards["weekly-lessons"]).not.toHaveProperty("status");
  });

  it("omits boards the event did not move", async () => {
    const t = app();
    await event(t, "lessons", "ev-2", 1);
    // Same day, already extended: lessons and xp move, the streak does not.
    const second = await event(t, "lessons", "ev-2", 3);
    expect(Object.keys(second.leaderboards).sort()).toEqual(["weekly-lessons", "xp-all-time"]);
    expect(second.leaderboards["xp-all-time"]).toMatchObject({ rank: 1, previousRank: 2 });
    expect(second.leaderboards["weekly-lessons"]).toMatchObject({ rank: 1, previousRank: 2 });
    // A value of 0 moves nothing; a metric without boards moves nothing.
    expect((await event(t, "lessons", "ev-2", 0)).leaderboards).toEqual({});
    expect((await event(t, "pings", "ev-2", 1)).leaderboards).toEqual({});
    // A fractional lesson moves the lessons board but pays no XP yet.
    const half = await event(t, "lessons", "ev-3", 0.5);
    expect(Object.keys(half.leaderboards).sort()).toEqual(["weekly-lessons"]);
    expect(half.leaderboards["weekly-lessons"]).toMatchObject({ rank: 3, previousRank: null });
    expect(await rows(t, "weekly-lessons")).toEqual([
      ["ev-2", 1, 4],
      ["ev-1", 2, 2],
      ["ev-3", 3, 0.5],
    ]);
  });

  it("a replayed event moves nothing", async () => {
    const t = app();
    const key = { "idempotency-key": "once" };
    const res1 = await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "ev-4" }, value: 1 }, key);
    expect(res1.status).toBe(201);
    expect(Object.keys(res1.body.leaderboards).length).toBeGreaterThan(0);
    const res2 = await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "ev-4" }, value: 1 }, key);
    expect(res2.status).toBe(202);
    expect(res2.body.leaderboards).toEqual({});
    expect(await userBoard(t, "ev-4", "weekly-lessons")).toMatchObject({ value: 1 });
  });
});

describe("a user's place on a full board (lua/boardPlaces-1.lua)", () => {
  const app = useTenantApp(
    "offtop",
    `
    shards: 4
    metrics: [{ key: sc, name: Score }]
    leaderboards:
      - { key: top2, name: Top two, rankBy: metric, metric: sc, start: "2026-01-01", maxParticipants: 2 }
`,
    "2026-03-02T12:00:00Z",
  );

  // The run's sets' commands, run inside the place's call (this tenant's keys only: MONITOR sees every client's scripts).
  const boardCalls = async (userId: string) => {
    const t = app();
    const tenant = t.tenants[0]!.id;
    let body: Record<string, unknown> = {};
    const seen = await commandsDuring(inject("redisUrl"), async () => (body = await userBoard(t, userId, "top2")), t.redis);
    return { body, calls: seen.luaCommands.filter((c) => c[1]?.includes(`${tenant}:`) && c[1].includes(":lb:top2:")).map((c) => c[0]!.toLowerCase()) };
  };

  it("off it by the values above alone: counted in the same call, and no equal value read", async () => {
    for (const [id, value] of [["a", 5], ["b", 4], ["low", 1]] as const) await event(app(), "sc", id, value);
    const { body, calls } = await boardCalls("low");
    expect(body).toMatchObject({ rank: null, value: null });
    // The values above on each of the 4 shards, nothing more.
    expect(calls).toEqual(["zcount", "zcount", "zcount", "zcount"]);
  });

  it("on it: the same call reads the place among equal values", async () => {
    const { body, calls } = await boardCalls("b");
    expect(body).toMatchObject({ rank: 2, value: 4 });
    expect(calls.filter((c) => c === "zcount")).toHaveLength(4);
    expect(calls.filter((c) => c === "zrevrangebyscore")).toHaveLength(4);
  });
});

describe("a user's read of an earlier run of a breakdown board, in a group they have left", () => {
  // The user's entry of an earlier run was looked for in the group of their latest run and the
  // attribute's value now only: amy ranked in eu in the first week, in us since (both her latest
  // run's group and her region now), read rank and value null in the first week, whose eu page
  // listed her first. The run's groups on her shard ({t:s}:lg) are now looked in too.
  const app = useTenantApp(
    "lbgroups",
    `
    shards: 2
    metrics: [{ key: km, name: Kilometres }]
    attributes:
      user: [region]
    leaderboards:
      - { key: weekly-km, name: Weekly km, rankBy: metric, metric: km, start: "2026-03-02", runUnit: day, runInterval: 7, breakdownAttribute: region }
`,
    "2026-03-03T12:00:00Z",
  );

  it("finds the entry in the group the user was in then", async () => {
    const t = app();
    await event(t, "km", "amy", 5, { region: "eu" });
    await event(t, "km", "bob", 3, { region: "eu" });
    await tick(t, 7 * 86_400_000);
    await event(t, "km", "amy", 2, { region: "us" });
    expect(await rows(t, "weekly-km", "?run=2026-03-02&userAttributes=region:eu")).toEqual([["amy", 1, 5], ["bob", 2, 3]]);
    expect(await userBoard(t, "amy", "weekly-km", "?run=2026-03-02")).toMatchObject({ run: "2026-03-02", rank: 1, value: 5, breakdownAttributeValue: "eu" });
    expect(await userBoard(t, "amy", "weekly-km")).toMatchObject({ run: "2026-03-09", rank: 1, value: 2, breakdownAttributeValue: "us" });
    expect((await rows(t, "weekly-km", "?run=2026-03-02&userAttributes=region:eu&userId=amy&offset=0&limit=2"))).toEqual([["amy", 1, 5], ["bob", 2, 3]]);
  });
});

/**
 * README, Leaderboards, "A clock set back": the user's state keeps the entry of the latest run
 * they moved; a change in an earlier run (the manual clock set back into it) finds the user's
 * entry there in the run's sets and leaves the state to the later run, so that neither run lists
 * the user twice and each run's value adds up every change made in it.
 */
describe("a clock set back into an earlier run and forward again", () => {
  const app = useTenantApp(
    "lbback",
    `
    metrics:
      - { key: laps, name: Laps }
      - { key: dives, name: Dives }
    attributes:
      user: [region]
    leaderboards:
      # Weekly runs from Monday 2 March 2026: run 0 from 2 March, run 1 from 9 March.
      - { key: laps-weekly, name: Laps, rankBy: metric, metric: laps, start: "2026-03-02", runUnit: day, runInterval: 7 }
      - { key: laps-regional, name: Laps by region, rankBy: metric, metric: laps, start: "2026-03-02", runUnit: day, runInterval: 7, breakdownAttribute: region }
      - { key: dives-top, name: Dives, rankBy: metric, metric: dives, start: "2026-03-02", runUnit: day, runInterval: 7, maxParticipants: 1 }
`,
    "2026-03-10T12:00:00Z",
  );

  /** Every member of the board's sets per run and group ("<run>:<group>" → "user=value" sorted), read from Redis. */
  async function members(t: TestApp, boardKey: string): Promise<Record<string, string[]>> {
    const out: Record<string, string[]> = {};
    for (const key of await t.redis.keys(`{${t.tenants[0]!.id}:*}:lb:${boardKey}:*`)) {
      const list = await t.redis.zrange(key, 0, -1, "WITHSCORES");
      const id = key.slice(key.indexOf(`:lb:${boardKey}:`) + `:lb:${boardKey}:`.length);
      for (let i = 0; i < list.length; i += 2) (out[id] ??= []).push(`${memberUser(list[i]!)}=${list[i + 1]}`);
    }
    for (const id of Object.keys(out)) out[id]!.sort();
    return out;
  }

  it("adds a later change of the later run to the user's entry there, not to a second one", async () => {
    const t = app();
    const first = await event(t, "laps", "ann", 3, { region: "eu" });
    expect(first.leaderboards["laps-weekly"]).toMatchObject({ run: "2026-03-09", rank: 1, previousRank: null });
    await t.setClock("2026-03-04T12:00:00Z");
    const back = await event(t, "laps", "ann", 2, { region: "eu" });
    expect(back.leaderboards["laps-weekly"]).toMatchObject({ run: "2026-03-02", rank: 1, previousRank: null });
    await event(t, "laps", "bob", 5, { region: "eu" });
    await t.setClock("2026-03-10T13:00:00Z");
    const forward = await event(t, "laps", "ann", 1, { region: "eu" });
    expect(forward.leaderboards["laps-weekly"]).toMatchObject({ run: "2026-03-09", rank: 1, previousRank: 1 });
    expect(forward.leaderboards["laps-regional"]).toMatchObject({ run: "2026-03-09", rank: 1, previousRank: 1 });
    expect(await rows(t, "laps-weekly")).toEqual([["ann", 1, 4]]);
    expect(await rows(t, "laps-regional", "?userAttributes=region:eu")).toEqual([["ann", 1, 4]]);
    expect(await members(t, "laps-weekly")).toEqual({ "0": ["ann=2000000", "bob=5000000"], "1": ["ann=4000000"] });
    expect(await members(t, "laps-regional")).toEqual({ "0:eu": ["ann=2000000", "bob=5000000"], "1:eu": ["ann=4000000"] });
  });

  it("adds a change in the earlier run to the entry the user has there, with the rank given there before", async () => {
    const t = app();
    await t.setClock("2026-03-05T12:00:00Z");
    // ann was given rank 1 at her change of run 0 (bob came in above her after it).
    const again = await event(t, "laps", "ann", 4, { region: "eu" });
    expect(again.leaderboards["laps-weekly"]).toMatchObject({ run: "2026-03-02", rank: 1, previousRank: 1 });
    expect(again.leaderboards["laps-regional"]).toMatchObject({ run: "2026-03-02", rank: 1, previousRank: 1 });
    expect(await rows(t, "laps-weekly", "?run=2026-03-02")).toEqual([
      ["ann", 1, 6],
      ["bob", 2, 5],
    ]);
    // The later run's entry, which the state keeps, is untouched; both runs read by the user endpoint.
    expect(await userBoard(t, "ann", "laps-weekly", "?run=2026-03-02")).toMatchObject({ run: "2026-03-02", rank: 1, value: 6 });
    expect(await userBoard(t, "ann", "laps-weekly", "?run=2026-03-09")).toMatchObject({ run: "2026-03-09", rank: 1, value: 4 });
    expect(await members(t, "laps-weekly")).toEqual({ "0": ["ann=6000000", "bob=5000000"], "1": ["ann=4000000"] });
  });

  it("finds an entry off the board (no history names it) by the user's id alone, glob characters and all", async () => {
    const t = app();
    // dives-top lists one: the leader's entry is ranked, the others' are off the board and write no history.
    await t.setClock("2026-03-11T12:00:00Z");
    await event(t, "dives", "lead", 100);
    await event(t, "dives", "g*[1]?", 1);
    await t.setClock("2026-03-06T12:00:00Z");
    await event(t, "dives", "lead", 100);
    // gzz1q matches the id g*[1]? read as a glob; the script escapes it.
    await event(t, "dives", "gzz1q", 2);
    const off = await event(t, "dives", "g*[1]?", 3);
    expect(off.leaderboards["dives-top"]).toMatchObject({ run: "2026-03-02", rank: null, previousRank: null });
    const more = await event(t, "dives", "g*[1]?", 4);
    expect(more.leaderboards["dives-top"]).toMatchObject({ rank: null, previousRank: null });
    expect(await members(t, "dives-top")).toEqual({ "0": ["g*[1]?=7000000", "gzz1q=2000000", "lead=100000000"], "1": ["g*[1]?=1000000", "lead=100000000"] });
  });
});
