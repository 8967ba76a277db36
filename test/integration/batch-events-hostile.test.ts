import { connect } from "node:net";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BATCH_IN_FLIGHT } from "../../src/api/batch-events.js";
import { demoConfig, dumpTenant, startAppOnOwnRedis, startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { connectionRefused } from "../helpers/ports.js";
import { startTestRedis } from "../helpers/redis-server.js";
import { waitFor } from "../helpers/service-process.js";
import { lessonsTenantYaml, MILESTONES } from "../helpers/tenant-yaml.js";

// POST /admin/v1/metrics/events against what a hostile or careless client sends (README: the
// batch of events). batch-events.test.ts holds the batch's own rules; these are the inputs around
// them: every refusal is a plain {"error"} with the event route's status and writes nothing.

const PATH = "/admin/v1/metrics/events";
const ADMIN = { "x-api-key": "demo-admin-key" };
/** The batch's body limit with the default event route's 64 KiB (app.ts: BATCH_BODY_FACTOR). */
const LIMIT = 16 * 64 * 1024;

let t: TestApp;
let tenantId: string;
/** A second tenant in the same file, with its own keys and only the lessons metric. */
let otherId: string;

beforeAll(async () => {
  const config = demoConfig();
  tenantId = config.tenantId;
  otherId = uniqueTenantId();
  const yaml = `${config.yaml}  - id: ${otherId}\n    apiKeys: [other-key]\n    adminKeys: [other-admin-key]\n    metrics:\n      - key: lessons\n        name: Lessons\n`;
  t = await startTestApp({ yaml, manualClock: "2026-11-27T12:00:00Z", jobs: false });
});
afterAll(() => t?.close());

const ok = { key: "lessons", user: { id: "hostile" }, value: 1 };

/** One request on its own connection, written as given (chunks, raw bytes); the whole answer as text. */
function rawRequest(port: number, parts: (string | Buffer)[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let received = "";
    socket.on("data", (chunk) => {
      received += chunk.toString("latin1");
      const end = received.indexOf("\r\n\r\n");
      const length = /\r\ncontent-length: *(\d+)/i.exec(received.slice(0, end));
      if (end >= 0 && length && received.length >= end + 4 + Number(length[1])) socket.destroy();
    });
    socket.on("close", () => resolve(received));
    socket.on("error", reject);
    for (const part of parts) socket.write(part);
  });
}

/** `text` in chunks of `size` bytes, as Transfer-Encoding: chunked sends it (ASCII text only). */
function chunked(text: string, size: number): string[] {
  const parts: string[] = [];
  for (let i = 0; i < text.length; i += size) {
    const part = text.slice(i, i + size);
    parts.push(`${part.length.toString(16)}\r\n${part}\r\n`);
  }
  return [...parts, "0\r\n\r\n"];
}


/** The status line and the JSON body of a raw answer. */
function parseAnswer(answer: string): { status: number; body: unknown } {
  return { status: Number(answer.split(" ")[1]), body: JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) };
}

