import { readFileSync } from "node:fs";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventReply } from "../../src/api/events.js";
import { onTheWire } from "../helpers/wire.js";
import { profileZone, userProfileFields } from "../../src/api/user-input.js";
import { toMicro } from "../../src/domain/decimal.js";
import { LaurelError } from "../../src/domain/errors.js";
import { applyEvent, applyStreakSweep, applyUpsert, emptyState, readUserPoints, type ModelState } from "../../src/domain/model.js";
import { sweepExpiredStreaks } from "../../src/jobs/streak-expiry.js";
import type { ManualClock } from "../../src/clock.js";
import type { CompiledTenant } from "../../src/config/compiled.js";
import { awardJson } from "../../src/api/wire.js";
import { levelOf } from "../../src/domain/levels.js";
import { localDayIndex, periodOfDay, periodStartInstant } from "../../src/domain/periods.js";
import { startAppOnOwnRedis, type TestApp } from "../helpers/app.js";
import { expectStateEqual } from "./state-check.js";
import { drainBuckets, expectEventSummaryEqual, expectRankingsEqual, expectStreakListEqual, expectSummaryEqual, expectUserReadsEqual, expectWrappedEqual } from "./read-check.js";
import { propertyParameters } from "../helpers/property.js";
import { spelled } from "../helpers/zones.js";

/**
 * The oracle test (DESIGN: "Tests you can trust"): random sequences of events, replays, zones
 * and clock jumps go through the HTTP API and through the reference model; every response and
 * the final state must be identical. The seed is printed; rerun one with FC_SEED=<seed>.
 */
const YAML = readFileSync(new URL("./rules.yaml", import.meta.url), "utf8");
const KEYS: Record<string, string> = { propd: "prop-daily-key", propw: "prop-weekly-key", propm: "prop-monthly-key" };
const ZONES = [null, "UTC", "America/New_York", "Europe/London", "Asia/Tokyo", "Australia/Lord_Howe", "Pacific/Kiritimati", "America/St_Johns", "Pacific/Pago_Pago"];
const USERS = ["u0", "u1", "ü/3 ☃"];
const START = Date.parse("2026-03-05T09:00:00Z");
const SUMMARY_FILTERS = [null, "plan:pro", "plan:free", "plan:", "plan:gold"];
// Instants just before and after DST changes in the zones above, and month ends.
const LANDMARKS = [
  "2026-03-08T06:59:00Z", "2026-03-08T07:01:00Z", "2026-03-29T00:59:00Z", "2026-03-29T01:01:00Z",
  "2026-03-31T23:30:00Z", "2026-04-04T14:59:00Z", "2026-04-04T15:01:00Z", "2026-10-25T00:59:00Z",
  "2026-10-25T01:01:00Z", "2026-10-31T23:59:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z",
  "2026-12-31T23:59:59Z", "2027-01-01T00:00:01Z", "2027-02-28T12:00:00Z",
].map(Date.parse);

type Command =
  | { kind: "event"; tenant: string; user: string; metric: number; value: number; tz: string | null; idem: string | null; email: boolean; plan?: string | null }
  | { kind: "advance"; ms: number }
  | { kind: "landmark"; index: number }
  | { kind: "read"; tenant: string; user: string; system: number; awards: number }
  | { kind: "move"; tenant: string; user: string; tz: string }
  | { kind: "boundary"; tenant: string; tz: string }
  | { kind: "sweep"; tenant: string; user: string | null };

