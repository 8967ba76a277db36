import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";
import { seriesBuckets, seriesLayout, toPreviousLayout } from "../helpers/buckets.js";
import { dailySeries, expectedSummary, type LoggedChange } from "../helpers/summary-oracle.js";
import { bucketWorker } from "../helpers/worker.js";

/**
 * The event summaries (trophy-compat §2.2 #12, #16) after events driven through the manual
 * clock across days, ISO weeks, months, the Europe/London DST change of 29 March 2026 and two
 * zone changes (one moving the calendar back), checked against an independent oracle: luxon's
 * calendar over the totals the event responses reported. Three users get the same events: ada's
 * applied one batch per event, bo's in one batch, cy's one batch per event with every series
 * rewritten in the layout of the versions before the open day after each batch (every day in the
 * month members, no open day), so each batch migrates them again.
 */
const tenantId = uniqueTenantId("sum");
const YAML = tenantYaml(
  tenantId,
  `
    metrics:
      - { key: lessons, name: Lessons }
      - { key: api-calls, name: API calls }
    points:
      - key: xp
        name: XP
        triggers: [{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 10 }]
      - key: energy
        name: Energy
        maxPoints: 100
        triggers:
          - { key: welcome, type: user_creation, points: 100 }
          - { key: per-call, type: metric, metric: api-calls, threshold: 1, points: -1 }
    streak: { frequency: daily, metrics: [{ metric: lessons, threshold: 1 }] }
`,
);

let t: TestApp;
const logs = new Map<string, LoggedChange[]>();

function log(series: string, entry: LoggedChange): void {
  logs.set(series, [...(logs.get(series) ?? []), entry]);
}

type Sent = [at: string, tz: string, metric: string, value: number, sendTz?: boolean];

/** Sends one event and records, per series, what the response says changed (ada's only). */
async function send(user: string, [at, tz, metric, value, sendTz = true]: Sent): Promise<void> {
  await t.setClock(at);
  const res = await t.call("POST", `/v1/metrics/${metric}/event`, { user: sendTz ? { id: user, tz } : { id: user }, value });
  expect(res.status).toBe(201);
  if (user !== "ada") return;
  const ms = Date.parse(at);
  log(`m:${metric}`, { ms, tz, change: value, total: res.body.total });
  for (const [sys, p] of Object.entries(res.body.points as Record<string, { added: number; total: number }>)) log(`p:${sys}`, { ms, tz, change: p.added, total: p.total });
}

const summary = (kind: "metrics" | "points", key: string, query: string, user = "ada") => t.call("GET", `/v1/users/${user}/${kind}/${key}/event-summary?${query}`);

const London = "Europe/London";
const EVENTS: Sent[] = [
  ["2026-03-27T10:00:00Z", London, "lessons", 1],
  ["2026-03-27T11:00:00Z", London, "api-calls", 0.5],
  ["2026-03-28T23:30:00Z", London, "lessons", 2], // 23:30 GMT, Saturday 28
  ["2026-03-29T00:30:00Z", London, "lessons", 1], // 00:30 GMT, Sunday 29 (BST from 01:00Z)
  ["2026-03-29T23:30:00Z", London, "lessons", 3], // 00:30 BST, Monday 30: local day ≠ UTC day
  ["2026-03-29T23:40:00Z", London, "api-calls", 2.25, false],
  ["2026-03-31T12:00:00Z", London, "lessons", -1],
  ["2026-04-01T10:00:00Z", "Asia/Tokyo", "lessons", 1], // 19:00 in Tokyo, 1 April
  ["2026-04-01T20:00:00Z", "Asia/Tokyo", "lessons", 1, false], // 05:00, 2 April
  // To Los Angeles: 19:00 on 1 April there, a calendar behind the last bucket (2 April).
  ["2026-04-02T02:00:00Z", "America/Los_Angeles", "lessons", 1],
  ["2026-04-30T12:00:00Z", "America/Los_Angeles", "api-calls", 1, false],
  ["2026-05-01T06:59:00Z", "America/Los_Angeles", "lessons", 1, false], // 23:59, 30 April
  ["2026-05-01T07:00:00Z", "America/Los_Angeles", "lessons", 1, false], // 00:00, 1 May
];

beforeAll(async () => {
  t = await startTestApp({ yaml: YAML, manualClock: "2026-03-01T00:00:00Z" });
  const worker = bucketWorker(t);
  // ada's records are applied one batch per event: each batch reads the open month back.
  for (const e of EVENTS) {
    await send("ada", e);
    await worker.drain();
  }
  // bo gets the same events (the clock set back to each instant) applied in ONE batch.
  for (const e of EVENTS) await send("bo", e);
  await worker.drain();
  // cy's series are left after each batch as a worker before the open day would have left them.
  for (const e of EVENTS) {
    await send("cy", e);
    await worker.drain();
    for (const series of SERIES) await toPreviousLayout(t.redis, tenantId, t.tenants[0]!.shards, series, "cy");
  }
});