describe("a hostile batch is refused with a plain error and records nothing", () => {
  const cases: Array<[string, unknown, number, string | RegExp]> = [
    ["null", "null", 400, "body must be a JSON array (got null)"],
    ["a null event", "[null]", 400, /^body\[0\] must be /],
    ["a number for an event", [ok, 1], 400, /^body\[1\] must be /],
    ["a null user", [{ ...ok, user: null }], 400, /^body\[0\]\.user must be /],
    ["a user id that is a number", [{ ...ok, user: { id: 5 } }], 400, "body[0].user.id must be string (got 5)"],
    ["a null value", [{ ...ok, value: null }], 400, "body[0].value must be number (got null)"],
    ["a boolean value", [{ ...ok, value: true }], 400, "body[0].value must be number (got true)"],
    ["a null metric key", [{ ...ok, key: null }], 400, "body[0].key must be string (got null)"],
    ["attributes as an array", [{ ...ok, attributes: [] }], 400, /^body\[0\]\.attributes must be /],
    ["an attribute that is a number", [{ ...ok, attributes: { source: 1 } }], 400, "body[0].attributes.source must be string (got 1)"],
    ["an idempotency key that is a number", [{ ...ok, idempotencyKey: 5 }], 400, /^body\[0\]\.idempotencyKey must be /],
    ["a __proto__ field", '[{"key":"lessons","user":{"id":"hostile"},"value":1,"__proto__":{"value":2}}]', 400, "body[0].__proto__ is not a known field"],
    ["a __proto__ attribute", '[{"key":"lessons","user":{"id":"hostile"},"value":1,"attributes":{"__proto__":"x"}}]', 422, "body[0]: Invalid attribute keys: __proto__"],
    // JSON.parse keeps a repeated key's last value, as the event route reads its body.
    ["a metric key repeated, the last unknown", '[{"key":"lessons","key":"nope","user":{"id":"hostile"},"value":1}]', 404, "body[0]: Metric not found: nope"],
    // Lone surrogates (JSON can escape them): refused, and quoted as U+FFFD or escaped text, so the message is valid Unicode.
    ["a lone surrogate in a user id", '[{"key":"lessons","user":{"id":"a\\ud800"},"value":1}]', 400, "body[0]: user.id must be 1-255 characters without control characters or surrounding spaces"],
    ["a lone surrogate in a metric key", '[{"key":"lessons\\ud800","user":{"id":"hostile"},"value":1}]', 404, "body[0]: Metric not found: lessons\uFFFD"],
    ["a lone surrogate as an attribute key", '[{"key":"lessons","user":{"id":"hostile"},"value":1,"attributes":{"\\udc00":"x"}}]', 422, "body[0]: Invalid attribute keys: \uFFFD"],
    ["a lone surrogate in an attribute value", '[{"key":"lessons","user":{"id":"hostile"},"value":1,"attributes":{"source":"\\ud800"}}]', 422, "body[0]: attributes.source must be at most 1000 characters without control characters"],
    ["a lone surrogate in an idempotency key", '[{"key":"lessons","user":{"id":"hostile"},"value":1,"idempotencyKey":"k\\ud800"}]', 400, "body[0]: idempotencyKey must be 1-255 visible ASCII characters or spaces"],
    ["a lone surrogate as a zone", '[{"key":"lessons","user":{"id":"hostile","tz":"\\ud800"},"value":1}]', 422, 'body[0]: Unknown IANA time zone: "\\ud800"'],
    ["a lone surrogate as a field name", '[{"key":"lessons","user":{"id":"hostile"},"value":1,"\\ud800":1}]', 400, 'body[0]["\\ud800"] is not a known field'],
    // Checked whole first: the last of 1000 refuses the 999 before it.
    ["999 good events and a bad zone", [...Array(999).fill(ok), { ...ok, user: { id: "hostile", tz: "Mars/Olympus" } }], 422, 'body[999]: Unknown IANA time zone: "Mars/Olympus"'],
    // The other tenant has no api-calls metric: the batch is the key's tenant's.
    ["another tenant's admin key, with a metric that tenant lacks", [ok, { ...ok, key: "api-calls" }], 404, "body[1]: Metric not found: api-calls"],
  ];
  it.each(cases)("%s", async (name, body, status, error) => {
    const headers = name.startsWith("another tenant") ? { "x-api-key": "other-admin-key" } : ADMIN;
    const [before, otherBefore] = [await dumpTenant(t.redis, tenantId), await dumpTenant(t.redis, otherId)];
    const res = await t.call("POST", PATH, body, headers);
    expect(res.status).toBe(status);
    expect(Object.keys(res.body)).toEqual(["error"]);
    expect((res.body.error as string).isWellFormed()).toBe(true);
    if (typeof error === "string") expect(res.body.error).toBe(error);
    else expect(res.body.error).toMatch(error);
    expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
    expect(await dumpTenant(t.redis, otherId)).toEqual(otherBefore);
  });

  const headerCases: Array<[string, Record<string, string>, number, string]> = [
    ["the event route's key", { "x-api-key": "demo-key" }, 401, "Missing or invalid API key"],
    ["another tenant's event key", { "x-api-key": "other-key" }, 401, "Missing or invalid API key"],
    ["Content-Type text/plain", { ...ADMIN, "content-type": "text/plain" }, 415, "Content-Type must be application/json"],
    ["a charset other than UTF-8", { ...ADMIN, "content-type": "application/json; charset=iso-8859-1" }, 415, "Content-Type charset must be utf-8"],
    ["Content-Encoding gzip", { ...ADMIN, "content-encoding": "gzip" }, 415, 'Content-Encoding "gzip" is not supported: send the body uncompressed'],
  ];
  it.each(headerCases)("%s", async (_name, headers, status, error) => {
    const [before, otherBefore] = [await dumpTenant(t.redis, tenantId), await dumpTenant(t.redis, otherId)];
    expect(await t.call("POST", PATH, [ok], headers)).toEqual({ status, body: { error } });
    expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
    expect(await dumpTenant(t.redis, otherId)).toEqual(otherBefore);
  });

  it("a body that is not UTF-8: 400", async () => {
    const before = await dumpTenant(t.redis, tenantId);
    const body = Buffer.concat([Buffer.from('[{"key":"lessons","user":{"id":"a'), Buffer.from([0xff]), Buffer.from('"},"value":1}]')]);
    const head = `POST ${PATH} HTTP/1.1\r\nHost: x\r\nx-api-key: demo-admin-key\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`;
    expect(parseAnswer(await rawRequest(t.app.port, [Buffer.concat([Buffer.from(head), body])]))).toEqual({ status: 400, body: { error: "Request body is not valid UTF-8" } });
    expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
  });
});

