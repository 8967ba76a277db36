import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { loadConfigText } from "../../src/config/load.js";
import { firstKeptRun, firstRunAfter } from "../../src/domain/leaderboards.js";
import { startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { commandsDuring } from "../helpers/monitor.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";

/**
 * keepFinishedRuns (src/jobs/run-retention.ts): a board with runs keeps its newest finished runs
 * and deletes the older ones, every shard's sets, every breakdown group's and the rank histories;
 * reads of a deleted run answer 404.
 */
let redis: Redis;
beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
});
afterAll(() => redis.disconnect());

function boardsYaml(tenantId: string): string {
  return tenantYaml(
    tenantId,
    `
    shards: 2
    attributes: { user: [plan] }
    metrics: [{ key: lessons, name: Lessons }]
    leaderboards:
      - { key: daily, name: Daily, rankBy: metric, metric: lessons, start: "2026-06-01", runUnit: day, runInterval: 1, keepFinishedRuns: 2 }
      - { key: daily-plan, name: Daily by plan, rankBy: metric, metric: lessons, start: "2026-06-01", runUnit: day, runInterval: 1, breakdownAttribute: plan, keepFinishedRuns: 1 }
      - { key: daily-all, name: Daily kept, rankBy: metric, metric: lessons, start: "2026-06-01", runUnit: day, runInterval: 1 }
`,
  );
}

/** The runs of `board` that still have keys, sorted, from every shard, group, group list and history. */
async function storedRuns(tenantId: string, board: string): Promise<number[]> {
  const runs = new Set<number>();
  for (const key of await redis.keys(`{${tenantId}:*}:l[bgh]:${board}:*`)) {
    const match = new RegExp(`\\}:l[bgh]:${board}:(\\d+)(:|$)`).exec(key);
    if (match) runs.add(Number(match[1]));
  }
  return [...runs].sort((a, b) => a - b);
}