const SERIES = ["m:lessons", "m:api-calls", "p:xp", "p:energy"];
afterAll(async () => t.close());

describe("GET /v1/users/{id}/metrics/{key}/event-summary", () => {
  it("daily: one item per local day, by hand", async () => {
    const res = await summary("metrics", "lessons", "aggregation=daily&startDate=2026-03-26&endDate=2026-04-03");
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      { date: "2026-03-26", total: 0, change: 0 },
      { date: "2026-03-27", total: 1, change: 1 },
      { date: "2026-03-28", total: 3, change: 2 },
      { date: "2026-03-29", total: 4, change: 1 },
      { date: "2026-03-30", total: 7, change: 3 },
      { date: "2026-03-31", total: 6, change: -1 },
      { date: "2026-04-01", total: 7, change: 1 },
      // 20:00Z in Tokyo (2 April) and then 02:00Z in Los Angeles (still 1 April there): the
      // calendar moved back, so the second event counts in the latest day, 2 April.
      { date: "2026-04-02", total: 9, change: 2 },
      { date: "2026-04-03", total: 9, change: 0 },
    ]);
  });

  it("agrees with the oracle for every aggregation, series and range", async () => {
    const cases: [string, string, string][] = [
      ["daily", "2026-03-20", "2026-05-03"],
      ["weekly", "2026-03-25", "2026-05-02"],
      ["weekly", "2026-03-23", "2026-03-29"],
      ["monthly", "2026-01-15", "2026-05-31"],
      ["monthly", "2026-04-30", "2026-05-01"],
    ];
    for (const [series, kind, key] of [
      ["m:lessons", "metrics", "lessons"],
      ["m:api-calls", "metrics", "api-calls"],
      ["p:xp", "points", "xp"],
      ["p:energy", "points", "energy"],
    ] as const) {
      const daily = dailySeries(logs.get(series)!);
      for (const [aggregation, from, to] of cases) {
        for (const user of ["ada", "bo", "cy"]) {
          const res = await summary(kind, key, `aggregation=${aggregation}&startDate=${from}&endDate=${to}`, user);
          expect(res.status).toBe(200);
          expect(res.body, `${user} ${series} ${aggregation} ${from}..${to}`).toEqual(expectedSummary(daily, aggregation as "daily", from, to));
        }
      }
    }
  });

  it("the same buckets whether applied one batch per event, in one batch, or migrating from the previous layout at every batch", async () => {
    for (const series of SERIES) {
      const ada = await seriesBuckets(t.redis, tenantId, t.tenants[0]!.shards, series, "ada");
      expect(ada.length).toBeGreaterThan(1);
      expect(await seriesBuckets(t.redis, tenantId, t.tenants[0]!.shards, series, "bo"), series).toEqual(ada);
      expect(await seriesBuckets(t.redis, tenantId, t.tenants[0]!.shards, series, "cy"), series).toEqual(ada);
      // ada's latest day is the open day; cy's is still in the zset (the previous layout).
      const { open, months } = await seriesLayout(t.redis, tenantId, t.tenants[0]!.shards, series, "ada");
      expect(open!.open).toEqual(ada.at(-1)!);
      expect(months.flatMap(([, member]) => member.split(";")).length + open!.closed.length).toBe(ada.length - 1);
      expect((await seriesLayout(t.redis, tenantId, t.tenants[0]!.shards, series, "cy")).open).toBeNull();
    }
  });

  it("weekly buckets are ISO weeks labelled by their Monday, clipped to the range", async () => {
    const res = await summary("metrics", "lessons", "aggregation=weekly&startDate=2026-03-25&endDate=2026-04-07");
    expect(res.body).toEqual([
      { date: "2026-03-23", total: 4, change: 4 }, // 25-29 March
      { date: "2026-03-30", total: 9, change: 5 },
      { date: "2026-04-06", total: 9, change: 0 }, // 6-7 April
    ]);
  });

  it("monthly buckets cross the month at local midnight in the user's zone", async () => {
    const res = await summary("metrics", "lessons", "aggregation=monthly&startDate=2026-03-01&endDate=2026-05-31");
    expect(res.body).toEqual([
      { date: "2026-03-01", total: 6, change: 6 },
      { date: "2026-04-01", total: 10, change: 4 },
      { date: "2026-05-01", total: 11, change: 1 },
    ]);
  });

  it("keeps decimal values exact in output units", async () => {
    const res = await summary("metrics", "api-calls", "aggregation=daily&startDate=2026-03-27&endDate=2026-03-30");
    expect(res.body.map((i: { total: number }) => i.total)).toEqual([0.5, 0.5, 0.5, 2.75]);
  });

  it("accepts start_date/end_date and a one-day range", async () => {
    const res = await summary("metrics", "lessons", "aggregation=daily&start_date=2026-03-30&end_date=2026-03-30");
    expect(res.body).toEqual([{ date: "2026-03-30", total: 7, change: 3 }]);
  });

  it("points: totals as the event responses reported them (high-water triggers, the cap)", async () => {
    const xp = await summary("points", "xp", "aggregation=daily&startDate=2026-03-27&endDate=2026-04-02");
    expect(xp.body.map((i: { total: number }) => i.total)).toEqual([10, 30, 40, 70, 70, 70, 90]);
    const energy = await summary("points", "energy", "aggregation=monthly&startDate=2026-03-01&endDate=2026-04-30");
    expect(energy.body).toEqual([
      { date: "2026-03-01", total: 98, change: 98 }, // 100 on creation, -2 for 2.75 calls
      { date: "2026-04-01", total: 97, change: -1 },
    ]);
  });
});

