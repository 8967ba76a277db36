import type { Command, Redis } from "ioredis";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BATCH_IN_FLIGHT } from "../../src/api/batch-events.js";
import { demoConfig, dumpTenant, startAppOnOwnRedis, startTestApp, type TestApp } from "../helpers/app.js";

// POST /admin/v1/metrics/events (README: Batch of events): Trophy's admin batch, recorded
// synchronously, in the batch's order, each event as the event route records it.

const PATH = "/admin/v1/metrics/events";
const ADMIN = { "x-api-key": "demo-admin-key" };

interface BatchEvent {
  key: string;
  user: Record<string, unknown> & { id: string };
  value: number;
  attributes?: Record<string, string>;
  idempotencyKey?: string;
}

let t: TestApp;
let tenantId: string;

beforeAll(async () => {
  const config = demoConfig();
  tenantId = config.tenantId;
  t = await startTestApp({ yaml: config.yaml, manualClock: "2026-11-27T12:00:00Z", jobs: false });
});
afterAll(() => t?.close());

const batch = (events: unknown, app: TestApp = t) => app.call("POST", PATH, events, ADMIN);

/** A tenant's dump with what differs between two runs of the same events left out: event ids (random) and writer keys (per connection). */
async function comparableDump(app: TestApp, id: string): Promise<Record<string, unknown>> {
  const dump = await dumpTenant(app.redis, id);
  const text = JSON.stringify(Object.fromEntries(Object.entries(dump).filter(([key]) => !/:wr:\d+$/.test(key))));
  return JSON.parse(text.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<uuid>"));
}

/** A deterministic mix of the demo tenant's events: zones, attributes, idempotency keys repeated (replays), ties on the boards. */
function mixedEvents(day: number, count: number): BatchEvent[] {
  let seed = 12345 + day;
  const next = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  const zones = ["Europe/Paris", "America/New_York", "Asia/Tokyo", "UTC"];
  const events: BatchEvent[] = [];
  for (let i = 0; i < count; i++) {
    const u = next(12);
    const user: BatchEvent["user"] = { id: `user-${u}` };
    // Every user's zone is sent on its first event of the day: later ones without it are judged on the stored zone.
    if (!events.some((e) => e.user.id === user.id)) user.tz = zones[u % zones.length];
    if (u % 5 === 0) user.attributes = { plan: "pro" };
    const lessons = next(4) !== 0;
    const event: BatchEvent = { key: lessons ? "lessons" : "api-calls", user, value: lessons ? 1 + next(3) : next(2) === 0 ? 2.5 : 7 };
    if (lessons && next(3) === 0) event.attributes = { source: "mobile" };
    if (next(4) === 0) event.idempotencyKey = `k-${next(6)}`;
    events.push(event);
  }
  return events;
}

describe("a batch", () => {
  it("leaves the state the same events leave sent one by one to the event route, in the batch's order", async () => {
    // The same tenant id on a Redis of its own: the two dumps name the same keys.
    const config = demoConfig();
    const a = await startTestApp({ yaml: config.yaml, manualClock: "2026-11-27T12:00:00Z", jobs: false });
    const b = await startAppOnOwnRedis({ yaml: config.yaml, manualClock: "2026-11-27T12:00:00Z" });
    try {
      // Three days (a streak, the weekend boosts), the last batch many times the events in flight.
      for (const [day, count] of [[27, 40], [28, 150], [29, 400]] as const) {
        const now = `2026-11-${day}T12:00:00Z`;
        await a.setClock(now);
        await b.t.setClock(now);
        const events = mixedEvents(day, count);
        expect(await batch(events, a)).toEqual({ status: 202, body: { accepted: count, rejected: [] } });
        for (const { key, idempotencyKey, ...body } of events) {
          const res = await b.t.call("POST", `/v1/metrics/${key}/event`, body, idempotencyKey ? { "idempotency-key": idempotencyKey } : {});
          expect([201, 202]).toContain(res.status);
        }
      }
      const dumpA = await comparableDump(a, config.tenantId);
      expect(Object.keys(dumpA).length).toBeGreaterThan(30);
      expect(dumpA).toEqual(await comparableDump(b.t, config.tenantId));
      // Some keys were replays, and some totals are decimal: the mix reached what it was built for.
      const reads = await Promise.all(Array.from({ length: 12 }, (_, u) => a.call("GET", `/v1/users/user-${u}/metrics/api-calls`)));
      expect(reads.some((r) => r.status === 200 && !Number.isInteger(r.body.current))).toBe(true);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("counts an idempotency key once, within the batch and against the event route, per user and metric", async () => {
    const events = [
      { key: "lessons", user: { id: "idem", tz: "Europe/Paris" }, value: 1, idempotencyKey: "k1" },
      { key: "lessons", user: { id: "idem" }, value: 1, idempotencyKey: "k1" },
      { key: "api-calls", user: { id: "idem" }, value: 1, idempotencyKey: "k1" },
      { key: "lessons", user: { id: "idem-2" }, value: 1, idempotencyKey: "k1" },
    ];
    // Replays are accepted (Trophy: ignored), as the event route answers them 202.
    expect(await batch(events)).toEqual({ status: 202, body: { accepted: 4, rejected: [] } });
    expect((await t.call("GET", "/v1/users/idem/metrics/lessons")).body.current).toBe(1);
    expect((await t.call("GET", "/v1/users/idem/metrics/api-calls")).body.current).toBe(1);
    expect((await t.call("GET", "/v1/users/idem-2/metrics/lessons")).body.current).toBe(1);
    const again = await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "idem" }, value: 1 }, { "idempotency-key": "k1" });
    expect(again.status).toBe(202);
    expect(again.body).toMatchObject({ total: 1, idempotencyKey: "k1", idempotentReplayed: true });
    // And the other way: a key the event route took is a replay in a batch.
    expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "idem" }, value: 1 }, { "idempotency-key": "k2" })).status).toBe(201);
    expect(await batch([{ key: "lessons", user: { id: "idem" }, value: 5, idempotencyKey: "k2" }])).toEqual({ status: 202, body: { accepted: 1, rejected: [] } });
    expect((await t.call("GET", "/v1/users/idem/metrics/lessons")).body.current).toBe(2);
  });

  it("takes 1000 events in a body past the event route's 64 KiB limit, and refuses one past its own (16 times that)", async () => {
    const padding = "x".repeat(150);
    const events = Array.from({ length: 1000 }, (_, i) => ({ key: "lessons", user: { id: `bulk-${i % 50}`, name: `${padding}${i}` }, value: 1 }));
    expect(JSON.stringify(events).length).toBeGreaterThan(64 * 1024);
    expect(await batch(events)).toEqual({ status: 202, body: { accepted: 1000, rejected: [] } });
    const points = await t.call("GET", "/v1/users/bulk-7/points/xp");
    expect(points.body.total).toBe(200);
    const before = await dumpTenant(t.redis, tenantId);
    const huge = JSON.stringify(Array.from({ length: 1000 }, (_, i) => ({ key: "lessons", user: { id: `huge-${i}`, name: "y".repeat(1100) }, value: 1 })));
    expect(huge.length).toBeGreaterThan(16 * 64 * 1024);
    expect(await batch(huge)).toEqual({ status: 413, body: { error: `Request body larger than ${16 * 64 * 1024} bytes` } });
    expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
  });
});

