import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { allBuckets, applyChange, summarise, type SeriesStore } from "../../src/domain/buckets.js";
import { fromMicro } from "../../src/domain/decimal.js";
import { formatDay, parseDay, periodOfDay, type Frequency } from "../../src/domain/periods.js";
import { startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { openDayLayout, previousLayout, rewriteLayout, seriesStore } from "../helpers/buckets.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";
import { bucketWorker } from "../helpers/worker.js";
import { propertyParameters } from "../helpers/property.js";

/**
 * The stream worker's buckets against the reference model (src/domain/buckets.ts applyChange):
 * random records of two users (days that stay, step a day or a few, jump a month or more, or move
 * back; a metric change and maybe a points change each) applied in random batches, with series
 * rewritten between batches in the layouts of earlier versions (no field; a 28-byte open day with
 * the month's closed days in its member). After every drain each series' layout (zset members and
 * open month) must equal the model's exactly; at the end the event summaries must equal what the
 * model's buckets give. The seed is printed; rerun one with FC_SEED=<seed>.
 */
const tenantId = uniqueTenantId("bp");
const YAML = tenantYaml(
  tenantId,
  `
    shards: 1
    metrics: [{ key: lessons, name: Lessons }, { key: signup, name: Sign-up }]
    points: [{ key: xp, name: XP, triggers: [{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 1 }] }]
`,
);
const SERIES = ["m:lessons", "p:xp"] as const;
const START_DAY = parseDay("2026-06-24")!;
const M = 1_000_000;

type Command =
  | { kind: "record"; user: number; step: number; value: number; points: number | null }
  | { kind: "drain"; batch: number }
  | { kind: "rewrite"; user: number; series: number; layout: "previous" | "openDay" };

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 8, arbitrary: fc.record({
    kind: fc.constant("record" as const),
    user: fc.nat(1),
    // Mostly the same day or the next ones; sometimes a month or more on, or a day back.
    step: fc.constantFrom(0, 0, 0, 1, 1, 1, 2, 3, 6, 29, 40, -1),
    value: fc.integer({ min: -3, max: 5 }),
    points: fc.option(fc.integer({ min: -5, max: 20 }), { freq: 2 }),
  }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("drain" as const), batch: fc.integer({ min: 1, max: 8 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("rewrite" as const), user: fc.nat(1), series: fc.nat(1), layout: fc.constantFrom("previous" as const, "openDay" as const) }) },
);

let t: TestApp;
let run = 0;
beforeAll(async () => {
  t = await startTestApp({ yaml: YAML, manualClock: "2026-06-24T12:00:00Z" });
});
afterAll(async () => t.close());

const stream = `{${tenantId}:0}:x`;

async function runSequence(commands: Command[]): Promise<void> {
  run += 1;
  const users = [`r${run}-a`, `r${run}-b`];
  // The users exist (the event summaries answer 404 otherwise): an event on a metric no series here follows.
  for (const user of users) expect((await t.call("POST", "/v1/metrics/signup/event", { user: { id: user, tz: "UTC" }, value: 1 })).status).toBe(201);
  const models = users.map(() => new Map<string, SeriesStore>(SERIES.map((s) => [s, { months: new Map(), open: null }])));
  const last = users.map(() => ({ day: START_DAY, latest: START_DAY, lessons: 0, xp: 0 }));

  const drain = async (batch: number) => {
    await bucketWorker(t, { batchSize: batch }).drain();
    for (const [u, user] of users.entries()) {
      for (const series of SERIES) expect(await seriesStore(t.redis, tenantId, 1, series, user), `${user} ${series}`).toEqual(models[u]!.get(series));
    }
  };

  for (const [n, cmd] of commands.entries()) {
    if (cmd.kind === "drain") {
      await drain(cmd.batch);
      continue;
    }
    if (cmd.kind === "rewrite") {
      // Rewritten as an earlier version left it, after what is in the stream has been applied.
      await drain(100);
      const series = SERIES[cmd.series]!;
      const layout = cmd.layout === "previous" ? previousLayout : openDayLayout;
      await rewriteLayout(t.redis, tenantId, 1, series, users[cmd.user]!, layout);
      models[cmd.user]!.set(series, layout(models[cmd.user]!.get(series)!));
      continue;
    }
    const at = last[cmd.user]!;
    at.day += cmd.step;
    at.latest = Math.max(at.latest, at.day);
    const month = periodOfDay(at.day, "monthly");
    at.lessons += cmd.value * M;
    applyChange(models[cmd.user]!.get("m:lessons")!, at.day, month, cmd.value * M, at.lessons);
    let outcome = "";
    if (cmd.points !== null) {
      at.xp += cmd.points;
      applyChange(models[cmd.user]!.get("p:xp")!, at.day, month, cmd.points, at.xp);
      outcome = `p:xp:${cmd.points}:${at.xp}:0:0`;
    }
    // The event script's record: "metric|value|eventId|day|month|total".
    const detail = `lessons|${cmd.value * M}|00000000-0000-4000-8000-${String(n).padStart(12, "0")}|${at.day}|${month}|${at.lessons}`;
    await t.redis.xadd(stream, "*", "k", "ev", "u", users[cmd.user]!, "t", String(at.day * 86_400_000), "z", "UTC", "e", detail, "o", outcome);
  }
  await drain(100);

  // The reads: what the model's buckets give, over the days the records reached.
  for (const [u, user] of users.entries()) {
    const from = START_DAY - 1;
    const to = Math.min(last[u]!.latest + 1, from + 400);
    for (const [series, path, wire] of [["m:lessons", "metrics/lessons", fromMicro], ["p:xp", "points/xp", (n: number) => n]] as const) {
      const days = allBuckets(models[u]!.get(series)!);
      for (const aggregation of ["daily", "monthly"] as Frequency[]) {
        const before = days.filter((d) => d.day < from).at(-1) ?? null;
        const expected = summarise(before, days.filter((d) => d.day >= from && d.day <= to), from, to, aggregation).map((i) => ({ ...i, total: wire(i.total), change: wire(i.change) }));
        const res = await t.call("GET", `/v1/users/${user}/${path}/event-summary?aggregation=${aggregation}&startDate=${formatDay(from)}&endDate=${formatDay(to)}`);
        expect(res.body, `${user} ${series} ${aggregation}`).toEqual(expected);
      }
    }
  }
}

describe("stream worker buckets: Lua equals the reference model", () => {
  it("agrees on random records, batches and earlier layouts, across days and months", async () => {
    // size "max": at fast-check's default size the array stops at about 12 commands whatever its maxLength.
    await fc.assert(fc.asyncProperty(fc.array(commandArb, { minLength: 1, maxLength: 60, size: "max" }), runSequence), propertyParameters(40));
  });
});