describe("event summary errors", () => {
  const cases: [string, string, number][] = [
    ["metrics/lessons", "startDate=2026-03-01&endDate=2026-03-02", 400], // aggregation missing
    ["metrics/lessons", "aggregation=hourly&startDate=2026-03-01&endDate=2026-03-02", 422],
    ["metrics/lessons", "aggregation=daily&endDate=2026-03-02", 400],
    ["metrics/lessons", "aggregation=daily&startDate=2026-02-30&endDate=2026-03-02", 400],
    ["metrics/lessons", "aggregation=daily&startDate=2026-3-1&endDate=2026-03-02", 400],
    ["metrics/lessons", "aggregation=daily&startDate=2026-03-02&endDate=2026-03-01", 422],
    ["metrics/lessons", "aggregation=daily&startDate=2025-01-01&endDate=2026-02-06", 422], // 401 days apart
    // Before year 1: the ISO week of 0000-01-01 (a Saturday) began in year -1, which a
    // YYYY-MM-DD date cannot write (it was dated "-000001-12").
    ["metrics/lessons", "aggregation=weekly&startDate=0000-01-01&endDate=0000-01-03", 422],
    ["points/xp", "aggregation=daily&startDate=0000-12-31&endDate=0001-01-01", 422],
    ["metrics/nope", "aggregation=daily&startDate=2026-03-01&endDate=2026-03-02", 404],
    ["points/nope", "aggregation=daily&startDate=2026-03-01&endDate=2026-03-02", 404],
  ];
  it.each(cases)("%s?%s → %i", async (path, query, status) => {
    const res = await t.call("GET", `/v1/users/ada/${path}/event-summary?${query}`);
    expect(res.status).toBe(status);
    expect(res.body).toEqual({ error: expect.any(String) });
  });

  it("the first and last days YYYY-MM-DD writes are accepted, each period dated inside them", async () => {
    const first = await summary("metrics", "lessons", "aggregation=weekly&startDate=0001-01-01&endDate=0001-01-08");
    expect(first).toEqual({ status: 200, body: [{ date: "0001-01-01", total: 0, change: 0 }, { date: "0001-01-08", total: 0, change: 0 }] });
    const last = await summary("points", "xp", "aggregation=monthly&startDate=9999-12-31&endDate=9999-12-31");
    expect(last.status).toBe(200);
    expect(last.body.map((i: { date: string }) => i.date)).toEqual(["9999-12-01"]);
  });

  it("a range of exactly 400 days is accepted and has 401 daily items", async () => {
    const res = await summary("metrics", "lessons", "aggregation=daily&startDate=2025-01-01&endDate=2026-02-05");
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(401);
  });

  it("unknown user → 404 User not found; wrong key → 401", async () => {
    const res = await t.call("GET", "/v1/users/nobody/metrics/lessons/event-summary?aggregation=daily&startDate=2026-03-01&endDate=2026-03-02");
    expect(res).toEqual({ status: 404, body: { error: "User not found: nobody" } });
    const unauthorized = await t.call("GET", "/v1/users/ada/metrics/lessons/event-summary?aggregation=daily&startDate=2026-03-01&endDate=2026-03-02", undefined, { "x-api-key": "wrong" });
    expect(unauthorized.status).toBe(401);
  });
});