const valueArb = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 1, max: 3 }) },
  fc.integer({ min: -3, max: 6 }),
  fc.integer({ min: -2_000_000, max: 9_000_000 }).map((n) => n / 1_000_000),
  fc.constantFrom(0.1, 0.2, 0.3, 2.5, 7.25, 1.4999995, 1000),
);
const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 6, arbitrary: fc.record({
    kind: fc.constant("event" as const),
    tenant: fc.constant(""),
    user: fc.constantFrom(...USERS),
    metric: fc.nat(2),
    value: valueArb,
    tz: spelled(fc.constantFrom(...ZONES)),
    idem: fc.option(fc.constantFrom("k1", "k2", "k3"), { freq: 3 }),
    email: fc.boolean(),
    // The user attribute plan (the empty value is a value: summaries filtered by "plan:" count it).
    plan: fc.constantFrom(null, null, null, "pro", "free", ""),
  }) },
  { weight: 2, arbitrary: fc.record({
    kind: fc.constant("advance" as const),
    ms: fc.oneof(
      fc.integer({ min: 60_000, max: 3 * 3_600_000 }),
      fc.integer({ min: 22 * 3_600_000, max: 26 * 3_600_000 }),
      fc.integer({ min: 46 * 3_600_000, max: 50 * 3_600_000 }),
      fc.integer({ min: 6 * 86_400_000, max: 9 * 86_400_000 }),
      fc.integer({ min: 27 * 86_400_000, max: 33 * 86_400_000 }),
      // propw's idempotency window to the millisecond: a key sent again exactly then is new.
      fc.constant(24 * 3_600_000),
    ),
  }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("landmark" as const), index: fc.nat(LANDMARKS.length - 1) }) },
  // The streak expiry sweep (src/jobs/streak-expiry.ts, lua/streakAdmin-9.lua "settle"), at now or
  // with the clock first moved to a user's deadline itself: streaks lost when the deadline passes.
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("sweep" as const), tenant: fc.constant(""), user: fc.option(fc.constantFrom(...USERS), { freq: 2 }) }) },
  { weight: 2, arbitrary: fc.record({
    kind: fc.constant("read" as const),
    tenant: fc.constant(""),
    user: fc.constantFrom(...USERS),
    system: fc.nat(1),
    awards: fc.integer({ min: 1, max: 100 }),
  }) },
);

/**
 * Travel: one or two users who meet the streak threshold and change zone at every event or by an
 * update between events, a few hours to two days apart, between zones up to 25 hours apart: the
 * zone changes that read the stored periods on another calendar, which the sequences above meet
 * rarely.
 */
const ZONES_SENT = ZONES.filter((z): z is string => z !== null);
const travelArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 3, arbitrary: fc.record({
    kind: fc.constant("event" as const),
    tenant: fc.constant(""),
    user: fc.constantFrom("u0", "u1"),
    metric: fc.constantFrom(0, 0, 0, 1),
    // -1: a value taken back, which must not count as new work (the work's instant, sqk).
    value: fc.constantFrom(1, 3, 10, 1, 3, -1),
    // The zones furthest apart twice as often: Kiritimati (UTC+14) is 25 hours ahead of Pago Pago.
    tz: spelled(fc.constantFrom(...ZONES_SENT, "Pacific/Kiritimati", "Pacific/Pago_Pago", "Asia/Tokyo", "America/New_York")),
    idem: fc.constant(null),
    email: fc.constant(false),
  }) },
  { weight: 2, arbitrary: fc.record({
    kind: fc.constant("advance" as const),
    ms: fc.oneof(fc.integer({ min: 3_600_000, max: 8 * 3_600_000 }), fc.integer({ min: 16 * 3_600_000, max: 32 * 3_600_000 })),
  }) },
  // To the first instant of the next period on a zone's calendar (its next midnight on propd): work
  // sent then, and a later move to that zone (or to another spelling of it) within the period,
  // reads the work's instant at the very start of the new calendar's period (moveCalendar).
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("boundary" as const), tenant: fc.constant(""), tz: fc.constantFrom(...ZONES_SENT) }) },
  // The expiry sweep between the moves: lost at the deadline of the zone stored then.
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("sweep" as const), tenant: fc.constant(""), user: fc.option(fc.constantFrom("u0", "u1"), { freq: 2 }) }) },
  // The zone changed by an update alone (lua/user-3.lua), between events.
  { weight: 1, arbitrary: fc.record({
    kind: fc.constant("move" as const),
    tenant: fc.constant(""),
    user: fc.constantFrom("u0", "u1"),
    tz: spelled(fc.constantFrom("Pacific/Kiritimati", "Pacific/Pago_Pago", "Asia/Tokyo", "America/New_York")),
  }) },
);
const travelSequenceArb = fc
  // propw (mode all) and propm (mode any) accumulate several events a period: what a zone change
  // keeps of a period's values (sqa) and the thresholds counted in it (sqk).
  .tuple(fc.constantFrom("propd", "propd", "propd", "propw", "propm"), fc.array(travelArb, { minLength: 2, maxLength: 40, size: "max" }))
  .map(([tenant, commands]) => commands.map((c) => ("tenant" in c ? { ...c, tenant } : c)));