describe("keepFinishedRuns", () => {
  it("deletes the runs before the newest kept finished ones, in every shard, group and history, and reads of them answer 404", async () => {
    const tenantId = uniqueTenantId("runs");
    const t: TestApp = await startTestApp({ yaml: boardsYaml(tenantId), manualClock: "2026-06-01T12:00:00Z" });
    try {
      const users = [
        { id: "ada", attributes: { plan: "pro" } },
        { id: "bob", attributes: { plan: "free" } },
        { id: "cy", attributes: { plan: "pro" } },
      ];
      const lessonsOn = async (day: string) => {
        await t.setClock(`2026-06-${day}T12:00:00Z`);
        for (const user of users) expect((await t.call("POST", "/v1/metrics/lessons/event", { user, value: 1 })).status).toBe(201);
      };
      await lessonsOn("01");
      // The run's counters, a tenant key: three entries added, and a fall (ada 1 -> 0).
      expect((await t.call("POST", "/v1/metrics/lessons/event", { user: users[0], value: -1 })).status).toBe(201);
      const counters = `{${tenantId}}:lbc:daily:0`;
      expect(await redis.hgetall(counters)).toEqual({ n: "3", f: "1" });
      for (const day of ["02", "03"]) await lessonsOn(day);
      // June 3: runs 0 and 1 are the two finished runs kept; each run holds entries in both shards and rank histories.
      expect(await storedRuns(tenantId, "daily")).toEqual([0, 1, 2]);
      expect(new Set((await redis.keys(`{${tenantId}:*}:lb:daily:0`)).map((k) => k.split("}")[0]))).toEqual(new Set([`{${tenantId}:0`, `{${tenantId}:1`]));
      expect((await redis.keys(`{${tenantId}:*}:lh:daily:0:*`)).length).toBe(3);
      await lessonsOn("04");
      expect(await storedRuns(tenantId, "daily")).toEqual([1, 2, 3]);
      expect(await redis.exists(counters)).toBe(0);

      // June 5: run 4 is active, run 3 the newest finished one.
      await t.setClock("2026-06-05T00:30:00Z");
      expect(await storedRuns(tenantId, "daily")).toEqual([2, 3]);
      expect(await storedRuns(tenantId, "daily-plan")).toEqual([3]);
      expect(await storedRuns(tenantId, "daily-all")).toEqual([0, 1, 2, 3]);

      const gone = await t.call("GET", "/v1/leaderboards/daily?run=2026-06-02");
      expect(gone).toEqual({ status: 404, body: { error: "The run of daily from 2026-06-02 is no longer kept (keepFinishedRuns: 2)" } });
      expect((await t.call("GET", "/v1/users/ada/leaderboards/daily?run=2026-06-01")).status).toBe(404);
      const kept = await t.call("GET", "/v1/leaderboards/daily?run=2026-06-03");
      expect(kept.status).toBe(200);
      expect(kept.body.rankings.map((r: { userId: string; value: number }) => r.value)).toEqual([1, 1, 1]);
      const group = await t.call("GET", "/v1/leaderboards/daily-plan?run=2026-06-04&userAttributes=plan:pro");
      expect(group.body.rankings.map((r: { userId: string }) => r.userId).sort()).toEqual(["ada", "cy"]);
      expect((await t.call("GET", "/v1/leaderboards/daily-plan?run=2026-06-03&userAttributes=plan:pro")).status).toBe(404);
      expect((await t.call("GET", "/v1/leaderboards/daily-all?run=2026-06-01")).status).toBe(200);

      // The next day deletes one more run; the run before stays deleted.
      await t.setClock("2026-06-06T00:30:00Z");
      expect(await storedRuns(tenantId, "daily")).toEqual([3]);
    } finally {
      await t.close();
    }
  });

  it("finds a breakdown board's groups in the run's lists, without scanning the keyspace", async () => {
    // Started before the boards' start: every run's groups are listed (run-groups-from is 0).
    const tenantId = uniqueTenantId("groups");
    const t: TestApp = await startTestApp({ yaml: boardsYaml(tenantId), manualClock: "2026-05-31T12:00:00Z" });
    try {
      expect(await redis.hget(`{${tenantId}}:run-groups-from`, "daily-plan")).toBe("0");
      const lesson = (id: string, plan: string) => t.call("POST", "/v1/metrics/lessons/event", { user: { id, attributes: { plan } }, value: 1 });
      for (const day of ["01", "02"]) {
        await t.setClock(`2026-06-${day}T12:00:00Z`);
        for (const [id, plan] of [["ada", "pro"], ["bob", "free"], ["cy", "team"]] as const) expect((await lesson(id, plan)).status).toBe(201);
      }
      // On 2 June ada moves to another plan: her entry of run 1 moves to that group, which is listed too.
      expect((await lesson("ada", "gold")).status).toBe(201);
      const listed = async (run: number) => (await redis.keys(`{${tenantId}:*}:lg:daily-plan:${run}`)).length;
      expect(await listed(1)).toBeGreaterThan(0);
      const groupsOfRun1 = new Set<string>();
      for (const key of await redis.keys(`{${tenantId}:*}:lg:daily-plan:1`)) for (const g of await redis.smembers(key)) groupsOfRun1.add(g);
      expect([...groupsOfRun1].sort()).toEqual(["free", "gold", "pro", "team"]);

      // 4 June: runs 0 and 1 go (keepFinishedRuns 1 keeps run 2), every group's set and the lists.
      const seen = await commandsDuring(inject("redisUrl"), () => t.setClock("2026-06-04T00:30:00Z"));
      expect(await storedRuns(tenantId, "daily-plan")).toEqual([]);
      expect(await storedRuns(tenantId, "daily")).toEqual([1]);
      expect(seen.commands.filter((c) => c[0]!.toLowerCase() === "scan" && c.some((a) => a.includes(tenantId)))).toEqual([]);
      expect(seen.commands.some((c) => c[0]!.toLowerCase() === "smembers" && c[1]!.includes(`${tenantId}:`))).toBe(true);
    } finally {
      await t.close();
    }
  });

  it("on a store without the group lists (an earlier version's), scans for the due runs and keeps the first kept run", async () => {
    const tenantId = uniqueTenantId("legacy");
    // Started before the boards' start: every run is listed until the mark goes below.
    const t: TestApp = await startTestApp({ yaml: boardsYaml(tenantId), manualClock: "2026-05-31T12:00:00Z" });
    try {
      for (const day of ["01", "02", "03"]) {
        await t.setClock(`2026-06-${day}T12:00:00Z`);
        for (const [id, plan] of [["ada", "pro"], ["bob", "free"]] as const) {
          expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id, attributes: { plan } }, value: 1 })).status).toBe(201);
        }
      }
      // 3 June: run 0 went (keepFinishedRuns 1 keeps run 1), found by the run's lists.
      expect(await storedRuns(tenantId, "daily-plan")).toEqual([1, 2]);
      // As a store no start of this version opened: no mark of the first listed run, so every
      // run is found by the SCAN pass, which must take only the runs before the first kept one.
      await redis.hdel(`{${tenantId}}:run-groups-from`, "daily-plan");
      // Nor the lists themselves: only the SCAN finds the groups' sets.
      const lists = await redis.keys(`{${tenantId}:*}:lg:daily-plan:*`);
      expect(lists.length).toBeGreaterThan(0);
      await redis.unlink(...lists);
      // 4 June: run 3 is active, and keepFinishedRuns 1 keeps run 2.
      await t.setClock("2026-06-04T00:30:00Z");
      expect(await storedRuns(tenantId, "daily-plan")).toEqual([2]);
      const kept = await t.call("GET", "/v1/leaderboards/daily-plan?run=2026-06-03&userAttributes=plan:pro");
      expect(kept.body.rankings.map((r: { userId: string }) => r.userId)).toEqual(["ada"]);
    } finally {
      await t.close();
    }
  });

  it("deletes the rank history of every participant of a run of more than one page (1 000 members)", async () => {
    const tenantId = uniqueTenantId("page");
    // One shard: the run's one set holds every participant, more than a page of them.
    const yaml = tenantYaml(
      tenantId,
      `
    shards: 1
    metrics: [{ key: lessons, name: Lessons }]
    leaderboards:
      - { key: daily, name: Daily, rankBy: metric, metric: lessons, start: "2026-06-01", runUnit: day, runInterval: 1, keepFinishedRuns: 1 }
`,
    );
    const t: TestApp = await startTestApp({ yaml, manualClock: "2026-06-01T12:00:00Z" });
    try {
      const users = Array.from({ length: 1001 }, (_, i) => `p-${i}`);
      for (let i = 0; i < users.length; i += 50) {
        const replies = await Promise.all(users.slice(i, i + 50).map((id) => t.call("POST", "/v1/metrics/lessons/event", { user: { id }, value: 1 })));
        for (const reply of replies) expect(reply.status).toBe(201);
      }
      expect((await redis.keys(`{${tenantId}:*}:lh:daily:0:*`)).length).toBe(users.length);
      // 3 June: run 1 is the finished run kept; run 0 goes, its set and all 1 001 histories.
      await t.setClock("2026-06-03T00:30:00Z");
      expect(await storedRuns(tenantId, "daily")).toEqual([]);
    } finally {
      await t.close();
    }
  });

  it("runs one scheduler per tenant with such a board, and removes it when no board keeps only some runs", async () => {
    const tenantId = uniqueTenantId("runs");
    const scheduler = `{laurel-jobs}:laurel-runs-${tenantId}:repeat`;
    await (await startTestApp({ yaml: boardsYaml(tenantId) })).close();
    expect(await redis.exists(scheduler)).toBe(1);
    // A scheduler left behind would make a job no process takes, tick after tick.
    await (await startTestApp({ yaml: boardsYaml(tenantId).replace(/, keepFinishedRuns: \d+/g, "") })).close();
    expect(await redis.exists(scheduler)).toBe(0);
  });

  it("is refused on a perpetual board, naming the field", () => {
    const text = tenantYaml(
      "runs",
      `    metrics: [{ key: lessons, name: Lessons }]\n    leaderboards:\n      - { key: all, name: All, rankBy: metric, metric: lessons, start: "2026-06-01", keepFinishedRuns: 3 }\n`,
    );
    expect(() => loadConfigText(text, "bad.yaml", {})).toThrow(/leaderboards\[0\]\.keepFinishedRuns.*perpetual/);
  });
});

