import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { allBuckets, applyChange, encodeMonth, summarise, type SeriesStore } from "../../src/domain/buckets.js";
import { fromMicro, toMicro } from "../../src/domain/decimal.js";
import { formatDay, periodOfDay, type Frequency } from "../../src/domain/periods.js";
import { wrappedPeriods } from "../../src/domain/wrapped.js";
import { startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { bucket, day, openDayLayout, previousLayout, rewriteLayout, seriesBuckets, seriesLayout, seriesStore } from "../helpers/buckets.js";
import { lessonsXpTenantYaml } from "../helpers/tenant-yaml.js";
import { bucketWorker } from "../helpers/worker.js";

/**
 * The open month (src/domain/buckets.ts): a series' closed days of the current month kept beside
 * its open day in {t:s}:bl, the month member written when the month changes. Users with events
 * on several days of one month, then of the next ones, read back through the endpoints that read
 * the buckets (event summaries, wrapped) and compared with the reference model
 * (src/domain/buckets.ts applyChange over the changes the event responses reported). The same
 * events are applied one batch per event (ada), in one batch (bo), and one batch per event with
 * every series rewritten after each batch as an earlier version's worker would have left it: the
 * open day alone in a 28-byte value, the month's closed days in its member (leo, the version
 * before the open month), or no field at all, every day in the members (nox, the version before
 * the open day). Each batch then migrates them again.
 */
const tenantId = uniqueTenantId("om");
const YAML = lessonsXpTenantYaml(tenantId);
const SERIES = ["m:lessons", "p:xp"] as const;
const USERS = ["ada", "bo", "leo", "nox"] as const;

// Several days of June (two events on the 3rd, the 30th late), July's first days, then September
// (August skipped): the days of a month stay in the open month until a later month opens.
const EVENTS: [at: string, value: number][] = [
  ["2026-06-03T10:00:00Z", 1],
  ["2026-06-03T11:00:00Z", 2],
  ["2026-06-05T09:00:00Z", 1],
  ["2026-06-17T09:00:00Z", 0.5],
  ["2026-06-30T23:00:00Z", 1],
  ["2026-07-01T00:30:00Z", 2],
  ["2026-07-02T08:00:00Z", 1],
  ["2026-07-15T08:00:00Z", -1],
  ["2026-09-01T08:00:00Z", 3],
  ["2026-09-02T08:00:00Z", 1],
];

let t: TestApp;
const shards = () => t.tenants[0]!.shards;
const M = 1_000_000;
/** The reference model's series, fed with what the event responses (ada's) reported. */
const model = new Map<string, SeriesStore>(SERIES.map((s) => [s, { months: new Map(), open: null }]));

async function send(user: string, [at, value]: [string, number]): Promise<void> {
  await t.setClock(at);
  const res = await t.call("POST", "/v1/metrics/lessons/event", { user: { id: user, tz: "UTC" }, value });
  expect(res.status).toBe(201);
  if (user !== "ada") return;
  const d = Math.floor(Date.parse(at) / 86_400_000);
  const month = periodOfDay(d, "monthly");
  applyChange(model.get("m:lessons")!, d, month, toMicro(value), toMicro(res.body.total));
  const xp = res.body.points.xp as { added: number; total: number } | undefined;
  if (xp) applyChange(model.get("p:xp")!, d, month, xp.added, xp.total);
}

beforeAll(async () => {
  t = await startTestApp({ yaml: YAML, manualClock: "2026-06-01T00:00:00Z" });
});
afterAll(async () => t.close());

/** What an event summary must answer, from the model's buckets (amounts on the wire). */
function expectedSummary(series: string, aggregation: Frequency, from: string, to: string) {
  const days = allBuckets(model.get(series)!);
  const [a, b] = [day(from), day(to)];
  const before = days.filter((d) => d.day < a).at(-1) ?? null;
  const wire = series.startsWith("m:") ? fromMicro : (n: number) => n;
  return summarise(before, days.filter((d) => d.day >= a && d.day <= b), a, b, aggregation).map((i) => ({ ...i, total: wire(i.total), change: wire(i.change) }));
}

describe("the open month", () => {
  beforeAll(async () => {
    const worker = bucketWorker(t);
    for (const e of EVENTS) {
      await send("ada", e);
      await worker.drain();
      // The exact layout the model keeps, after every batch.
      for (const series of SERIES) expect(await seriesStore(t.redis, tenantId, shards(), series, "ada"), `${series} after ${e[0]}`).toEqual(model.get(series));
    }
    for (const e of EVENTS) await send("bo", e);
    await worker.drain();
    for (const [user, layout] of [["leo", openDayLayout], ["nox", previousLayout]] as const) {
      for (const e of EVENTS) {
        await send(user, e);
        await worker.drain();
        for (const series of SERIES) await rewriteLayout(t.redis, tenantId, shards(), series, user, layout);
      }
    }
  });

  it("ada's layout: June's days in the member, September's first days in the open month (closed beside the open day)", async () => {
    const june = periodOfDay(day("2026-06-01"), "monthly");
    const layout = await seriesLayout(t.redis, tenantId, shards(), "m:lessons", "ada");
    expect(layout.months).toEqual([
      [june, encodeMonth([bucket("2026-06-03", 2, 3 * M, 3 * M), bucket("2026-06-05", 1, M, 4 * M), bucket("2026-06-17", 1, M / 2, 4.5 * M), bucket("2026-06-30", 1, M, 5.5 * M)])],
      [june + 1, encodeMonth([bucket("2026-07-01", 1, 2 * M, 7.5 * M), bucket("2026-07-02", 1, M, 8.5 * M), bucket("2026-07-15", 1, -M, 7.5 * M)])],
    ]);
    expect(layout.open).toEqual({ month: june + 3, closed: [bucket("2026-09-01", 1, 3 * M, 10.5 * M)], open: bucket("2026-09-02", 1, M, 11.5 * M) });
  });

  it("the same buckets whatever the batches and whatever layout each batch started from", async () => {
    for (const series of SERIES) {
      const expected = allBuckets(model.get(series)!);
      expect(expected.length).toBeGreaterThan(5);
      for (const user of USERS) expect(await seriesBuckets(t.redis, tenantId, shards(), series, user), `${user} ${series}`).toEqual(expected);
      expect(await seriesStore(t.redis, tenantId, shards(), series, "bo"), series).toEqual(model.get(series));
    }
  });

  it("event summaries (daily, weekly, monthly) equal the model's for every user", async () => {
    const cases: [Frequency, string, string][] = [
      ["daily", "2026-05-30", "2026-09-05"],
      ["daily", "2026-06-04", "2026-06-29"], // inside the member of a closed month
      ["daily", "2026-09-02", "2026-09-02"], // the open day alone
      ["daily", "2026-08-01", "2026-09-01"], // a month with no member, then a closed day of the open month
      ["weekly", "2026-06-01", "2026-09-06"],
      ["monthly", "2026-05-01", "2026-10-31"],
      ["monthly", "2026-10-01", "2026-10-31"], // after the open month: its total carries over
    ];
    for (const [series, path] of [["m:lessons", "metrics/lessons"], ["p:xp", "points/xp"]] as const) {
      for (const [aggregation, from, to] of cases) {
        const expected = expectedSummary(series, aggregation, from, to);
        for (const user of USERS) {
          const res = await t.call("GET", `/v1/users/${user}/${path}/event-summary?aggregation=${aggregation}&startDate=${from}&endDate=${to}`);
          expect(res.status).toBe(200);
          expect(res.body, `${user} ${series} ${aggregation} ${from}..${to}`).toEqual(expected);
        }
      }
    }
  });

  it("wrapped reads the same year for every user, and its activity is the model's", async () => {
    const bodies = await Promise.all(USERS.map(async (user) => (await t.call("GET", `/v1/users/${user}/wrapped?year=2026`)).body));
    const periods = wrappedPeriods(2026, [allBuckets(model.get("m:lessons")!)]);
    expect(periods.monthsActive).toBe(3);
    expect(bodies[0].activity).toMatchObject({ daysActive: periods.daysActive, monthsActive: 3, mostActiveDay: { date: formatDay(periods.mostActiveDay.from) } });
    expect(bodies[0].activity.entireYear.metrics.lessons).toMatchObject({ currentTotal: 11.5, changeThisPeriod: 11.5 });
    // The user object differs by id only.
    for (const body of bodies.slice(1)) expect({ ...body, user: undefined }).toEqual({ ...bodies[0], user: undefined });
  });
});

describe("layouts of earlier versions, read and migrated as they are written to", () => {
  const june = periodOfDay(day("2026-06-01"), "monthly");
  /** Sends `events` for `user` on the manual clock and applies them, one batch. */
  async function sendAll(user: string, events: [string, number][]): Promise<void> {
    for (const [at, value] of events) {
      await t.setClock(at);
      expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: user, tz: "UTC" }, value })).status).toBe(201);
    }
    await bucketWorker(t).drain();
  }
  /** Events on 1, 2 (twice) and 3 June for `user`, one batch each, its series then rewritten in an earlier version's layout. */
  async function startFrom(user: string, layout: (store: SeriesStore) => SeriesStore): Promise<void> {
    for (const at of ["2026-06-01T08:00:00Z", "2026-06-02T08:00:00Z", "2026-06-02T09:00:00Z", "2026-06-03T08:00:00Z"]) await sendAll(user, [[at, 1]]);
    await rewriteLayout(t.redis, tenantId, shards(), "m:lessons", user, layout);
  }
  const daily = async (user: string, from: string, to: string) =>
    (await t.call("GET", `/v1/users/${user}/metrics/lessons/event-summary?aggregation=daily&startDate=${from}&endDate=${to}`)).body;

  it("a 28-byte open day (the version before the open month) whose month's first days are in its member: later days of the month go to the hash, the next month is appended to that member (one member per month)", async () => {
    // What that version's worker left: 1 and 2 June closed into the month's member, 3 June the
    // open day, packed alone as it packed it.
    await startFrom("legacy28", openDayLayout);
    expect(await seriesLayout(t.redis, tenantId, shards(), "m:lessons", "legacy28")).toEqual({
      months: [[june, encodeMonth([bucket("2026-06-01", 1, M, M), bucket("2026-06-02", 2, 2 * M, 3 * M)])]],
      open: { month: june, closed: [], open: bucket("2026-06-03", 1, M, 4 * M) },
    });
    // The value byte for byte as that version packed it (struct '<i4i4i4dd').
    const legacy = Buffer.alloc(28);
    legacy.writeInt32LE(day("2026-06-03"), 0);
    legacy.writeInt32LE(june, 4);
    legacy.writeInt32LE(1, 8);
    legacy.writeDoubleLE(M, 12);
    legacy.writeDoubleLE(4 * M, 20);
    expect(await t.redis.hgetBuffer(`{${tenantId}:0}:bl`, "m:lessons:legacy28")).toEqual(legacy);
    expect(await daily("legacy28", "2026-06-01", "2026-06-04")).toEqual([
      { date: "2026-06-01", total: 1, change: 1 },
      { date: "2026-06-02", total: 3, change: 2 },
      { date: "2026-06-03", total: 4, change: 1 },
      { date: "2026-06-04", total: 4, change: 0 },
    ]);

    await sendAll("legacy28", [["2026-06-03T12:00:00Z", 1], ["2026-06-04T12:00:00Z", 1]]);
    expect(await seriesLayout(t.redis, tenantId, shards(), "m:lessons", "legacy28")).toEqual({
      months: [[june, encodeMonth([bucket("2026-06-01", 1, M, M), bucket("2026-06-02", 2, 2 * M, 3 * M)])]],
      open: { month: june, closed: [bucket("2026-06-03", 2, 2 * M, 5 * M)], open: bucket("2026-06-04", 1, M, 6 * M) },
    });
    await sendAll("legacy28", [["2026-07-01T12:00:00Z", 1]]);
    const june1to4 = [bucket("2026-06-01", 1, M, M), bucket("2026-06-02", 2, 2 * M, 3 * M), bucket("2026-06-03", 2, 2 * M, 5 * M), bucket("2026-06-04", 1, M, 6 * M)];
    expect(await seriesLayout(t.redis, tenantId, shards(), "m:lessons", "legacy28")).toEqual({
      months: [[june, encodeMonth(june1to4)]],
      open: { month: june + 1, closed: [], open: bucket("2026-07-01", 1, M, 7 * M) },
    });
    expect((await daily("legacy28", "2026-06-01", "2026-07-01")).filter((i: { change: number }) => i.change !== 0).map((i: { total: number }) => i.total)).toEqual([1, 3, 5, 6, 7]);
  });

  it("a series with no open-day field (the version before the open day): its latest day opens, the month's days that follow go to the hash, the next month completes its member", async () => {
    await startFrom("nofield", previousLayout);
    expect(await seriesLayout(t.redis, tenantId, shards(), "m:lessons", "nofield")).toEqual({
      months: [[june, encodeMonth([bucket("2026-06-01", 1, M, M), bucket("2026-06-02", 2, 2 * M, 3 * M), bucket("2026-06-03", 1, M, 4 * M)])]],
      open: null,
    });
    expect(await daily("nofield", "2026-06-03", "2026-06-04")).toEqual([
      { date: "2026-06-03", total: 4, change: 1 },
      { date: "2026-06-04", total: 4, change: 0 },
    ]);
    await sendAll("nofield", [["2026-06-05T12:00:00Z", 1], ["2026-06-06T12:00:00Z", 1]]);
    expect(await seriesLayout(t.redis, tenantId, shards(), "m:lessons", "nofield")).toEqual({
      months: [[june, encodeMonth([bucket("2026-06-01", 1, M, M), bucket("2026-06-02", 2, 2 * M, 3 * M)])]],
      open: { month: june, closed: [bucket("2026-06-03", 1, M, 4 * M), bucket("2026-06-05", 1, M, 5 * M)], open: bucket("2026-06-06", 1, M, 6 * M) },
    });
    await sendAll("nofield", [["2026-07-02T12:00:00Z", 1]]);
    expect(await seriesLayout(t.redis, tenantId, shards(), "m:lessons", "nofield")).toEqual({
      months: [[june, encodeMonth([bucket("2026-06-01", 1, M, M), bucket("2026-06-02", 2, 2 * M, 3 * M), bucket("2026-06-03", 1, M, 4 * M), bucket("2026-06-05", 1, M, 5 * M), bucket("2026-06-06", 1, M, 6 * M)])]],
      open: { month: june + 1, closed: [], open: bucket("2026-07-02", 1, M, 7 * M) },
    });
    expect((await daily("nofield", "2026-06-01", "2026-07-03")).filter((i: { change: number }) => i.change !== 0).map((i: { total: number }) => i.total)).toEqual([1, 3, 4, 5, 6, 7]);
  });
});