describe("the body limit, 16 times the event route's", () => {
  /** One event padded with spaces after the array to `size` bytes. */
  const padded = (id: string, size: number): string => {
    const text = JSON.stringify([{ key: "lessons", user: { id }, value: 1 }]);
    return text + " ".repeat(size - text.length);
  };
  const tooLarge = { status: 413, body: { error: `Request body larger than ${LIMIT} bytes` } };

  it("takes a body of exactly the limit and refuses one byte more, with a Content-Length", async () => {
    expect(await t.call("POST", PATH, padded("at-limit", LIMIT), ADMIN)).toEqual({ status: 202, body: { accepted: 1, rejected: [] } });
    const before = await dumpTenant(t.redis, tenantId);
    expect(await t.call("POST", PATH, padded("past-limit", LIMIT + 1), ADMIN)).toEqual(tooLarge);
    expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
  });

  it("the same for a chunked body (the limit counted as chunks arrive)", async () => {
    const head = `POST ${PATH} HTTP/1.1\r\nHost: x\r\nx-api-key: demo-admin-key\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n`;
    const send = (text: string) => rawRequest(t.app.port, [head, ...chunked(text, 100_000)]).then(parseAnswer);
    expect(await send(padded("chunked-at-limit", LIMIT))).toEqual({ status: 202, body: { accepted: 1, rejected: [] } });
    const before = await dumpTenant(t.redis, tenantId);
    expect(await send(padded("chunked-past-limit", LIMIT + 1))).toEqual(tooLarge);
    expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
    expect((await t.call("GET", "/v1/users/chunked-at-limit/metrics/lessons")).body.current).toBe(1);
  });
});

describe("another tenant's admin key", () => {
  it("records in that tenant only", async () => {
    const before = await dumpTenant(t.redis, tenantId);
    const events = [{ key: "lessons", user: { id: "cross-tenant" }, value: 3 }];
    expect(await t.call("POST", PATH, events, { "x-api-key": "other-admin-key" })).toEqual({ status: 202, body: { accepted: 1, rejected: [] } });
    expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
    expect((await t.call("GET", "/v1/users/cross-tenant/metrics/lessons", undefined, { "x-api-key": "other-key" })).body.current).toBe(3);
    expect((await t.call("GET", "/v1/users/cross-tenant/metrics/lessons")).status).toBe(404);
  });
});

