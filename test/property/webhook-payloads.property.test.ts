import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { profileZone, userProfileFields } from "../../src/api/user-input.js";
import type { ManualClock } from "../../src/clock.js";
import type { CompiledTenant } from "../../src/config/compiled.js";
import { endedBoostEnd } from "../../src/domain/boosts.js";
import { toMicro } from "../../src/domain/decimal.js";
import { localDayIndex } from "../../src/domain/periods.js";
import { applyComplete, applyEvent, applyStreakAdmin, applyStreakSweep, applyTimeTicks, applyUpsert, applyUserBoost, emptyState, refreshThresholds, type ModelState } from "../../src/domain/model.js";
import { WEBHOOK_EVENT_TYPES } from "../../src/jobs/webhooks/kinds.js";
import { startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { propertyParameters } from "../helpers/property.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";
import { calendarHooks, canonical, changeHooks, userBoostHooks, type ExpectedHook, type TrackedUserBoost } from "../helpers/webhook-expect.js";
import { startReceiver, type Receiver } from "../helpers/webhook-receiver.js";
import { spelled } from "../helpers/zones.js";

/**
 * The delivered webhooks against the reference model (README: Webhooks): random sequences of
 * events (with and without zones, replays, batches), identifications, API completions, freezes
 * granted, restores, user boosts and clock jumps across days, weeks and board runs go through the real service (the
 * manual clock, its time triggers and streak sweep, the webhook consumer, timeline and delivery
 * workers) with one endpoint subscribed to every type, a real receiver on loopback; and through
 * the model, whose journal of changes and state say what should have been sent
 * (test/helpers/webhook-expect.ts). Once the deliveries have settled (the admin counts: nothing
 * pending, in flight or waiting for a retry, none dead), the receiver must hold exactly those
 * events, payload for payload, each change under one event id of its own. The records are
 * drained after every command, so what a payload reads besides the change (the user, the freezes
 * held) is the state right after it, as the model holds it then; a batch's records are drained
 * together, as a consumer behind reads them. Rerun a failure with FC_SEED=<seed> (FC_RUNS for more runs).
 *
 * Each run has its own tenant and app (the queues' workers must not lose their keys to a FLUSHDB),
 * on the run's shared redis-server; one receiver for all.
 */
const START = Date.parse("2026-03-05T09:00:00Z");
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const USERS = ["w0", "w1", "w2"];
const admin = { "x-api-key": "demo-admin-key" };

function yaml(tenantId: string, url: string): string {
  return tenantYaml(
    tenantId,
    `
    shards: 2
    attributes:
      user: [region]
    metrics:
      - { key: lessons, name: Lessons }
      - { key: minutes, name: Minutes }
    points:
      - key: xp
        name: XP
        triggers:
          - { key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 10 }
          - { key: per-half-hour, type: metric, metric: minutes, threshold: 2.5, points: 3 }
          - { key: streak-2, type: streak, length: 2, points: 5 }
          - { key: on-profile, type: achievement, achievement: profile, points: 20 }
          - { key: welcome, type: user_creation, points: 5 }
        levels:
          - { key: l1, name: One, points: 15 }
          - { key: l2, name: Two, points: 40 }
          - { key: l3, name: Three, points: 100 }
        boosts:
          - { key: rush, name: Rush, multiplier: 2, start: "2026-03-07T00:00:00Z", end: "2026-03-09T06:00:00Z", rounding: up }
      - key: gems
        name: Gems
        maxPoints: 30
        triggers:
          - { key: start, type: user_creation, points: 20 }
          - { key: drain, type: metric, metric: minutes, threshold: 1, points: -2 }
          # Up with lessons, down with minutes: a user's total can come back to where it was at one instant.
          - { key: refill, type: metric, metric: lessons, threshold: 3, points: 6 }
          - { key: daily, type: time, unit: day, interval: 1, points: 4 }
        boosts:
          - { key: eu-gems, name: EU gems, multiplier: 1.5, start: "2026-03-06T12:00:00Z", end: "2026-03-12T00:00:00Z", rounding: nearest, userAttributes: { region: eu } }
        levels:
          - { key: low, name: Low, points: 0 }
          - { key: high, name: High, points: 25 }
    achievements:
      - { key: first, name: First, type: metric, metric: lessons, value: 1 }
      - { key: deep, name: Deep, type: metric, metric: minutes, value: 7.25 }
      - { key: profile, name: Profile, type: api }
      - { key: streak-3, name: Three days, type: streak, length: 3 }
      - { key: combo, name: Combo, type: composite, achievements: [first, profile] }
    streak:
      frequency: daily
      metrics:
        - { metric: lessons, threshold: 1 }
      freezes:
        initial: 1
        max: 2
        autoEarn: { everyDays: 3, amount: 1 }
    leaderboards:
      - { key: xp-march, name: XP in March, rankBy: points, points: xp, start: "2026-03-01", end: "2026-03-16" }
      - { key: lessons-3d, name: Lessons every three days, rankBy: metric, metric: lessons, start: "2026-03-01", runUnit: day, runInterval: 3, maxParticipants: 2 }
      - { key: streaks, name: Streaks, rankBy: streak, start: "2026-03-01", ranking: dense }
      - { key: minutes-region, name: Minutes by region, rankBy: metric, metric: minutes, start: "2026-03-02", runUnit: day, runInterval: 7, breakdownAttribute: region }
    webhooks:
      - key: main
        url: ${url}
        secret: a-test-secret-0123456789
        events: [${WEBHOOK_EVENT_TYPES.join(", ")}]
`,
  );
}

type EventCommand = { kind: "event"; user: string; metric: "lessons" | "minutes"; value: number; tz: string | null; idem: string | null };
type Command =
  | EventCommand
  | { kind: "batch"; events: EventCommand[] }
  | { kind: "identify"; user: string; tz: string | null; region: string | null; name: string | null }
  | { kind: "complete"; user: string }
  | { kind: "freeze"; user: string }
  | { kind: "restore"; user: string }
  | { kind: "boost"; user: string; multiplier: number; startIn: number; length: number | null }
  | { kind: "endBoost"; pick: number }
  | { kind: "advance"; ms: number };

const ZONES = [null, "UTC", "Asia/Tokyo", "America/New_York", "Pacific/Kiritimati", "Pacific/Pago_Pago"];
const eventArb = fc.record({
  kind: fc.constant("event" as const),
  user: fc.constantFrom(...USERS),
  metric: fc.constantFrom("lessons" as const, "lessons" as const, "minutes" as const),
  value: fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 1, max: 3 }) }, fc.constantFrom(0.5, 2.5, 7.5, -1, -3)),
  tz: spelled(fc.constantFrom(...ZONES)),
  // A replay (same key, same metric) writes no record: nothing is sent for it.
  idem: fc.constantFrom(null, null, null, null, "k1"),
});
const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 8, arbitrary: eventArb },
  // POST /admin/v1/metrics/events: events at one instant, their records drained together after the
  // batch (a consumer behind by several changes of a user). Zones are left out: a batch that moves
  // a user's zone across a period boundary reads the stored streak after the batch, not the model's at each change.
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("batch" as const), events: fc.array(eventArb.map((e) => ({ ...e, tz: null, idem: null })), { minLength: 2, maxLength: 6 }) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("identify" as const),
      user: fc.constantFrom(...USERS),
      tz: spelled(fc.constantFrom(...ZONES)),
      region: fc.constantFrom(null, "eu", "us"),
      name: fc.constantFrom(null, "Ada", "Grace"),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("complete" as const), user: fc.constantFrom(...USERS) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("freeze" as const), user: fc.constantFrom(...USERS) }) },
  // A restore sends no event of its own, but settles the streak first (freezes, a loss) and moves the streak board.
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("restore" as const), user: fc.constantFrom(...USERS) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("boost" as const),
      user: fc.constantFrom(...USERS),
      multiplier: fc.constantFrom(2, 1.5, 0.5),
      startIn: fc.constantFrom(0, HOUR, 30 * HOUR),
      length: fc.option(fc.constantFrom(2 * HOUR, 48 * HOUR), { freq: 3 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("endBoost" as const), pick: fc.nat(10) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("advance" as const),
      // Within a day, a day, two days (a missed day: a freeze, or the streak lost), up to nine days
      // (three runs of lessons-3d at most: never more than 10 boundaries of a board in one move).
      ms: fc.oneof(fc.integer({ min: 60_000, max: 5 * HOUR }), fc.integer({ min: 20 * HOUR, max: 26 * HOUR }), fc.integer({ min: 44 * HOUR, max: 50 * HOUR }), fc.integer({ min: 3 * DAY, max: 9 * DAY })),
    }),
  },
);