/** A weekly board from Monday 1 June 2026, with `extra` fields. */
const weeklyBoard = (extra: string) =>
  loadConfigText(
    tenantYaml("runs", `    metrics: [{ key: lessons, name: Lessons }]\n    leaderboards:\n      - { key: weekly, name: Weekly, rankBy: metric, metric: lessons, start: "2026-06-01", runUnit: day, runInterval: 7${extra} }\n`),
    "t.yaml",
    {},
  )[0]!.leaderboards[0]!;
const at = (iso: string) => Date.parse(iso);

describe("firstKeptRun (the runs reads refuse and the job deletes)", () => {
  it("keeps every run without keepFinishedRuns, and everything before the start", () => {
    expect(firstKeptRun(weeklyBoard(""), at("2027-06-01T00:00:00Z"))).toBe(0);
    expect(firstKeptRun(weeklyBoard(", keepFinishedRuns: 1"), at("2026-05-01T00:00:00Z"))).toBe(0);
  });

  it("while active: the newest finished runs before the active one", () => {
    // 2026-06-29 is in run 4 (weeks from June 1): runs 2 and 3 are the two newest finished.
    expect(firstKeptRun(weeklyBoard(", keepFinishedRuns: 2"), at("2026-06-29T10:00:00Z"))).toBe(2);
    expect(firstKeptRun(weeklyBoard(", keepFinishedRuns: 9"), at("2026-06-29T10:00:00Z"))).toBe(0);
  });

  it("once the board has ended: the newest finished runs up to its last", () => {
    // Ends on July 6: its last run is run 4 (June 29 - July 5).
    expect(firstKeptRun(weeklyBoard(', end: "2026-07-06", keepFinishedRuns: 2'), at("2027-01-01T00:00:00Z"))).toBe(3);
  });
});

describe("firstRunAfter (the first run whose breakdown groups are listed in full)", () => {
  it("is 0 before the start, the run after the one under way, and one past the last once ended", () => {
    expect(firstRunAfter(weeklyBoard(""), at("2026-05-31T23:59:59Z"))).toBe(0);
    expect(firstRunAfter(weeklyBoard(""), at("2026-06-01T00:00:00Z"))).toBe(1);
    expect(firstRunAfter(weeklyBoard(""), at("2026-06-29T10:00:00Z"))).toBe(5);
    expect(firstRunAfter(weeklyBoard(', end: "2026-07-06"'), at("2027-01-01T00:00:00Z"))).toBe(5);
  });
});