describe("a refused batch records nothing", () => {
  const ok = { key: "lessons", user: { id: "refused" }, value: 1 };
  const cases: Array<[string, unknown, number, string | RegExp]> = [
    ["an object", { events: [ok] }, 400, "body must be a JSON array (got an object)"],
    ["a string", "\"lessons\"", 400, 'body must be a JSON array (got "lessons")'],
    ["an empty body", "", 400, "Request body is empty; expected a JSON array"],
    ["no events", [], 400, /^body must be .*at least 1 item/],
    ["1001 events", Array(1001).fill(ok), 400, /^body must be .*at most 1000 items/],
    ["a value of the wrong type", [ok, { ...ok, value: "1" }], 400, 'body[1].value must be number (got "1")'],
    ["a null event", [ok, null], 400, "body[1] must be an object (got null)"],
    ["attributes that are not an object", [{ ...ok, attributes: 5 }], 400, "body[0].attributes must be an object of strings or null (got 5)"],
    ["an unknown field", [{ ...ok, timestamp: "2026-11-27" }], 400, "body[0].timestamp is not a known field"],
    ["no metric key", [ok, { user: { id: "u" }, value: 1 }], 400, /^body\[1\]\.key must be string/],
    ["an unknown metric", [ok, ok, { ...ok, key: "nope" }], 404, "body[2]: Metric not found: nope"],
    ["an unknown zone", [ok, { ...ok, user: { id: "u", tz: "Mars/Olympus" } }], 422, 'body[1]: Unknown IANA time zone: "Mars/Olympus"'],
    ["a value past the range", [{ ...ok, value: 1e10 }], 422, "body[0]: value must be between -1000000000 and 1000000000"],
    ["a value JSON makes infinite", '[{"key":"lessons","user":{"id":"u"},"value":1e400}]', 422, "body[0]: value must be a finite number"],
    ["an empty idempotency key", [{ ...ok, idempotencyKey: "" }], 400, "body[0]: idempotencyKey must be 1-255 visible ASCII characters or spaces"],
    ["an idempotency key outside ASCII", [ok, { ...ok, idempotencyKey: "order-é" }], 400, "body[1]: idempotencyKey must be 1-255 visible ASCII characters or spaces"],
    ["an undeclared event attribute", [{ ...ok, attributes: { color: "red" } }], 422, "body[0]: Invalid attribute keys: color"],
    ["an undeclared user attribute", [{ ...ok, user: { id: "u", attributes: { tier: "gold" } } }], 422, "body[0]: Invalid attribute keys: tier"],
    ["arrays nested half a million deep", "[".repeat(500_000) + "]".repeat(500_000), 400, "body[0].key must be string (got nothing)"],
    ["a bad user id", [{ ...ok, user: { id: " padded" } }], 400, "body[0]: user.id must be 1-255 characters without control characters or surrounding spaces"],
  ];
  it.each(cases)("%s", async (_name, body, status, error) => {
    const before = await dumpTenant(t.redis, tenantId);
    const res = await batch(body);
    expect(res.status).toBe(status);
    expect(Object.keys(res.body)).toEqual(["error"]);
    if (typeof error === "string") expect(res.body.error).toBe(error);
    else expect(res.body.error).toMatch(error);
    expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
  });

  it("without the admin key: 401", async () => {
    const before = await dumpTenant(t.redis, tenantId);
    expect(await t.call("POST", PATH, [ok])).toEqual({ status: 401, body: { error: "Missing or invalid API key" } });
    expect(await t.call("POST", PATH, [ok], { "x-api-key": "" })).toEqual({ status: 401, body: { error: "Missing or invalid API key" } });
    expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
  });
});