let t: TestApp;
let closeApp: (() => Promise<void>) | undefined;
beforeAll(async () => {
  // Its own redis-server with no background jobs: FLUSHDB between runs would remove BullMQ's queues under its workers.
  ({ t, close: closeApp } = await startAppOnOwnRedis({ yaml: YAML, manualClock: true }));
});
afterAll(async () => closeApp?.());

function tenantOf(id: string): CompiledTenant {
  return t.tenants.find((x) => x.id === id)!;
}

/** One tenant per sequence, so that events meet each other often enough to cross streak periods. */
const sequenceArb = fc
  .tuple(fc.constantFrom("propd", "propw", "propm"), fc.array(commandArb, { minLength: 1, maxLength: 80, size: "max" }))
  .map(([tenant, commands]) => commands.map((c) => ("tenant" in c ? { ...c, tenant } : c)));

async function runSequence(commands: Command[]): Promise<void> {
  await t.redis.flushdb();
  const clock = t.clock as ManualClock;
  await clock.set(START);
  const models = new Map<string, ModelState>(Object.keys(KEYS).map((id) => [id, emptyState()]));

  for (const cmd of commands) {
    if (cmd.kind === "advance") {
      await clock.set(clock.now() + cmd.ms);
      continue;
    }
    if (cmd.kind === "landmark") {
      if (LANDMARKS[cmd.index]! > clock.now()) await clock.set(LANDMARKS[cmd.index]!);
      continue;
    }
    const tenant = tenantOf(cmd.tenant);
    if (cmd.kind === "boundary") {
      const frequency = tenant.streak!.frequency;
      await clock.set(periodStartInstant(periodOfDay(localDayIndex(clock.now(), cmd.tz), frequency) + 1, frequency, cmd.tz));
      continue;
    }
    const context = t.app.tenants.all.find((c) => c.tenant.id === cmd.tenant)!;
    const model = models.get(cmd.tenant)!;
    if (cmd.kind === "sweep") {
      // To the user's deadline (sd) when it is ahead: the sweep settles at the deadline itself.
      const deadline = cmd.user === null ? undefined : model.streakDeadline.get(cmd.user);
      if (deadline !== undefined && deadline > clock.now()) await clock.set(deadline);
      const changed = await sweepExpiredStreaks(context.store, clock.now());
      expect(changed, "users the sweep changed").toBe(applyStreakSweep(tenant, model, clock.now()));
      continue;
    }
    const headers = { "x-api-key": KEYS[cmd.tenant]! };
    if (cmd.kind === "move") {
      const res = await t.call("PUT", `/v1/users/${encodeURIComponent(cmd.user)}`, { tz: cmd.tz }, headers);
      const result = applyUpsert(tenant, model, cmd.user, "upsert", userProfileFields({ id: cmd.user, tz: cmd.tz }, tenant.userAttributes), clock.now());
      expect([res.status, result.status === "missing"]).toEqual([200, false]);
      continue;
    }
    if (cmd.kind === "read") {
      const system = tenant.systems[cmd.system % tenant.systems.length]!;
      const res = await t.call("GET", `/v1/users/${encodeURIComponent(cmd.user)}/points/${system.key}?awards=${cmd.awards}`, undefined, headers);
      const expected = readUserPoints(model, cmd.user, system.key, cmd.awards);
      if (expected === null) {
        expect(res.status).toBe(404);
        continue;
      }
      expect(res.status).toBe(200);
      expect(res.body.total).toBe(expected.total);
      expect(res.body.level?.key ?? null).toBe(levelOf(system.levels, expected.total)?.key ?? null);
      expect(res.body.awards).toEqual(expected.awards.map((a) => awardJson(tenant, system, cmd.user, a)));
      continue;
    }
    const metric = tenant.metrics[cmd.metric % tenant.metrics.length]!;
    const user: Record<string, unknown> = { id: cmd.user };
    if (cmd.tz !== null) user.tz = cmd.tz;
    if (cmd.email) user.email = `${cmd.user.length}@example.com`;
    if (cmd.plan != null) user.attributes = { plan: cmd.plan };
    const reqHeaders: Record<string, string> = { ...headers };
    if (cmd.idem !== null) reqHeaders["idempotency-key"] = cmd.idem;
    const res = await t.call("POST", `/v1/metrics/${metric.key}/event`, { user, value: cmd.value }, reqHeaders);
    const now = clock.now();
    let expected;
    try {
      const profile = userProfileFields(user as { id: string }, tenant.userAttributes);
      const result = applyEvent(tenant, model, {
        metricKey: metric.key,
        userId: cmd.user,
        now,
        eventId: res.body.eventId,
        idempotencyKey: cmd.idem,
        valueMicro: toMicro(cmd.value),
        // As the handler passes it (src/api/events.ts): the zone in IANA's spelling.
        tz: profileZone(profile),
        profile,
        eventAttributes: null,
      });
      expected = onTheWire(eventReply(context, metric, cmd.user, now, { ...result }, cmd.idem));
    } catch (err) {
      expect(err).toBeInstanceOf(LaurelError);
      expect(res.status).toBe((err as LaurelError).status);
      continue;
    }
    expect({ status: res.status, body: res.body }).toEqual({ status: expected.status, body: expected.body });
  }

  for (const [tenantId, model] of models) await expectStateEqual(t, tenantOf(tenantId), model);
  // The reads against the model's twins (read-check.ts), all in flight at once: each system's
  // points summary (totals at caps, floors and past 1000; by plan too), the streak rankings (the non-ASCII id
  // among ties), every user's streak length and achievements and metrics.
  const reads: Promise<void>[] = [];
  await drainBuckets(t);
  for (const [tenantId, model] of models) {
    // The sequence's tenant (the others hold no user).
    if (model.users.size === 0) continue;
    const tenant = tenantOf(tenantId);
    const headers = { "x-api-key": KEYS[tenantId]! };
    // Unfiltered and filtered by the plan: each value's users (the empty one's too), a value nobody holds.
    for (const system of tenant.systems) for (const filter of SUMMARY_FILTERS) reads.push(expectSummaryEqual(t, tenant, model, system.key, filter, headers));
    for (const type of ["active", "longest"] as const) reads.push(expectRankingsEqual(t, model, type, 2, clock.now(), headers));
    reads.push(expectStreakListEqual(t, tenant, model, [...USERS, "nobody"], clock.now(), headers));
    for (const user of USERS) reads.push(expectUserReadsEqual(t, tenant, model, user, true, headers));
    // Each user's event summaries of every metric and system from the day before the start (on
    // the UTC calendar: a day before it in zones behind) to the day after now, at most 400 days,
    // one aggregation a series (turn by turn over sequences); wrapped of the current year in the
    // user's zone, of the start's year and of the UTC year after now's (current only in a zone
    // already past New Year, else 422).
    const now = clock.now();
    const from = localDayIndex(START, "UTC") - 1;
    const to = Math.min(localDayIndex(now, "UTC") + 1, from + 400);
    const series = [...tenant.metrics.map((m) => `m:${m.key}`), ...tenant.systems.map((s) => `p:${s.key}`)];
    const aggregations = ["daily", "weekly", "monthly"] as const;
    for (const [u, user] of USERS.entries()) {
      series.forEach((name, i) => reads.push(expectEventSummaryEqual(t, tenant, model, user, name, aggregations[(commands.length + u + i) % 3]!, from, to, headers, false)));
      for (const year of [null, new Date(START).getUTCFullYear(), new Date(now).getUTCFullYear() + 1]) reads.push(expectWrappedEqual(t, tenant, model, user, year, now, headers, false));
    }
  }
  await Promise.all(reads);
}