let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => receiver?.close());

/** The payload without its id; the deliveries' ids are checked apart. */
function withoutId(body: Record<string, unknown>): Record<string, unknown> {
  const { id: _id, ...rest } = body;
  return rest;
}

async function runSequence(commands: readonly Command[]): Promise<void> {
  receiver.received.length = 0;
  const tenantId = uniqueTenantId("whp");
  // Retries without waiting: a delivery whose attempt failed (a connection reset on a loaded box) settles at once.
  const webhooks = { delivery: { backoff: { firstMs: 0, factor: 1, jitter: 0, maxMs: 0 } } };
  const t: TestApp = await startTestApp({ yaml: yaml(tenantId, receiver.url), manualClock: new Date(START).toISOString(), webhooks });
  try {
    await runOn(t, tenantId, commands);
  } finally {
    await t.close();
  }
}

async function runOn(t: TestApp, tenantId: string, commands: readonly Command[]): Promise<void> {
  const tenant: CompiledTenant = t.tenants.find((x) => x.id === tenantId)!;
  const clock = t.clock as ManualClock;
  const model: ModelState = { ...emptyState(), journal: [] };
  refreshThresholds(tenant, model, START);
  const boosts: TrackedUserBoost[] = [];
  const expected: ExpectedHook[] = [];
  let seen = 0;

  /** After a step: the records drained into deliveries, and what the model's new changes and the clock's stretch send. */
  const settleStep = async (from: number, to: number) => {
    await t.app.webhooks!.drain();
    const changes = model.journal!.slice(seen);
    seen = model.journal!.length;
    const users = new Map<string, unknown>();
    for (const change of changes) {
      if (!users.has(change.userId)) {
        const res = await t.call("GET", `/v1/users/${encodeURIComponent(change.userId)}`);
        expect(res.status, `user ${change.userId}`).toBe(200);
        users.set(change.userId, res.body);
      }
      expected.push(...changeHooks(tenant, model, change, users.get(change.userId)));
    }
    expected.push(...calendarHooks(tenant, model, from, to));
    expected.push(...userBoostHooks(tenant, boosts, to));
  };

  for (const cmd of commands) {
    const now = clock.now();
    switch (cmd.kind) {
      case "advance": {
        // The manual clock's move runs the time triggers, the streak sweep, the threshold refresh
        // and then the webhooks' tick (src/app.ts), in that order: the model likewise.
        await clock.set(now + cmd.ms);
        applyTimeTicks(tenant, model, clock.now());
        applyStreakSweep(tenant, model, clock.now());
        refreshThresholds(tenant, model, clock.now());
        await settleStep(now, clock.now());
        continue;
      }
      case "event": {
        const user: Record<string, unknown> = { id: cmd.user };
        if (cmd.tz) user.tz = cmd.tz;
        const headers: Record<string, string> = cmd.idem ? { "idempotency-key": cmd.idem } : {};
        const res = await t.call("POST", `/v1/metrics/${cmd.metric}/event`, { user, value: cmd.value }, headers);
        expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
        const profile = userProfileFields(user as { id: string }, tenant.userAttributes);
        applyEvent(tenant, model, {
          metricKey: cmd.metric,
          userId: cmd.user,
          now,
          eventId: res.body.eventId,
          idempotencyKey: cmd.idem,
          valueMicro: toMicro(cmd.value),
          tz: profileZone(profile),
          profile,
          eventAttributes: null,
        });
        break;
      }
      case "batch": {
        const res = await t.call("POST", "/admin/v1/metrics/events", cmd.events.map((e) => ({ key: e.metric, user: { id: e.user }, value: e.value })), admin);
        expect(res.status, JSON.stringify(res.body)).toBe(202);
        expect(res.body.rejected).toEqual([]);
        cmd.events.forEach((e, i) => {
          const profile = userProfileFields({ id: e.user }, tenant.userAttributes);
          applyEvent(tenant, model, { metricKey: e.metric, userId: e.user, now, eventId: `batch ${i}`, idempotencyKey: null, valueMicro: toMicro(e.value), tz: null, profile, eventAttributes: null });
        });
        break;
      }
      case "identify": {
        const body: Record<string, unknown> = { attributes: cmd.region ? { region: cmd.region } : {} };
        if (cmd.tz) body.tz = cmd.tz;
        if (cmd.name) body.name = cmd.name;
        const res = await t.call("PUT", `/v1/users/${cmd.user}`, body);
        expect(res.status).toBe(200);
        applyUpsert(tenant, model, cmd.user, "upsert", userProfileFields({ id: cmd.user, ...body } as never, tenant.userAttributes), now);
        break;
      }
      case "complete": {
        const res = await t.call("POST", "/v1/achievements/profile/complete", { user: { id: cmd.user } });
        const result = applyComplete(tenant, model, cmd.user, "profile", userProfileFields({ id: cmd.user }, tenant.userAttributes), now);
        expect(res.status).toBe(result.status === "completed" ? 201 : 200);
        break;
      }
      case "freeze": {
        const res = await t.call("POST", "/admin/v1/streaks/freezes", { freezes: [{ userId: cmd.user }] }, admin);
        expect(res.status).toBe(200);
        applyStreakAdmin(tenant, model, cmd.user, "freeze", 1, now);
        break;
      }
      case "restore": {
        const res = await t.call("POST", "/admin/v1/streaks/restore", { users: [{ id: cmd.user }] }, admin);
        expect(res.status).toBe(200);
        const tz = model.users.get(cmd.user)?.profile.get("tz") ?? "UTC";
        // README, Streak freezes and restore: a daily streak looks back 90 days.
        applyStreakAdmin(tenant, model, cmd.user, "restore", localDayIndex(now, tz) - 90, now);
        break;
      }
      case "boost": {
        const start = now + cmd.startIn;
        const end = cmd.length === null ? null : start + cmd.length;
        const res = await t.call(
          "POST",
          "/admin/v1/points/xp/boosts",
          { userId: cmd.user, name: "b", multiplier: cmd.multiplier, start: new Date(start).toISOString(), end: end === null ? null : new Date(end).toISOString(), rounding: "down" },
          admin,
        );
        const boost = { id: res.body.id as string, multiplier: cmd.multiplier, start, end, rounding: "down" as const };
        const applied = applyUserBoost(tenant, model, cmd.user, "xp", "add", boost, now);
        expect(res.status).toBe(applied ? 201 : 404);
        if (applied) boosts.push({ ...boost, name: "b", userId: cmd.user, pointsSystemKey: "xp", created: now, started: false, finished: false });
        break;
      }
      case "endBoost": {
        const boost = boosts[cmd.pick % Math.max(1, boosts.length)];
        if (!boost) continue;
        const res = await t.call("DELETE", `/admin/v1/points/xp/boosts/${boost.id}`, undefined, admin);
        expect(res.status).toBe(200);
        const live = boost.end === null || boost.end > now;
        if (live) {
          applyUserBoost(tenant, model, boost.userId, "xp", "end", { ...boost }, now);
          boost.end = endedBoostEnd(boost.start, now);
        }
        break;
      }
    }
    await settleStep(now, now);
  }

  // Settled: nothing waiting, in flight or waiting for a retry (the admin counts), none dead.
  await t.app.webhooks!.settled(tenantId);
  const counts = (await t.call("GET", "/admin/v1/webhooks", undefined, admin)).body.deliveries;

  // One id per change: each change's payload under one id, its header the body's. Delivery is at
  // least once: an id received twice (an attempt retried after the receiver had it) must carry the
  // same body, and counts once.
  const byId = new Map<string, string>();
  for (const r of receiver.received) {
    expect(r.headers["webhook-id"]).toBe(r.body.id);
    expect(byId.get(r.body.id) ?? r.raw, `body of ${r.body.id} each time`).toBe(r.raw);
    byId.set(r.body.id, r.raw);
  }
  const received = [...byId.values()].map((raw) => ({ body: JSON.parse(raw) as Record<string, unknown> }));

  const order = (hooks: Record<string, unknown>[]) => hooks.map((h) => [canonical(h), h] as const).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, h]) => h);
  expect(order(received.map((r) => withoutId(r.body))), "delivered payloads").toEqual(order(expected));
  expect(counts, "delivery counts").toEqual({ pending: 0, delivering: 0, retrying: 0, delivered: expected.length, dead: 0 });
}

describe("webhooks: the delivered payloads equal the reference model's", () => {
  it("agrees on random sequences of events, identifications, completions, freezes, boosts and clock jumps", async () => {
    await fc.assert(fc.asyncProperty(fc.array(commandArb, { minLength: 1, maxLength: 40, size: "max" }), (commands) => runSequence(commands)), propertyParameters(25));
  });

  it("agrees on two changes of a user at one instant that end at the same total", async () => {
    const event = (metric: "lessons" | "minutes", value: number): EventCommand => ({ kind: "event", user: "w0", metric, value, tz: null, idem: null });
    await runSequence([event("lessons", 3), { kind: "batch", events: [event("minutes", 3), event("lessons", 3), event("minutes", 3), event("lessons", 3)] }]);
  });
});