describe("an event that fails when it is recorded", () => {
  it("is listed with the event route's status and error; the others are recorded", async () => {
    // ±9e9 is the total's range, 1e9 an event's: the tenth event of 1e9 would leave it.
    const big = (value: number) => ({ key: "lessons", user: { id: "big" }, value });
    const events = [...Array(10).fill(big(1e9)), { key: "lessons", user: { id: "small" }, value: 1 }, big(-1)];
    expect(await batch(events)).toEqual({
      status: 202,
      body: { accepted: 11, rejected: [{ index: 9, status: 422, error: "Metric total would leave the supported range" }] },
    });
    expect((await t.call("GET", "/v1/users/big/metrics/lessons")).body.current).toBe(9e9 - 1);
    expect((await t.call("GET", "/v1/users/small/metrics/lessons")).body.current).toBe(1);
    // None recorded: the answer is the first failure's, and nothing changed.
    const before = await dumpTenant(t.redis, tenantId);
    expect(await batch([big(2), big(3)])).toEqual({ status: 422, body: { error: "body[0]: Metric total would leave the supported range" } });
    expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
  });
});

describe("an event's own failure does not stop the batch", () => {
  it("records every event after it, past the events in flight (BATCH_IN_FLIGHT)", async () => {
    const full = (value: number) => ({ key: "lessons", user: { id: "full-first" }, value });
    expect(await batch(Array(9).fill(full(1e9)))).toEqual({ status: 202, body: { accepted: 9, rejected: [] } });
    // Event 0 would leave the total's range (422); more events follow it than are in flight
    // when its reply comes, so that a batch it stopped would leave the later ones unsent.
    const after = Array.from({ length: BATCH_IN_FLIGHT + 8 }, () => ({ key: "lessons", user: { id: "after-first" }, value: 1 }));
    expect(await batch([full(1), ...after])).toEqual({
      status: 202,
      body: { accepted: after.length, rejected: [{ index: 0, status: 422, error: "Metric total would leave the supported range" }] },
    });
    expect((await t.call("GET", "/v1/users/after-first/metrics/lessons")).body.current).toBe(after.length);
  });
});