describe("event path: HTTP + Lua equals the reference model", () => {
  it("agrees on random sequences of events, replays, zones and clock jumps", async () => {
    await fc.assert(fc.asyncProperty(sequenceArb, runSequence), propertyParameters(150));
  });

  it("agrees on users who change zone every event, hours to days apart", async () => {
    await fc.assert(fc.asyncProperty(travelSequenceArb, runSequence), propertyParameters(200));
  });

  // A user's award list keeps the newest 100 per system (AWARDS_KEPT; Lua trims to it past 120):
  // 101 lessons (xp's welcome and an award a lesson), the list read at the API's most, 100.
  it("agrees on the newest 100 awards of a user who has more", async () => {
    const lessons = Array.from({ length: 101 }, (): Command => ({ kind: "event", tenant: "propd", user: "u0", metric: 0, value: 1, tz: null, idem: null, email: false }));
    await runSequence([...lessons, { kind: "read", tenant: "propd", user: "u0", system: 0, awards: 100 }]);
  });

  // Wrapped without a year near New Year: the current year is the user's zone's (2027 already in
  // Kiritimati at 11:00 UTC on 31 December, still 2026 in Pago Pago and UTC), read after a move
  // to a zone across the line; the event summaries across the year's end on each calendar.
  it("agrees on wrapped's current year and the event summaries in zones either side of New Year", async () => {
    const event = (user: string, tz: string | null, value = 1): Command => ({ kind: "event", tenant: "propd", user, metric: 0, value, tz, idem: null, email: false });
    await runSequence([
      event("u0", "Pacific/Kiritimati"),
      event("u1", "Pacific/Pago_Pago"),
      event("ü/3 ☃", "UTC"),
      { kind: "advance", ms: Date.parse("2026-12-31T11:00:00Z") - START },
      event("u0", null, 2),
      event("u1", null, 3),
      event("ü/3 ☃", "Pacific/Kiritimati", 4),
      { kind: "move", tenant: "propd", user: "u1", tz: "Pacific/Kiritimati" },
    ]);
  });

  // The metric total's range, ±9e9 units (MAX_TOTAL_MICRO): a total reaching either end exactly is
  // kept, one micro-unit past it refused (422), and a step back inside then forward to the end kept.
  it("agrees on totals at the ends of the range, exactly ±9e9", async () => {
    const event = (user: string, metric: number, value: number): Command => ({ kind: "event", tenant: "propd", user, metric, value, tz: null, idem: null, email: false });
    const toEnd = (user: string, metric: number, sign: number) => [
      ...Array.from({ length: 9 }, () => event(user, metric, sign * 1e9)),
      event(user, metric, sign * 0.000001),
      event(user, metric, -sign * 0.000001),
      event(user, metric, sign * 0.000001),
      { kind: "read", tenant: "propd", user, system: 0, awards: 100 } as const,
    ];
    await runSequence([...toEnd("u0", 0, 1), ...toEnd("u1", 2, -1)]);
  });
});