describe("values, users and keys in bulk", () => {
  it("records negative and decimal values as the event route does, and 1000 events of one user", async () => {
    const values = [-2.5, 0.1234567, 1e-7, 3, -0.000001];
    const res = await t.call("POST", PATH, values.map((value) => ({ key: "api-calls", user: { id: "decimals" }, value })), ADMIN);
    expect(res).toEqual({ status: 202, body: { accepted: 5, rejected: [] } });
    for (const value of values) {
      expect((await t.call("POST", "/v1/metrics/api-calls/event", { user: { id: "decimals-route" }, value })).status).toBe(201);
    }
    const batchTotal = (await t.call("GET", "/v1/users/decimals/metrics/api-calls")).body.current;
    expect(batchTotal).toBe((await t.call("GET", "/v1/users/decimals-route/metrics/api-calls")).body.current);
    // Rounded at the sixth decimal: 0.1234567 is 0.123457, 1e-7 is 0.
    expect(batchTotal).toBeCloseTo(0.623456, 9);

    const many = Array.from({ length: 1000 }, (_, i) => ({ key: "lessons", user: { id: "one-user" }, value: 1, idempotencyKey: `k-${i % 400}` }));
    expect(await t.call("POST", PATH, many, ADMIN)).toEqual({ status: 202, body: { accepted: 1000, rejected: [] } });
    // 400 keys, each repeated: the repeats are replays.
    expect((await t.call("GET", "/v1/users/one-user/metrics/lessons")).body.current).toBe(400);
  });

  it("records 1000 distinct users", async () => {
    const events = Array.from({ length: 1000 }, (_, i) => ({ key: i % 2 ? "lessons" : "api-calls", user: { id: `many-${i}`, tz: "Europe/Paris" }, value: 2 }));
    expect(await t.call("POST", PATH, events, ADMIN)).toEqual({ status: 202, body: { accepted: 1000, rejected: [] } });
    const reads = await Promise.all([0, 1, 998, 999].map((i) => t.call("GET", `/v1/users/many-${i}/metrics/${i % 2 ? "lessons" : "api-calls"}`)));
    expect(reads.map((r) => r.body.current)).toEqual([2, 2, 2, 2]);
  });
});

describe("a user whose stored zone this process has not cached (the zone check's retry)", () => {
  it("keeps the user's events in the batch's order: the later one's name stays, the first one's idempotency key and value count", async () => {
    // Another process on the same Redis stores the users' zone: this one has not cached it, so an
    // event without tz is sent on UTC, refused by the script, and sent again on Tokyo.
    const config = demoConfig();
    const batcher = await startTestApp({ yaml: config.yaml, manualClock: "2026-11-27T12:00:00Z", jobs: false });
    const identifier = await startTestApp({ yaml: config.yaml, manualClock: "2026-11-27T12:00:00Z", jobs: false });
    try {
      for (const id of ["zone-a", "zone-b"]) expect((await identifier.call("PUT", `/v1/users/${id}`, { tz: "Asia/Tokyo", name: "before" })).status).toBe(200);
      const events = [
        { key: "lessons", user: { id: "zone-a", name: "first" }, value: 1 },
        { key: "lessons", user: { id: "zone-a", tz: "Asia/Tokyo", name: "second" }, value: 1 },
        { key: "lessons", user: { id: "zone-b" }, value: 5, idempotencyKey: "once" },
        { key: "lessons", user: { id: "zone-b", tz: "Asia/Tokyo" }, value: 1, idempotencyKey: "once" },
      ];
      expect(await batcher.call("POST", PATH, events, ADMIN)).toEqual({ status: 202, body: { accepted: 4, rejected: [] } });
      // Sent one by one: the second event's name is the last written; the first event took the key, the second is its replay.
      expect((await batcher.call("GET", "/v1/users/zone-a")).body.name).toBe("second");
      expect((await batcher.call("GET", "/v1/users/zone-a/metrics/lessons")).body.current).toBe(2);
      expect((await batcher.call("GET", "/v1/users/zone-b/metrics/lessons")).body.current).toBe(5);
    } finally {
      await batcher.close();
      await identifier.close();
    }
  });
});