describe("a batch on a Redis at its maxmemory", () => {
  it("answers the stop's 503, not an earlier event's own 4xx, when nothing was recorded", async () => {
    const { t: app, close } = await startAppOnOwnRedis({ yaml: demoConfig().yaml, manualClock: "2026-11-27T12:00:00Z" });
    const redis = app.redis;
    const send = redis.sendCommand;
    try {
      const big = (value: number, tz?: string) => ({ key: "lessons", user: { id: "big", ...(tz ? { tz } : {}) }, value });
      expect(await batch(Array(9).fill(big(1e9)), app)).toEqual({ status: 202, body: { accepted: 9, rejected: [] } });
      // Event 0 leaves the total's range (422); Redis reaches its maxmemory with its reply. Event 1
      // sends a zone after event 0 sent none, so it waits for event 0's reply: refused at maxmemory.
      let armed = true;
      redis.sendCommand = ((command: Command, stream?: unknown) => {
        const sent = send.call(redis, command, stream as never) as Promise<unknown>;
        if (command.name.toLowerCase() !== "fcall" || !armed) return sent;
        armed = false;
        return sent.then(async (reply) => {
          await send.call(redis, new (command.constructor as typeof Command)("config", ["SET", "maxmemory", "1"]));
          return reply;
        });
      }) as Redis["sendCommand"];
      const events = [big(1e9), big(-1, "UTC"), { key: "lessons", user: { id: "small" }, value: 1 }];
      const oom = "Redis is out of memory (maxmemory) and refused this write; nothing was recorded";
      // A 5xx, which the SDK retries: every event again, none having been recorded.
      expect(await batch(events, app)).toEqual({ status: 503, body: { error: `body[1]: ${oom}` } });
      redis.sendCommand = send;
      await redis.config("SET", "maxmemory", "0");
      expect(await batch(events, app)).toEqual({ status: 202, body: { accepted: 2, rejected: [{ index: 0, status: 422, error: "Metric total would leave the supported range" }] } });
    } finally {
      redis.sendCommand = send;
      await close();
    }
  });

  it("sends nothing once stopped, even when memory is freed before the next event would go", async () => {
    const { t: app, close } = await startAppOnOwnRedis({ yaml: demoConfig().yaml, manualClock: "2026-11-27T12:00:00Z" });
    const redis = app.redis;
    const send = redis.sendCommand;
    try {
      // The first BATCH_IN_FLIGHT events go out together and Redis, at its maxmemory, refuses
      // them all; memory is freed as the first refusal comes back, before the batch handles it.
      // The batch stopped there: the events after those in flight are not sent, though Redis
      // would take them now.
      await redis.config("SET", "maxmemory", "1");
      let freed = false;
      redis.sendCommand = ((command: Command, stream?: unknown) => {
        const sent = send.call(redis, command, stream as never) as Promise<unknown>;
        if (command.name.toLowerCase() !== "fcall") return sent;
        return sent.catch(async (err: unknown) => {
          if (!freed) {
            freed = true;
            await send.call(redis, new (command.constructor as typeof Command)("config", ["SET", "maxmemory", "0"]));
          }
          throw err;
        });
      }) as Redis["sendCommand"];
      const events = Array.from({ length: BATCH_IN_FLIGHT + 4 }, () => ({ key: "lessons", user: { id: "stopped" }, value: 1 }));
      const res = await batch(events, app);
      expect(freed).toBe(true);
      expect(res).toEqual({ status: 503, body: { error: "body[0]: Redis is out of memory (maxmemory) and refused this write; nothing was recorded" } });
      redis.sendCommand = send;
      expect((await app.call("GET", "/v1/users/stopped/metrics/lessons")).status).toBe(404);
    } finally {
      redis.sendCommand = send;
      await close();
    }
  });

  it("stops: the events Redis ran before are recorded, those it refused listed with its 503, the rest as not sent", async () => {
    const lines: Array<{ level: number; msg: string }> = [];
    const logger = pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const { t: app, close } = await startAppOnOwnRedis({ yaml: demoConfig().yaml, manualClock: "2026-11-27T12:00:00Z", logger });
    const redis = app.redis;
    const send = redis.sendCommand;
    try {
      const events = Array.from({ length: 3 * BATCH_IN_FLIGHT + 6 }, (_, i) => ({ key: "lessons", user: { id: `oom-${i % 7}` }, value: 1 }));
      // Redis reaches its maxmemory when the 32nd reply comes back. A real Redis refusing real
      // writes; only the moment is chosen. Calls sent before the CONFIG SET run before it (one
      // connection, in order), how many depends on how the replies arrive: the test holds what
      // must be true whatever that number.
      let replies = 0;
      redis.sendCommand = ((command: Command, stream?: unknown) => {
        const sent = send.call(redis, command, stream as never) as Promise<unknown>;
        if (command.name.toLowerCase() !== "fcall") return sent;
        return sent.then(async (reply) => {
          if (++replies === BATCH_IN_FLIGHT) await send.call(redis, new (command.constructor as typeof Command)("config", ["SET", "maxmemory", "1"]));
          return reply;
        });
      }) as Redis["sendCommand"];
      const oom = "Redis is out of memory (maxmemory) and refused this write; nothing was recorded";
      const res = await app.call("POST", PATH, events, ADMIN);
      expect(res.status).toBe(202);
      // Redis ran the calls in the batch's order: the first `accepted` events were recorded,
      // then it refused every one after the CONFIG SET, and the batch sent no more.
      const accepted: number = res.body.accepted;
      expect(accepted).toBeGreaterThanOrEqual(BATCH_IN_FLIGHT);
      const rejected: Array<{ index: number; status: number; error: string }> = res.body.rejected;
      expect(rejected.map((r) => r.index)).toEqual(Array.from({ length: events.length - accepted }, (_, k) => accepted + k));
      const refused = rejected.filter((r) => r.error === oom).length;
      expect(refused).toBeGreaterThanOrEqual(1);
      expect(refused).toBeLessThanOrEqual(BATCH_IN_FLIGHT);
      expect(rejected).toEqual([
        ...Array.from({ length: refused }, (_, k) => ({ index: accepted + k, status: 503, error: oom })),
        ...Array.from({ length: events.length - accepted - refused }, (_, k) => ({
          index: accepted + refused + k,
          status: 503,
          error: `Not sent: the batch stopped when event ${accepted} failed; send it again`,
        })),
      ]);
      expect(events.length - accepted - refused).toBeGreaterThan(0);
      redis.sendCommand = send;
      // Nothing recorded at all: the first failure's 503, which the SDK retries.
      expect(await app.call("POST", PATH, events.slice(0, 3), ADMIN)).toEqual({ status: 503, body: { error: `body[0]: ${oom}` } });
      // Logged by the router's own throttle for writes refused at maxmemory: once per 30 s for
      // the app, however many events of how many batches Redis refused.
      expect(await app.call("POST", "/v1/metrics/lessons/event", { user: { id: "oom-0" }, value: 1 })).toMatchObject({ status: 503 });
      expect(lines.filter((l) => l.msg.includes("out of memory"))).toEqual([expect.objectContaining({ level: 50, msg: "redis is out of memory (maxmemory): writes are refused", unlogged: 0 })]);
      await redis.config("SET", "maxmemory", "0");
      const totals = await Promise.all(Array.from({ length: 7 }, (_, u) => app.call("GET", `/v1/users/oom-${u}/metrics/lessons`)));
      // Exactly the first `accepted` events (event i went to user i mod 7).
      expect(totals.map((r) => r.body.current ?? 0)).toEqual(Array.from({ length: 7 }, (_, u) => Math.ceil((accepted - u) / 7)));
    } finally {
      redis.sendCommand = send;
      await close();
    }
  });
});
