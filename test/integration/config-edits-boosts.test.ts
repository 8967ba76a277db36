import { describe, expect, it } from "vitest";
import { uniqueTenantId, withTestApp, type TestApp } from "../helpers/app.js";
import { xpSystemTenantYaml } from "../helpers/tenant-yaml.js";

/**
 * Global boosts (a points system's `boosts`) edited in the tenant file between two starts, and
 * user boosts across an edit of their system (config-edits.test.ts holds the other edits). A
 * boost multiplies the points earned while it is active, by the config of the process that pays
 * them: an edit boosts from its start on, and what was paid before stays as it was paid.
 */

const lesson = (t: TestApp, id = "u") => t.call("POST", "/v1/metrics/lessons/event", { user: { id }, value: 1 });
const xpTenant = (tenantId: string, boosts: string) =>
  xpSystemTenantYaml(tenantId, "{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 10 }", `        boosts: [${boosts}]\n`);
const boost = (multiplier: number, start: string, end: string | null, key = "double") =>
  `{ key: ${key}, name: Boost, multiplier: ${multiplier}, start: "${start}"${end === null ? "" : `, end: "${end}"`} }`;

describe("a global boost edited while it runs", () => {
  const tenantId = uniqueTenantId();
  const yaml = (boosts: string) => xpTenant(tenantId, boosts);
  const listed = async (t: TestApp) => (await t.call("GET", "/v1/points/xp/boosts?includeFinished=true")).body.map((b: { key: string; status: string; multiplier: number }) => `${b.key}:${b.status}:${b.multiplier}`);

  it("boosts by the tenant file of each start from that start on, and never pays again for what was paid", async () => {
    const at = (hour: string) => `2026-06-05T${hour}:00:00Z`;
    await withTestApp({ manualClock: at("10"), jobs: false, yaml: yaml(boost(2, "2026-06-01", "2026-06-10")) }, async (t) => {
      expect((await lesson(t)).body.points.xp).toMatchObject({ added: 20, total: 20 });
    });
    // Multiplier changed mid-boost: the next lesson pays by 3, the first stays paid by 2.
    await withTestApp({ manualClock: at("11"), jobs: false, yaml: yaml(boost(3, "2026-06-01", "2026-06-10")) }, async (t) => {
      expect(await listed(t)).toEqual(["double:active:3"]);
      expect((await lesson(t)).body.points.xp).toMatchObject({ added: 30, total: 50 });
    });
    // End moved before now: finished at once.
    await withTestApp({ manualClock: at("12"), jobs: false, yaml: yaml(boost(3, "2026-06-01", at("11"))) }, async (t) => {
      expect(await listed(t)).toEqual(["double:finished:3"]);
      expect((await lesson(t)).body.points.xp).toMatchObject({ added: 10, total: 60 });
    });
    // End moved later again: active again from this start (the lesson unboosted at 12:00 stays so).
    await withTestApp({ manualClock: at("13"), jobs: false, yaml: yaml(boost(3, "2026-06-01", "2026-06-20")) }, async (t) => {
      expect(await listed(t)).toEqual(["double:active:3"]);
      expect((await lesson(t)).body.points.xp).toMatchObject({ added: 30, total: 90 });
    });
    // Removed: no boost; a boost added with its start in the past boosts from this start only.
    await withTestApp({ manualClock: at("14"), jobs: false, yaml: yaml("") }, async (t) => {
      expect(await listed(t)).toEqual([]);
      expect((await lesson(t)).body.points.xp).toMatchObject({ added: 10, total: 100 });
    });
    await withTestApp({ manualClock: at("15"), jobs: false, yaml: yaml(boost(2, "2026-05-01", null, "since-may")) }, async (t) => {
      expect(await listed(t)).toEqual(["since-may:active:2"]);
      expect((await lesson(t)).body.points.xp).toMatchObject({ added: 20, total: 120 });
      expect((await t.call("GET", "/v1/users/u/points/xp?awards=10")).body.total).toBe(120);
    });
  });
});

describe("a global boost added with its start in the past, over a time trigger's intervals not paid yet", () => {
  const tenantId = uniqueTenantId();
  const yaml = (boosts: string) => xpSystemTenantYaml(tenantId, "{ key: daily, type: time, unit: day, interval: 1, points: 5 }", `        boosts: [${boosts}]\n`);

  it("boosts the intervals due inside its window, paid after the start that added it (none was paid before)", async () => {
    await withTestApp({ manualClock: "2026-06-01T12:00:00Z", yaml: yaml("") }, async (t) => {
      expect((await t.call("POST", "/v1/users", { id: "u" })).status).toBe(201);
    });
    // Down from 1 June to 4 June 13:00; the boost starts 3 June. Due 2, 3 and 4 June at 12:00.
    await withTestApp({ manualClock: "2026-06-04T13:00:00Z", yaml: yaml(boost(2, "2026-06-03", null)) }, async (t) => {
      await t.setClock("2026-06-04T13:00:01Z");
      expect((await t.call("GET", "/v1/users/u/points/xp")).body.total).toBe(5 + 10 + 10);
    });
  });
});
