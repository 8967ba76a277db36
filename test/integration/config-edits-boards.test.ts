import { describe, expect, it } from "vitest";
import { uniqueTenantId, withTestApp, type TestApp } from "../helpers/app.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";

/**
 * Leaderboards edited in the tenant file between two starts (same tenant id, same Redis): what
 * the boards' stored runs and the users' entries become (config-edits.test.ts holds the other
 * edits; a board's `start`, `runUnit`, `runInterval`, what it ranks and its breakdown are fixed
 * once it has data: startup.test.ts).
 */

const lessons = (t: TestApp, id: string, value: number) => t.call("POST", "/v1/metrics/lessons/event", { user: { id }, value });
const boardTenant = (tenantId: string, board: string) =>
  tenantYaml(tenantId, `\n    metrics: [{ key: lessons, name: Lessons }]\n    leaderboards:\n      - ${board}\n`);
const page = async (t: TestApp, path: string) => {
  const res = await t.call("GET", path);
  return { status: res.status, listed: (res.body.rankings ?? []).map((r: { userId: string; value: number; rank: number }) => `${r.userId}:${r.value}:${r.rank}`), board: res.body };
};

describe("maxParticipants lowered, then raised", () => {
  const tenantId = uniqueTenantId();
  const yaml = (max: number) => boardTenant(tenantId, `{ key: all, name: All, rankBy: metric, metric: lessons, start: "2026-01-01", maxParticipants: ${max} }`);

  it("ranks the stored entries by the new size: the users past it are off the board with their values kept, and back on when it grows", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: yaml(3) }, async (t) => {
      for (const [id, value] of [["a", 4], ["b", 3], ["c", 2], ["d", 1]] as const) expect((await lessons(t, id, value)).status).toBe(201);
      expect((await page(t, "/v1/leaderboards/all")).listed).toEqual(["a:4:1", "b:3:2", "c:2:3"]);
    });
    await withTestApp({ manualClock: "2026-06-01T13:00:00Z", jobs: false, yaml: yaml(2) }, async (t) => {
      expect((await page(t, "/v1/leaderboards/all")).listed).toEqual(["a:4:1", "b:3:2"]);
      expect((await t.call("GET", "/v1/users/c/leaderboards/all")).body).toMatchObject({ rank: null, value: null });
      // c climbs to 3: ties b, reached later, so behind it: off the board of 2 (must beat the threshold).
      expect((await lessons(t, "c", 1)).body.leaderboards.all).toMatchObject({ rank: null, threshold: 3 });
      // d climbs past everyone: first, and b falls off.
      expect((await lessons(t, "d", 4)).body.leaderboards.all).toMatchObject({ rank: 1 });
      expect((await page(t, "/v1/leaderboards/all")).listed).toEqual(["d:5:1", "a:4:2"]);
    });
    await withTestApp({ manualClock: "2026-06-01T14:00:00Z", jobs: false, yaml: yaml(10) }, async (t) => {
      expect((await page(t, "/v1/leaderboards/all")).listed).toEqual(["d:5:1", "a:4:2", "b:3:3", "c:3:3"]);
      expect((await t.call("GET", "/v1/users/c/leaderboards/all")).body).toMatchObject({ rank: 3, value: 3 });
    });
  });
});

describe("a board's end moved before now, then later again", () => {
  const tenantId = uniqueTenantId();
  const yaml = (end: string) => boardTenant(tenantId, `{ key: daily, name: Daily, rankBy: metric, metric: lessons, start: "2026-06-01", runUnit: day, runInterval: 1${end} }`);

  it("finishes the board at once; the runs after the new end are not served until it moves back", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: yaml("") }, async (t) => {
      for (const day of ["01", "02", "03"]) {
        await t.setClock(`2026-06-${day}T12:00:00Z`);
        expect((await lessons(t, "u", Number(day))).status).toBe(201);
      }
    });
    await withTestApp({ manualClock: "2026-06-03T13:00:00Z", jobs: false, yaml: yaml(', end: "2026-06-02"') }, async (t) => {
      const last = await page(t, "/v1/leaderboards/daily");
      expect(last.board).toMatchObject({ status: "finished", run: "2026-06-01" });
      expect(last.listed).toEqual(["u:1:1"]);
      expect((await t.call("GET", "/v1/leaderboards/daily?run=2026-06-03")).status).toBe(422);
      // Finished: an event moves no board.
      expect((await lessons(t, "u", 10)).body.leaderboards).toEqual({});
    });
    await withTestApp({ manualClock: "2026-06-03T14:00:00Z", jobs: false, yaml: yaml("") }, async (t) => {
      // The runs kept their entries; the event sent while the board was finished counted on none.
      expect((await page(t, "/v1/leaderboards/daily?run=2026-06-02")).listed).toEqual(["u:2:1"]);
      expect((await page(t, "/v1/leaderboards/daily")).listed).toEqual(["u:3:1"]);
      expect((await lessons(t, "u", 1)).body.leaderboards.daily).toMatchObject({ rank: 1 });
      expect((await page(t, "/v1/leaderboards/daily")).listed).toEqual(["u:4:1"]);
    });
  });
});