describe("stream records", () => {
  it("a batch appends the records and hook records the same events append sent one by one to the event route", async () => {
    // A tenant with an endpoint (nothing delivers: no jobs), so the hook stream {t:s}:xh is written too.
    const id = uniqueTenantId();
    const yaml = lessonsTenantYaml(id, { url: "http://127.0.0.1:9/hooks", events: MILESTONES });
    const a = await startTestApp({ yaml, manualClock: "2026-11-27T12:00:00Z", jobs: false });
    const b = await startAppOnOwnRedis({ yaml, manualClock: "2026-11-27T12:00:00Z" });
    try {
      const events = Array.from({ length: 3 * BATCH_IN_FLIGHT + 5 }, (_, i) => ({ key: "lessons", user: { id: `s-${i % 9}`, ...(i < 9 ? { tz: "Europe/Paris" } : {}) }, value: 1 }));
      expect(await a.call("POST", PATH, events, ADMIN)).toEqual({ status: 202, body: { accepted: events.length, rejected: [] } });
      for (const { key, ...body } of events) expect((await b.t.call("POST", `/v1/metrics/${key}/event`, body)).status).toBe(201);
      // dumpTenant gives a stream as its length.
      const streams = async (app: TestApp) => Object.fromEntries(Object.entries(await dumpTenant(app.redis, id)).filter(([key]) => /:xh?$/.test(key)));
      const fromBatch = await streams(a);
      expect(fromBatch).toEqual(await streams(b.t));
      expect(fromBatch[`{${id}:0}:x`]).toBe(events.length);
      // The first lesson of each of the 9 users: streak.started, achievement.completed and points.level_changed at least.
      expect(fromBatch[`{${id}:0}:xh`]).toBeGreaterThanOrEqual(9);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe("a graceful stop during a batch", () => {
  it("answers the whole batch before it closes the connections", async () => {
    const server = await startTestRedis();
    const observer = new Redis(server.url);
    const id = uniqueTenantId();
    // No boards, time triggers or jobs: the only script calls held are the batch's.
    const app = await startTestApp({ yaml: lessonsTenantYaml(id), redisUrl: server.url, manualClock: "2026-11-27T12:00:00Z", jobs: false });
    try {
      const events = Array.from({ length: 3 * BATCH_IN_FLIGHT }, (_, i) => ({ key: "lessons", user: { id: `stop-${i % 5}` }, value: 1 }));
      await observer.client("PAUSE", 3_600_000, "WRITE");
      const answer = app.call("POST", PATH, events, ADMIN);
      answer.catch(() => undefined); // awaited below
      // The first calls are held inside Redis when the stop begins.
      await waitFor(async () => /flags=b\b.*cmd=fcall/.test(String(await observer.client("LIST"))), "the batch's calls held by Redis");
      let closed = false;
      const closing = app.app.close().then(() => (closed = true));
      // The stop has begun (its listen socket is closed), and it waits: Redis holds the batch.
      await waitFor(() => connectionRefused(app.app.port), "new connections to be refused");
      expect(closed).toBe(false);
      await observer.client("UNPAUSE");
      expect(await answer).toEqual({ status: 202, body: { accepted: events.length, rejected: [] } });
      await closing;
      // Every event ran, those sent after the stop began included: a record per event (one shard).
      expect(await observer.xlen(`{${id}:0}:x`)).toBe(events.length);
    } finally {
      await observer.client("UNPAUSE").catch(() => undefined);
      observer.disconnect();
      await app.redis.quit();
      await server.stop();
    }
  });
});