describe("keepFinishedRuns raised, or removed, after runs were deleted", () => {
  const tenantId = uniqueTenantId();
  const yaml = (keep: string) => boardTenant(tenantId, `{ key: daily, name: Daily, rankBy: metric, metric: lessons, start: "2026-06-01", runUnit: day, runInterval: 1${keep} }`);

  it("answers 404 for the runs deleted, and keeps the runs still stored from then on", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", yaml: yaml(", keepFinishedRuns: 1") }, async (t) => {
      for (const day of ["01", "02", "03", "04"]) {
        await t.setClock(`2026-06-${day}T12:00:00Z`);
        expect((await lessons(t, "u", Number(day))).status).toBe(201);
      }
      // 4 June: run 2 (3 June) is the one finished run kept; runs 0 and 1 are deleted.
      expect((await t.call("GET", "/v1/leaderboards/daily?run=2026-06-02")).status).toBe(404);
    });
    for (const keep of [", keepFinishedRuns: 10", ""]) {
      await withTestApp({ manualClock: "2026-06-04T13:00:00Z", yaml: yaml(keep) }, async (t) => {
        // Deleted: not an empty run (nobody took part), a run no longer kept.
        const gone = await t.call("GET", "/v1/leaderboards/daily?run=2026-06-02");
        expect(gone).toEqual({ status: 404, body: { error: "The run of daily from 2026-06-02 is no longer kept (deleted under an earlier keepFinishedRuns)" } });
        expect((await t.call("GET", "/v1/users/u/leaderboards/daily?run=2026-06-01")).status).toBe(404);
        expect((await page(t, "/v1/leaderboards/daily?run=2026-06-03")).listed).toEqual(["u:3:1"]);
      });
    }
    // Kept from then on: the next day deletes nothing more.
    await withTestApp({ manualClock: "2026-06-04T14:00:00Z", yaml: yaml(", keepFinishedRuns: 10") }, async (t) => {
      await t.setClock("2026-06-06T12:00:00Z");
      expect((await page(t, "/v1/leaderboards/daily?run=2026-06-03")).listed).toEqual(["u:3:1"]);
      expect((await page(t, "/v1/leaderboards/daily?run=2026-06-04")).listed).toEqual(["u:4:1"]);
    });
  });
});

describe("a board removed from the tenant file and added back", () => {
  const tenantId = uniqueTenantId();
  const board = (start: string) => `{ key: all, name: All, rankBy: metric, metric: lessons, start: "${start}" }`;

  it("keeps its entries and its schedule; the changes made while it was out are not on it", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", jobs: false, yaml: boardTenant(tenantId, board("2026-01-01")) }, async (t) => {
      expect((await lessons(t, "u", 3)).status).toBe(201);
    });
    await withTestApp({ manualClock: "2026-06-01T13:00:00Z", jobs: false, yaml: tenantYaml(tenantId, `\n    metrics: [{ key: lessons, name: Lessons }]\n`) }, async (t) => {
      expect((await lessons(t, "u", 2)).status).toBe(201);
    });
    // Back with another start: the stored run would be read on another schedule, so refused.
    await expect(withTestApp({ manualClock: "2026-06-01T14:00:00Z", jobs: false, yaml: boardTenant(tenantId, board("2026-05-01")) }, async () => {})).rejects.toThrow(
      /leaderboards\[0\]: is "metric lessons, from 2026-05-01, one run, no breakdown", but tenant .* has data stored with "metric lessons, from 2026-01-01/,
    );
    await withTestApp({ manualClock: "2026-06-01T14:00:00Z", jobs: false, yaml: boardTenant(tenantId, board("2026-01-01")) }, async (t) => {
      expect((await page(t, "/v1/leaderboards/all")).listed).toEqual(["u:3:1"]);
      expect((await lessons(t, "u", 1)).status).toBe(201);
      expect((await page(t, "/v1/leaderboards/all")).listed).toEqual(["u:4:1"]);
    });
  });
});
