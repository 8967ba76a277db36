import { createHash } from "node:crypto";
import { connect } from "node:net";
import { gzipSync } from "node:zlib";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEMO_YAML, demoConfig, dumpTenant, startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";

/**
 * Hostile and careless clients. Every refusal must carry exactly `{"error": "<message>"}` (the
 * SDK turns any other body into a ParseError, trophy-compat §1.5) and must write nothing: each
 * case compares a dump of the tenant's keys before and after.
 */

let t: TestApp;
let tenantId: string;

beforeAll(async () => {
  const config = demoConfig();
  tenantId = config.tenantId;
  // No background jobs: the time-trigger backfill writes its mark ({t}:time-scheduled) after the
  // start, whenever it runs, and a refusal's before/after dump of the tenant would race it.
  t = await startTestApp({ yaml: config.yaml, manualClock: "2026-03-02T12:00:00Z", jobs: false });
  // An existing user, so that a partial write to a known user would show in the dump too.
  const seed = await event({ user: { id: "seed", tz: "Europe/Paris" }, value: 1 });
  expect(seed.status).toBe(201);
  expect(Object.keys(await dumpTenant(t.redis, tenantId)).some((key) => key.endsWith(":u:seed"))).toBe(true);
});
afterAll(async () => t.close());

interface Reply {
  status: number;
  body: unknown;
}

/** fetch with nothing added: no default key, no default content type. */
async function raw(url: string, init: RequestInit & { duplex?: "half" } = {}): Promise<Reply> {
  const res = await fetch(url, init);
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* keep the text: the assertion on the body shape will show it */
  }
  return { status: res.status, body };
}

/**
 * Writes `request` as raw bytes on one connection and resolves with everything the server sent
 * once it closes the connection: for what fetch cannot do (a body announced and never sent,
 * bytes after a refused request). With `halfClose` the client then ends its side, so that a
 * server still waiting for the rest of a body closes the connection instead of waiting for ever:
 * the answer it gave before the end of the body is all there is.
 */
function exchange(url: string, request: string | Buffer, { halfClose = false } = {}): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(Number(new URL(url).port), "127.0.0.1");
    let text = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => (text += chunk));
    // A reset after the answer (the server closing with our bytes unread) ends the exchange too.
    socket.on("error", () => socket.destroy());
    socket.on("close", () => resolve(text));
    if (halfClose) socket.end(request);
    else socket.write(request);
  });
}

function event(body: unknown, headers: Record<string, string> = {}, metric = "lessons"): Promise<Reply> {
  return t.call("POST", `/v1/metrics/${metric}/event`, body, headers);
}

function expectErrorBody(reply: Reply, status: number): string {
  expect(reply.status, JSON.stringify(reply.body)).toBe(status);
  expect(reply.body).toEqual({ error: expect.any(String) });
  const message = (reply.body as { error: string }).error;
  expect(message.trim().length).toBeGreaterThan(0);
  return message;
}

/** Runs a request that must be refused with `status`, and checks the tenant's data is untouched. */
async function refused(status: number, send: () => Promise<Reply>, app: TestApp = t, tenant = tenantId): Promise<string> {
  const before = await dumpTenant(app.redis, tenant);
  expect(Object.keys(before).length).toBeGreaterThan(0);
  const reply = await send();
  const message = expectErrorBody(reply, status);
  expect(await dumpTenant(app.redis, tenant)).toEqual(before);
  return message;
}

describe("malformed bodies (400)", () => {
  it.each([
    ["truncated JSON", '{"user": {"id": "seed"}, "value": '],
    ["trailing garbage", '{"user": {"id": "seed"}, "value": 1} x'],
    ["single quotes", "{'user': {'id': 'seed'}, 'value': 1}"],
    ["an empty body", ""],
    ["whitespace only", "   "],
    ["a JSON array", JSON.stringify([{ user: { id: "seed" }, value: 1 }])],
    ["a JSON string", JSON.stringify("hello")],
    ["JSON null", "null"],
    ["a JSON number", "1"],
  ])("refuses %s", async (_name, body) => {
    await refused(400, () => event(body));
  });

  it("refuses a POST with no body and no content type", async () => {
    await refused(400, () => raw(`${t.url}/v1/metrics/lessons/event`, { method: "POST", headers: { "x-api-key": t.apiKey } }));
  });

  it.each([
    ["value as a string", { user: { id: "seed" }, value: "1" }],
    ["value missing", { user: { id: "seed" } }],
    ["value null", { user: { id: "seed" }, value: null }],
    ["value a boolean", { user: { id: "seed" }, value: true }],
    ["user missing", { value: 1 }],
    ["user a string", { user: "seed", value: 1 }],
    ["user.id missing", { user: { email: "a@example.com" }, value: 1 }],
    ["user.id a number", { user: { id: 42 }, value: 1 }],
    ["user.id null", { user: { id: null }, value: 1 }],
    ["user.id empty", { user: { id: "" }, value: 1 }],
    ["user.id of 300 characters", { user: { id: "u".repeat(300) }, value: 1 }],
    ["user.id of 256 characters", { user: { id: "u".repeat(256) }, value: 1 }],
    ["user.id of 256 emoji", { user: { id: "\u{1F600}".repeat(256) }, value: 1 }],
    ["user.id with a C1 control character", { user: { id: "se\u0085ed" }, value: 1 }],
    ["user.id with a control character", { user: { id: "se\u0001ed" }, value: 1 }],
    ["user.id with a newline", { user: { id: "seed\n" }, value: 1 }],
    ["user.id with a lone surrogate", { user: { id: "seed\ud800" }, value: 1 }],
    ["user.id with surrounding spaces", { user: { id: " seed " }, value: 1 }],
    ["an unknown top-level key", { user: { id: "seed" }, value: 1, extra: true }],
    ["an unknown user key (timezone instead of tz)", { user: { id: "seed", timezone: "UTC" }, value: 1 }],
    ["attributes that are not strings", { user: { id: "seed" }, value: 1, attributes: { source: 1 } }],
    ["deviceTokens that is not an array", { user: { id: "seed", deviceTokens: "tok" }, value: 1 }],
  ])("refuses %s", async (_name, body) => {
    await refused(400, () => event(body));
  });

  it("counts a user id's length in characters (code points): 255 of them, emoji or not", async () => {
    for (const id of ["u".repeat(255), "\u{1F600}".repeat(255), `${"\u{1F600}".repeat(200)}${"u".repeat(55)}`]) {
      const res = await event({ user: { id }, value: 1 });
      expect(res.status, `${id.length} units`).toBe(201);
      expect((await t.call("GET", `/v1/users/${encodeURIComponent(id)}/points/xp`)).status).toBe(200);
    }
  });

  it("names the offending field", async () => {
    expect(await refused(400, () => event({ user: { id: "seed" }, value: "1" }))).toMatch(/value/);
    expect(await refused(400, () => event({ user: { id: "seed", timezone: "UTC" }, value: 1 }))).toBe("body.user.timezone is not a known field");
    expect(await refused(400, () => event({ user: { id: "seed" }, value: 1, extra: null }))).toBe("body.extra is not a known field");
    // A key of any length is quoted cut to 200 UTF-16 units of its path (a 60 KB key made a 60 KB message).
    const long = await refused(400, () => event({ user: { id: "seed" }, value: 1, ["x".repeat(60_000)]: 1 }));
    expect(long).toBe(`body.${"x".repeat(195)}… is not a known field`);
  });

  it("reads a body that begins with a byte order mark (RFC 8259 §8.1 lets a parser ignore it), and still refuses one that is not JSON after it", async () => {
    const withBom = await event(`\uFEFF${JSON.stringify({ user: { id: "bom-user" }, value: 1 })}`);
    expect(withBom.status, JSON.stringify(withBom.body)).toBe(201);
    expect(withBom.body).toMatchObject({ total: 1 });
    expect(await refused(400, () => event("\uFEFF{'user': 1}"))).toBe("Malformed JSON body");
    expect(await refused(400, () => event("\uFEFF\uFEFF{}"))).toBe("Malformed JSON body");
  });

  it("takes a key named twice in one object with its last value (README, Errors: decided, not refused)", async () => {
    const twice = await event('{"user": {"id": "first-named"}, "value": 1, "user": {"id": "last-named"}}');
    expect(twice.status, JSON.stringify(twice.body)).toBe(201);
    expect((await t.call("GET", "/v1/users/last-named")).status).toBe(200);
    expect((await t.call("GET", "/v1/users/first-named")).status).toBe(404);
  });

  it("says a body that is not an object is not one", async () => {
    expect(await refused(400, () => event(JSON.stringify([{ user: { id: "seed" }, value: 1 }])))).toBe("body must be a JSON object (got an array)");
    expect(await refused(400, () => event("null"))).toBe("body must be a JSON object (got null)");
    expect(await refused(400, () => event('"hello"'))).toBe('body must be a JSON object (got "hello")');
    expect(await refused(400, () => t.call("POST", "/v1/users", [1]))).toBe("body must be a JSON object (got an array)");
  });

  it("refuses an Idempotency-Key of 300 characters or with a control character", async () => {
    await refused(400, () => event({ user: { id: "seed" }, value: 1 }, { "idempotency-key": "k".repeat(300) }));
    await refused(400, () => event({ user: { id: "seed" }, value: 1 }, { "idempotency-key": "a\tb" }));
  });

  it("refuses an Idempotency-Key with bytes outside ASCII inside it (uWS drops them at its ends, so they cannot be kept)", async () => {
    // fetch sends each character of a header value as one byte: "é" is 0xE9, "Ã©" the UTF-8 of é.
    const message = await refused(400, () => event({ user: { id: "seed" }, value: 1 }, { "idempotency-key": "order-\u00e9-1" }));
    expect(message).toBe("Idempotency-Key must be 1-255 visible ASCII characters or spaces");
    await refused(400, () => event({ user: { id: "seed" }, value: 1 }, { "idempotency-key": "ab\u00c3\u00a9cd" }));
  });

  it("refuses a body nested thousands deep with 400, not 500 (describing it overflowed the stack)", async () => {
    const deep = `${"[".repeat(5000)}${"]".repeat(5000)}`;
    expect(await refused(400, () => event(`{"user":{"id":"seed"},"value":1,"attributes":${deep}}`))).toMatch(/^body\.attributes must be .* \(got a deeply nested array\)$/);
    await refused(400, () => t.call("POST", "/v1/users", `{"id":"newbie","attributes":{"plan":${deep}}}`));
  });
});

describe("well-formed but unacceptable values (422)", () => {
  it("refuses 1e400, which JSON.parse turns into Infinity", async () => {
    await refused(422, () => event('{"user": {"id": "seed"}, "value": 1e400}'));
    await refused(422, () => event('{"user": {"id": "seed"}, "value": -1e400}'));
  });

  it.each([1e9 + 1, -1e9 - 1, 5e12, Number.MAX_VALUE])("refuses |value| > 1e9: %d", async (value) => {
    await refused(422, () => event({ user: { id: "seed" }, value }));
  });

  it("refuses an unknown IANA zone", async () => {
    await refused(422, () => event({ user: { id: "seed", tz: "Mars/Olympus" }, value: 1 }));
    await refused(422, () => event({ user: { id: "newcomer", tz: "Mars/Olympus" }, value: 1 }));
  });

  it("refuses the zone names ICU knows but IANA does not (its legacy three-letter ids, SystemV, dropped links), which put the user elsewhere", async () => {
    // ICU reads "BST" as Asia/Dhaka (not London's summer time), "IST" as Asia/Kolkata, "CST" as
    // America/Chicago, "ART" as Africa/Cairo: taken, a streak ran on another continent's days.
    for (const tz of ["BST", "IST", "ist", "CST", "ART", "ECT", "SystemV/EST5", "US/Pacific-New", "Canada/East-Saskatchewan"]) {
      expect(await refused(422, () => event({ user: { id: "newcomer", tz }, value: 1 })), tz).toBe(`Unknown IANA time zone: ${JSON.stringify(tz)}`);
      await refused(422, () => t.call("PATCH", "/v1/users/seed", { tz }));
    }
    // IANA's own names still pass, links and legacy names among them, in any letter case.
    for (const [tz, stored] of [["EST", "EST"], ["Europe/Kiev", "Europe/Kiev"], ["europe/kyiv", "Europe/Kyiv"], ["Etc/GMT+3", "Etc/GMT+3"], ["GB", "GB"], ["utc", "UTC"]]) {
      expect((await event({ user: { id: "zone-names", tz }, value: 1 })).status, tz).toBe(201);
      expect((await t.call("GET", "/v1/users/zone-names")).body, tz).toMatchObject({ tz: stored });
    }
  });

  it("refuses unknown user attribute keys with the hosted API's message", async () => {
    const message = await refused(422, () => event({ user: { id: "seed", attributes: { plan: "pro", tier: "gold" } }, value: 1 }));
    expect(message.startsWith("Invalid attribute keys:")).toBe(true);
    expect(message).toContain("tier");
    expect(message).not.toContain("plan");
  });

  it("names ten unknown attribute keys at most, each cut to 64 characters, and counts the rest", async () => {
    const attributes = Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`${i === 0 ? "k".repeat(100) : `k${i}`}`, "v"]));
    const message = await refused(422, () => event({ user: { id: "seed", attributes }, value: 1 }));
    expect(message).toBe(`Invalid attribute keys: ${"k".repeat(64)}…, k1, k2, k3, k4, k5, k6, k7, k8, k9 and 1990 more`);
  });

  it("names an unknown attribute key holding a lone surrogate with U+FFFD, so that strict JSON parsers read the message", async () => {
    // JSON.stringify writes a lone surrogate as `\ud800`, which serde_json and the like refuse.
    const wire = async (reply: Promise<Reply>) => JSON.stringify((await reply).body);
    const user = await refused(422, () => event({ user: { id: "seed", attributes: { "k\ud800": "v" } }, value: 1 }));
    expect(user).toBe("Invalid attribute keys: k\uFFFD");
    expect(await refused(422, () => event({ user: { id: "seed" }, value: 1, attributes: { "\udc00k": "v" } }))).toBe("Invalid attribute keys: \uFFFDk");
    expect(await refused(422, () => t.call("PATCH", "/v1/users/seed", { attributes: { [`${"k".repeat(70)}\ud83d`]: "v" } }))).toBe(`Invalid attribute keys: ${"k".repeat(64)}…`);
    expect(await refused(422, () => t.call("POST", "/v1/users", { id: "seed", attributes: { ["k".repeat(63) + "\ud83d"]: "v" } }))).toBe(`Invalid attribute keys: ${"k".repeat(63)}\uFFFD`);
    expect(await wire(event({ user: { id: "seed", attributes: { "k\ud800": "v" } }, value: 1 }))).not.toMatch(/\\ud[89a-f]/i);
  });

  it("names an empty attribute key as \"\" (the message named nothing)", async () => {
    expect(await refused(422, () => event({ user: { id: "seed" }, value: 1, attributes: { "": "web" } }))).toBe('Invalid attribute keys: ""');
  });

  it("refuses unknown event attribute keys", async () => {
    const message = await refused(422, () => event({ user: { id: "seed" }, value: 1, attributes: { source: "web", channel: "ads" } }));
    expect(message.startsWith("Invalid attribute keys:")).toBe(true);
    expect(message).toContain("channel");
  });

  it.each(["not-an-email", "two@@example.com", "spaces in@example.com", ""])("refuses the email %j", async (email) => {
    await refused(422, () => event({ user: { id: "newcomer", email }, value: 1 }));
  });

  it("does not store the Idempotency-Key of a refused event", async () => {
    await refused(422, () => event({ user: { id: "idem-user", tz: "Mars/Olympus" }, value: 1 }, { "idempotency-key": "once" }));
    const ok = await event({ user: { id: "idem-user" }, value: 1 }, { "idempotency-key": "once" });
    expect(ok.status).toBe(201);
    expect(ok.body).toMatchObject({ total: 1, idempotentReplayed: false });
  });

  it("refuses the event that would take a metric total past 9e9, writing nothing", async () => {
    const user = { id: "whale" };
    for (let i = 1; i <= 9; i++) {
      const ok = await event({ user, value: 1e9 });
      expect(ok.status).toBe(201);
      expect((ok.body as { total: number }).total).toBe(i * 1e9);
    }
    await refused(422, () => event({ user, value: 1e9 }));
    await refused(422, () => event({ user, value: 1 }));
    // The bound holds in the negative direction too.
    const minnow = { id: "minnow" };
    for (let i = 1; i <= 9; i++) expect((await event({ user: minnow, value: -1e9 })).status).toBe(201);
    await refused(422, () => event({ user: minnow, value: -0.5 }));
    // Still usable below the bound: the refused events left the total where it was.
    const back = await event({ user, value: -1 });
    expect(back.status).toBe(201);
    expect((back.body as { total: number }).total).toBe(9e9 - 1);
  });
});

describe("authentication (401)", () => {
  const body = JSON.stringify({ user: { id: "seed" }, value: 1 });
  const post = (headers: Record<string, string>) =>
    raw(`${t.url}/v1/metrics/lessons/event`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });

  it("refuses a missing X-API-KEY", async () => {
    await refused(401, () => post({}));
    await refused(401, () => raw(`${t.url}/v1/users/seed/points/xp`));
  });

  it("refuses an empty or wrong key", async () => {
    await refused(401, () => post({ "x-api-key": "" }));
    await refused(401, () => post({ "x-api-key": "demo-key-wrong" }));
    await refused(401, () => post({ "x-api-key": "x".repeat(600) }));
    await refused(401, () => t.call("GET", "/v1/points/xp", undefined, { "x-api-key": "nope-nope" }));
  });

  it("answers the first fault in the README's order: route, content type, size, key, then values", async () => {
    const send = (path: string, headers: Record<string, string>, payload: string) => raw(`${t.url}${path}`, { method: "POST", headers, body: payload });
    const wrongKey = { "x-api-key": "wrong" };
    await refused(404, () => send("/v1/metrics/lessons/nowhere", { ...wrongKey, "content-type": "text/plain" }, "x"));
    await refused(415, () => send("/v1/metrics/lessons/event", { ...wrongKey, "content-type": "application/x-www-form-urlencoded" }, "a=1"));
    await refused(413, () => send("/v1/metrics/lessons/event", { ...wrongKey, "content-type": "application/json" }, "x".repeat(70_000)));
    await refused(401, () => send("/v1/metrics/lessons/event", { ...wrongKey, "content-type": "application/json" }, "{not json"));
    await refused(401, () => send("/v1/metrics/no-such-metric/event", { ...wrongKey, "content-type": "application/json" }, body));
    await refused(404, () => send("/v1/metrics/no-such-metric/event", { "x-api-key": t.apiKey, "content-type": "application/json" }, "{not json"));
  });

  it("refuses the admin key on application routes", async () => {
    await refused(401, () => post({ "x-api-key": t.adminKey }));
    await refused(401, () => t.call("GET", "/v1/users/seed/points/xp", undefined, { "x-api-key": t.adminKey }));
  });

  it("refuses the application key on /admin/v1/clock", async () => {
    await refused(401, () => t.call("GET", "/admin/v1/clock"));
    await refused(401, () => t.call("POST", "/admin/v1/clock", { now: "2030-01-01T00:00:00Z" }));
    // The clock did not move.
    expect(new Date(t.clock.now()).toISOString()).toBe("2026-03-02T12:00:00.000Z");
  });

  it("remembers a verified key by its tag without widening it: each key still opens only its own routes, near misses stay out", async () => {
    // src/tenants.ts: after its first check a key is known by its tag. Each key is used on its
    // own routes first (remembered), then on the other kind, then altered by one character.
    const read = (key: string) => t.call("GET", "/v1/points/xp", undefined, { "x-api-key": key });
    const adminRead = (key: string) => t.call("GET", "/admin/v1/clock", undefined, { "x-api-key": key });
    for (let i = 0; i < 3; i++) {
      expect((await read(t.apiKey)).status).toBe(200);
      expect((await adminRead(t.adminKey)).status).toBe(200);
      await refused(401, () => adminRead(t.apiKey));
      await refused(401, () => read(t.adminKey));
      for (const key of [t.apiKey, t.adminKey]) {
        await refused(401, () => read(`${key.slice(0, -1)}${key.endsWith("x") ? "y" : "x"}`));
        await refused(401, () => read(`${key}x`));
        await refused(401, () => read(key.toUpperCase()));
      }
    }
  });

  it("checks the key before revealing whether a metric or user exists", async () => {
    await refused(401, () => t.call("POST", "/v1/metrics/no-such-metric/event", { user: { id: "seed" }, value: 1 }, { "x-api-key": "wrong-key" }));
    await refused(401, () => t.call("GET", "/v1/users/nobody/points/xp", undefined, { "x-api-key": "wrong-key" }));
  });
});

describe("unknown things (404)", () => {
  it("refuses an unknown metric", async () => {
    await refused(404, () => event({ user: { id: "seed" }, value: 1 }, {}, "no-such-metric"));
  });

  it("refuses an unknown points system or user on the points read", async () => {
    await refused(404, () => t.call("GET", "/v1/users/seed/points/no-such-system"));
    await refused(404, () => t.call("GET", "/v1/users/nobody/points/xp"));
    await refused(404, () => t.call("GET", "/v1/points/no-such-system"));
  });

  it("quotes an unknown key at most 64 units long, and a lone surrogate as U+FFFD (a 20 KB boost id was quoted whole)", async () => {
    const long = "k".repeat(5000);
    const admin = { "x-api-key": t.adminKey };
    expect(await refused(404, () => event({ user: { id: "seed" }, value: 1 }, {}, long))).toBe(`Metric not found: ${"k".repeat(64)}`);
    expect(await refused(404, () => t.call("GET", `/v1/points/${long}`))).toBe(`Points system not found: ${"k".repeat(64)}`);
    expect(await refused(404, () => t.call("GET", `/v1/leaderboards/${long}`))).toBe(`Leaderboard not found: ${"k".repeat(64)}`);
    expect(await refused(404, () => t.call("DELETE", `/admin/v1/points/xp/boosts/${long}`, undefined, admin))).toBe(`Boost not found: ${"k".repeat(64)}`);
    expect(await refused(404, () => t.call("POST", `/v1/achievements/${long}/complete`, { user: { id: "seed" } }))).toBe(`Achievement not found: ${"k".repeat(64)}`);
    expect(await refused(404, () => t.call("GET", `/admin/v1/webhooks/deliveries/${long}`, undefined, admin))).toBe(`Delivery not found: ${"k".repeat(64)}`);
    expect(await refused(404, () => t.call("POST", `/admin/v1/webhooks/deliveries/${long}/replay`, undefined, admin))).toBe(`Delivery not found: ${"k".repeat(64)}`);
    // A body's string may hold a lone surrogate (JSON escapes it): quoted, it becomes U+FFFD, which strict parsers read.
    const replay = await t.call("POST", "/admin/v1/webhooks/deliveries/replay", { status: "dead", endpoint: "a\ud800" }, admin);
    expect(replay).toEqual({ status: 404, body: { error: "Webhook endpoint not found: a\uFFFD" } });
    // A replay's issues echo the ids sent, a lone surrogate as U+FFFD.
    const byIds = await t.call("POST", "/admin/v1/webhooks/deliveries/replay", { ids: ["d\ud800"] }, admin);
    expect(byIds).toEqual({ status: 200, body: { replayed: [], issues: [{ id: "d\uFFFD", reason: "not found" }] } });
  });

  it("quotes an unknown user id at most 64 units long too (a valid id is up to 255 code points, 510 units, and was quoted whole)", async () => {
    // Not the emoji of the code-point test above, whose user exists.
    const id = "\u{1F9ED}".repeat(255);
    const path = encodeURIComponent(id);
    const expected = `User not found: ${"\u{1F9ED}".repeat(32)}`;
    expect(await refused(404, () => t.call("GET", `/v1/users/${path}/points/xp`))).toBe(expected);
    expect(await refused(404, () => t.call("GET", `/v1/users/${path}`))).toBe(expected);
    expect(await refused(404, () => t.call("PATCH", `/v1/users/${path}`, { name: "x" }))).toBe(expected);
    expect(await refused(404, () => t.call("GET", `/v1/users/${path}/metrics/lessons`))).toBe(expected);
    // 63 units then an emoji: the cut does not leave half of it.
    expect(await refused(404, () => t.call("GET", `/v1/users/${encodeURIComponent(`${"u".repeat(63)}\u{1F600}`)}/points/xp`))).toBe(`User not found: ${"u".repeat(63)}`);
    expect(await refused(404, () => t.call("GET", "/v1/users/nobody/points/xp"))).toBe("User not found: nobody");
  });

  it("answers unknown routes with a JSON 404", async () => {
    await refused(404, () => t.call("GET", "/v1/no-such-route"));
    await refused(404, () => t.call("POST", "/v2/metrics/lessons/event", { user: { id: "seed" }, value: 1 }));
    await refused(404, () => raw(`${t.url}/`));
  });
});

describe("a known path with a method it does not take (405)", () => {
  it.each([
    ["GET", "/v1/metrics/lessons/event", "POST"],
    ["PUT", "/v1/metrics/lessons/event", "POST"],
    ["POST", "/v1/points/xp", "GET, HEAD"],
    ["DELETE", "/v1/users/seed/points/xp", "GET, HEAD"],
    ["PATCH", "/healthz", "GET, HEAD"],
  ])("%s %s: 405 with Allow: %s, and writes nothing", async (method, path, allow) => {
    const before = await dumpTenant(t.redis, tenantId);
    const res = await fetch(`${t.url}${path}`, { method, headers: { "x-api-key": t.apiKey } });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe(allow);
    expect(await res.json()).toEqual({ error: "Method not allowed" });
    expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
  });

  it("lists every method a path is served with", async () => {
    // /v1/users/{id}: GET reads, PATCH and PUT write (the users API).
    const res = await fetch(`${t.url}/v1/users/seed`, { method: "DELETE", headers: { "x-api-key": t.apiKey } });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, HEAD, PATCH, PUT");
  });

  it("answers HEAD without a body, so the connection's next answer is read whole", async () => {
    // One connection, several requests sent at once: a body after a HEAD's headers would be read
    // as the start of the next answer. A GET route answers HEAD as the GET, with its status and
    // headers: the read (200), the read with a wrong key (401); a path served with other methods
    // only, 405; a path no route serves, 404. (Answers that need no Redis: uWS drops requests
    // sent behind one whose answer waits, STACK.md.)
    const head = (path: string, key = t.apiKey) => `HEAD ${path} HTTP/1.1\r\nHost: x\r\nX-API-KEY: ${key}\r\n\r\n`;
    const text = await exchange(
      t.url,
      head("/v1/points/xp") + head("/v1/points/xp", "wrong") + head("/v1/metrics/lessons/event") + head("/nope") +
        `GET /v1/points/xp HTTP/1.1\r\nHost: x\r\nX-API-KEY: ${t.apiKey}\r\nConnection: close\r\n\r\n`,
    );
    const answers = text.split(/(?=HTTP\/1\.1 )/);
    expect(answers.map((a) => a.split("\r\n")[0])).toEqual(["HTTP/1.1 200 OK", "HTTP/1.1 401 Unauthorized", "HTTP/1.1 405 Method Not Allowed", "HTTP/1.1 404 Not Found", "HTTP/1.1 200 OK"]);
    expect(answers[0]).toMatch(/\r\ncontent-type: application\/json\r\n/i);
    expect(answers[2]).toMatch(/\r\nallow: POST\r\n/i);
    for (const answer of answers.slice(0, 4)) expect(answer.endsWith("\r\n\r\n")).toBe(true);
    expect(JSON.parse(answers[4]!.slice(answers[4]!.indexOf("\r\n\r\n") + 4))).toMatchObject({ key: "xp" });
  });

  it("answers HEAD /healthz with the GET's status (uptime monitors check with HEAD), and a user's read likewise", async () => {
    const health = await fetch(`${t.url}/healthz`, { method: "HEAD" });
    expect(health.status).toBe(200);
    expect(await health.text()).toBe("");
    const read = await fetch(`${t.url}/v1/users/seed/points/xp`, { method: "HEAD", headers: { "x-api-key": t.apiKey } });
    expect(read.status).toBe(200);
    expect(read.headers.get("content-type")).toBe("application/json");
    expect(await read.text()).toBe("");
    const unknown = await fetch(`${t.url}/v1/users/nobody-at-all/points/xp`, { method: "HEAD", headers: { "x-api-key": t.apiKey } });
    expect(unknown.status).toBe(404);
  });
});

describe("path parameters (400)", () => {
  it.each([
    ["malformed percent-encoding", "/v1/users/%E0%A4%A/points/xp"],
    ["an encoded control character", "/v1/users/se%01ed/points/xp"],
    ["an encoded lone surrogate half", "/v1/users/%ED%A0%80/points/xp"],
    ["a 300-character id", `/v1/users/${"u".repeat(300)}/points/xp`],
  ])("refuses a user id with %s", async (_name, path) => {
    await refused(400, () => t.call("GET", path));
  });

  it("refuses bytes that are not UTF-8 in a path sent unencoded, as in a body: two ids differing in invalid bytes are not made one", async () => {
    // uWS hands a path's bytes over decoded leniently, each invalid sequence as U+FFFD: "a\xff"
    // and "a\xfe" were both the user "a\uFFFD" (percent-encoded, %FF is refused already).
    expect((await event({ user: { id: "fffd\uFFFD" }, value: 1 })).status).toBe(201);
    const get = (path: Buffer) => Buffer.concat([Buffer.from("GET "), path, Buffer.from(` HTTP/1.1\r\nHost: x\r\nX-API-KEY: ${t.apiKey}\r\nConnection: close\r\n\r\n`)]);
    for (const bytes of [[0xff], [0xfe], [0xed, 0xa0, 0x80], [0xef, 0xbf, 0xbd] /* a U+FFFD sent raw: not told apart, so percent-encode it */]) {
      const path = Buffer.concat([Buffer.from("/v1/users/fffd"), Buffer.from(bytes), Buffer.from("/points/xp")]);
      const before = await dumpTenant(t.redis, tenantId);
      const answer = await exchange(t.url, get(path));
      expect(answer, answer).toMatch(/^HTTP\/1\.1 400 /);
      expect(JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4))).toEqual({ error: "Path is not valid UTF-8 (percent-encode its characters outside ASCII)" });
      expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
    }
    // Percent-encoded, the same character is the user's.
    expect((await t.call("GET", `/v1/users/${encodeURIComponent("fffd\uFFFD")}/points/xp`)).status).toBe(200);
    // Raw UTF-8 that is valid stays taken.
    expect((await event({ user: { id: "raw-\u00e9" }, value: 1 })).status).toBe(201);
    expect(await exchange(t.url, get(Buffer.from("/v1/users/raw-\u00e9/points/xp")))).toMatch(/^HTTP\/1\.1 200 /);
  });

  it("judges the user id in an identify's or update's path before its body, in the README's order of faults", async () => {
    const idMessage = "user id must be 1-255 characters without control characters or surrounding spaces";
    for (const method of ["PATCH", "PUT"]) {
      expect(await refused(400, () => t.call(method, "/v1/users/%20seed", "{not json")), method).toBe(idMessage);
      expect(await refused(400, () => t.call(method, "/v1/users/%20seed", { timezone: "UTC" })), method).toBe(idMessage);
    }
  });

  it("refuses a malformed metric key in the event path", async () => {
    await refused(400, () => t.call("POST", "/v1/metrics/%ZZ/event", { user: { id: "seed" }, value: 1 }));
  });

  it("says which fault a percent-encoded path has: a stray %, or escapes whose bytes are not UTF-8 (as a query's are named)", async () => {
    for (const path of ["/v1/users/%ZZ/points/xp", "/v1/users/%E0%A4%A/points/xp", "/v1/users/a%/points/xp"]) {
      expect(await refused(400, () => t.call("GET", path)), path).toBe("Malformed percent-encoding in path");
    }
    for (const path of ["/v1/users/seed%FF/points/xp", "/v1/users/%C3/points/xp", "/v1/users/%ED%A0%80/points/xp", "/v1/metrics/%FF/event"]) {
      expect(await refused(400, () => t.call(path.endsWith("event") ? "POST" : "GET", path, path.endsWith("event") ? { user: { id: "seed" }, value: 1 } : undefined)), path).toBe(
        "Path is not valid UTF-8 (a percent-encoded sequence is not UTF-8)",
      );
    }
  });
});

describe("query parameters", () => {
  it.each(["0", "101", "-1", "1000000", "99999999999999999999", "-99999999999999999999"])("refuses awards=%s with 422", async (awards) => {
    expect(await refused(422, () => t.call("GET", `/v1/users/seed/points/xp?awards=${awards}`))).toBe("awards must be between 1 and 100");
  });

  it.each(["abc", "1.5", "1e2", "0x10"])("refuses awards=%s with 400", async (awards) => {
    expect(await refused(400, () => t.call("GET", `/v1/users/seed/points/xp?awards=${awards}`))).toBe("awards must be an integer");
  });

  it("refuses names and values that are not UTF-8, percent-encoded or raw, with 400: two ids differing in invalid bytes are not made one", async () => {
    for (const query of ["userIds=seed%FF", "userIds=seed%FE", "userIds=%C3", "userIds=seed&x%ED%A0%80=1"]) {
      expect(await refused(400, () => t.call("GET", `/v1/streaks?${query}`)), query).toBe("Query is not valid UTF-8 (a percent-encoded sequence is not UTF-8)");
    }
    // A route that reads no query refuses one that is not UTF-8 as well, and writes nothing.
    expect(await refused(400, () => t.call("POST", "/v1/metrics/lessons/event?x=%FF", { user: { id: "seed" }, value: 1 }))).toBe("Query is not valid UTF-8 (a percent-encoded sequence is not UTF-8)");
    const get = (target: Buffer) => Buffer.concat([Buffer.from("GET "), target, Buffer.from(` HTTP/1.1\r\nHost: x\r\nX-API-KEY: ${t.apiKey}\r\nConnection: close\r\n\r\n`)]);
    for (const bytes of [[0xff], [0xed, 0xa0, 0x80], [0xef, 0xbf, 0xbd] /* a U+FFFD sent raw: not told apart, so percent-encode it */]) {
      const before = await dumpTenant(t.redis, tenantId);
      const answer = await exchange(t.url, get(Buffer.concat([Buffer.from("/v1/streaks?userIds=seed"), Buffer.from(bytes)])));
      expect(answer, answer).toMatch(/^HTTP\/1\.1 400 /);
      expect(JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4))).toEqual({ error: "Query is not valid UTF-8 (percent-encode its characters outside ASCII)" });
      expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
    }
    // Percent-encoded, U+FFFD is a character like any other; so is é, raw or encoded.
    expect((await event({ user: { id: "q\uFFFD\u00e9" }, value: 1 })).status).toBe(201);
    const streaks = await t.call("GET", `/v1/streaks?userIds=${encodeURIComponent("q\uFFFD\u00e9")}`);
    expect(streaks.status).toBe(200);
    expect(streaks.body).toEqual([expect.objectContaining({ userId: "q\uFFFD\u00e9" })]);
    const rawAnswer = await exchange(t.url, get(Buffer.from("/v1/streaks?userIds=q%EF%BF%BD\u00e9")));
    expect(rawAnswer).toMatch(/^HTTP\/1\.1 200 /);
    expect(JSON.parse(Buffer.from(rawAnswer.slice(rawAnswer.indexOf("\r\n\r\n") + 4), "latin1").toString("utf8"))).toEqual(streaks.body);
  });

  it("accepts the bounds, and an integer written with leading zeros", async () => {
    for (const awards of [1, 100]) expect((await t.call("GET", `/v1/users/seed/points/xp?awards=${awards}`)).status).toBe(200);
    const padded = await t.call("GET", "/v1/users/seed/points/xp?awards=000000000000000000001");
    expect(padded.status).toBe(200);
    expect(padded.body.awards.length).toBeLessThanOrEqual(1);
  });

  it("reads a parameter sent twice by its first value, and one sent empty as not sent", async () => {
    for (let i = 0; i < 3; i++) expect((await event({ user: { id: "twice" }, value: 1 })).status).toBe(201);
    const awards = async (query: string) => (await t.call("GET", `/v1/users/twice/points/xp${query}`)).body.awards.length;
    expect(await awards("?awards=1&awards=3")).toBe(1);
    expect(await awards("?awards=3&awards=101")).toBe(3);
    expect(await awards("?awards=&awards=1")).toBe(await awards(""));
  });

  it("takes a list of exactly its most values and refuses one more, in either form", async () => {
    const ids = (n: number) => Array.from({ length: n }, (_, i) => `list-${i}`);
    const commas = (n: number) => t.call("GET", `/v1/streaks?userIds=${ids(n).join(",")}`);
    const repeated = (n: number) => t.call("GET", `/v1/streaks?${ids(n).map((id) => `userIds=${id}`).join("&")}`);
    for (const send of [commas, repeated]) {
      const most = await send(100);
      expect([most.status, most.body.length]).toEqual([200, 100]);
      expect(await refused(422, () => send(101))).toBe("userIds takes at most 100 values");
    }
  });
});

describe("transport limits", () => {
  it("refuses a form-encoded body with 415", async () => {
    await refused(415, () =>
      raw(`${t.url}/v1/metrics/lessons/event`, {
        method: "POST",
        headers: { "x-api-key": t.apiKey, "content-type": "application/x-www-form-urlencoded" },
        body: "user[id]=seed&value=1",
      }),
    );
    await refused(415, () => event({ user: { id: "seed" }, value: 1 }, { "content-type": "text/plain" }));
    // Answered before its body is read, with Connection: close (README: the body is not parsed as a next request).
    const body = "user[id]=seed&value=1";
    const reply = await exchange(t.url, `POST /v1/metrics/lessons/event HTTP/1.1\r\nHost: x\r\nX-API-KEY: ${t.apiKey}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ${body.length}\r\n\r\n${body}`, { halfClose: true });
    expect(reply).toMatch(/^HTTP\/1\.1 415 /);
    expect(reply).toMatch(/\r\nConnection: close\r\n/i);
  });

  it("takes application/json and application/*+json only, not any type that mentions json", async () => {
    for (const type of ["text/json", "application/jsonp", "application/x-json-stream", "application/json5", "text/plain; profile=json"]) {
      expect(await refused(415, () => event({ user: { id: "seed" }, value: 1 }, { "content-type": type })), type).toBe("Content-Type must be application/json");
    }
    for (const type of ["application/vnd.api+json", "APPLICATION/JSON"]) {
      expect((await event({ user: { id: "type-ok" }, value: 1 }, { "content-type": type })).status, type).toBe(201);
    }
  });

  it("refuses a compressed body (Content-Encoding other than identity) with 415 naming the coding, and takes identity", async () => {
    const body = JSON.stringify({ user: { id: "seed" }, value: 1 });
    const send = (encoding: string, bytes: Buffer | string) =>
      raw(`${t.url}/v1/metrics/lessons/event`, { method: "POST", headers: { "x-api-key": t.apiKey, "content-type": "application/json", "content-encoding": encoding }, body: bytes });
    // The gzip of a valid event: read as sent it was refused as not UTF-8, which hid the cause.
    expect(await refused(415, () => send("gzip", gzipSync(body)))).toBe('Content-Encoding "gzip" is not supported: send the body uncompressed');
    expect(await refused(415, () => send("br", body))).toBe('Content-Encoding "br" is not supported: send the body uncompressed');
    for (const encoding of ["identity", "Identity"]) expect((await send(encoding, body)).status, encoding).toBe(201);
  });

  it("refuses a JSON body declared in a charset other than UTF-8 with 415, and takes utf-8 however it is spelt", async () => {
    expect(await refused(415, () => event({ user: { id: "seed" }, value: 1 }, { "content-type": "application/json; charset=utf-16" }))).toBe("Content-Type charset must be utf-8");
    await refused(415, () => event({ user: { id: "seed" }, value: 1 }, { "content-type": 'application/json;charset="iso-8859-1"' }));
    for (const type of ["application/json; charset=utf-8", "application/json;charset=UTF-8", 'application/json; charset="utf8"']) {
      expect((await event({ user: { id: "charset-ok" }, value: 1 }, { "content-type": type })).status, type).toBe(201);
    }
  });

  describe("with maxBodyBytes 1024", () => {
    let small: TestApp;
    let smallTenant: string;
    beforeAll(async () => {
      const config = demoConfig();
      smallTenant = config.tenantId;
      small = await startTestApp({ yaml: config.yaml, maxBodyBytes: 1024, jobs: false }); // as `t`: no job writes under a dump
      expect((await small.call("POST", "/v1/metrics/lessons/event", { user: { id: "seed" }, value: 1 })).status).toBe(201);
    });
    afterAll(async () => small.close());

    // A 2 KB body that would be a valid event (and be written) if the limit let it through.
    const bigBody = () => JSON.stringify({ user: { id: "seed", deviceTokens: Array.from({ length: 4 }, (_, i) => `${i}`.repeat(500)) }, value: 1 });

    it("refuses a 2 KB body announced by content-length with 413", async () => {
      expect(Buffer.byteLength(bigBody())).toBeGreaterThan(2000);
      await refused(413, () => small.call("POST", "/v1/metrics/lessons/event", bigBody()), small, smallTenant);
    });

    it("refuses a 2 KB chunked body without content-length with 413", async () => {
      const bytes = Buffer.from(bigBody());
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          for (let i = 0; i < bytes.length; i += 512) controller.enqueue(bytes.subarray(i, i + 512));
          controller.close();
        },
      });
      await refused(
        413,
        () =>
          raw(`${small.url}/v1/metrics/lessons/event`, {
            method: "POST",
            headers: { "x-api-key": small.apiKey, "content-type": "application/json" },
            body: stream,
            duplex: "half",
          }),
        small,
        smallTenant,
      );
    });

    /** A valid event of exactly `bytes` bytes (JSON allows trailing white space). */
    const eventOfSize = (bytes: number) => {
      const text = JSON.stringify({ user: { id: "edge" }, value: 1 });
      return text + " ".repeat(bytes - text.length);
    };
    /** An event's bytes sent as two chunks, split `at` bytes in (no content-length: chunked). */
    const postInTwoChunks = (bytes: Buffer, at: number) =>
      raw(`${small.url}/v1/metrics/lessons/event`, {
        method: "POST",
        headers: { "x-api-key": small.apiKey, "content-type": "application/json" },
        body: new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(bytes.subarray(0, at));
            controller.enqueue(bytes.subarray(at));
            controller.close();
          },
        }),
        duplex: "half",
      });
    const chunkedPost = (body: string) => {
      const bytes = Buffer.from(body);
      return raw(`${small.url}/v1/metrics/lessons/event`, {
        method: "POST",
        headers: { "x-api-key": small.apiKey, "content-type": "application/json" },
        body: new ReadableStream<Uint8Array>({
          start(controller) {
            for (let i = 0; i < bytes.length; i += 300) controller.enqueue(bytes.subarray(i, i + 300));
            controller.close();
          },
        }),
        duplex: "half",
      });
    };

    it("takes a body of exactly maxBodyBytes and refuses one byte more, announced or chunked", async () => {
      await refused(413, () => small.call("POST", "/v1/metrics/lessons/event", eventOfSize(1025)), small, smallTenant);
      await refused(413, () => chunkedPost(eventOfSize(1025)), small, smallTenant);
      const announced = await small.call("POST", "/v1/metrics/lessons/event", eventOfSize(1024));
      expect(announced.status, JSON.stringify(announced.body)).toBe(201);
      expect(announced.body).toMatchObject({ total: 1 });
      const chunked = await chunkedPost(eventOfSize(1024));
      expect(chunked.status, JSON.stringify(chunked.body)).toBe(201);
      expect(chunked.body).toMatchObject({ total: 2 });
    });

    it("answers 413 from the announced Content-Length, without waiting for the body, and closes a connection announcing more than 16 MiB", async () => {
      const before = await dumpTenant(small.redis, smallTenant);
      // Headers only: the body is never sent, so an answer can come only from the header. Half
      // closed, so that a server keeping the connection open for the body ends the exchange too:
      // the assertion on Connection: close fails, where the test waited for its timeout.
      const reply = await exchange(
        small.url,
        `POST /v1/metrics/lessons/event HTTP/1.1\r\nHost: x\r\nX-API-KEY: ${small.apiKey}\r\nContent-Type: application/json\r\nContent-Length: ${16 * 1024 * 1024 + 1}\r\n\r\n`,
        { halfClose: true },
      );
      expect(reply).toMatch(/^HTTP\/1\.1 413 /);
      expect(reply).toMatch(/\r\nConnection: close\r\n/i);
      expect(reply).toContain('{"error":"Request body larger than 1024 bytes"}');
      expect(await dumpTenant(small.redis, smallTenant)).toEqual(before);
    });

    it("keeps the connection of a body announced at exactly 16 MiB (read and dropped), closing only past it", async () => {
      // Headers only, half closed: the 413 comes from the header, and a server that means to read
      // the body on says nothing of closing (the one past 16 MiB, above, says Connection: close).
      const reply = await exchange(
        small.url,
        `POST /v1/metrics/lessons/event HTTP/1.1\r\nHost: x\r\nX-API-KEY: ${small.apiKey}\r\nContent-Type: application/json\r\nContent-Length: ${16 * 1024 * 1024}\r\n\r\n`,
        { halfClose: true },
      );
      expect(reply).toMatch(/^HTTP\/1\.1 413 /);
      expect(reply).toContain('{"error":"Request body larger than 1024 bytes"}');
      expect(reply).not.toMatch(/\r\nConnection: close\r\n/i);
    });

    // A body of hundreds of KB, holding the text of requests that must not be served.
    const smuggled = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".repeat(8000);
    const next = `GET /v1/points/xp HTTP/1.1\r\nHost: x\r\nX-API-KEY: ${"demo-key"}\r\nConnection: close\r\n\r\n`;
    const head = (framing: string) => `POST /v1/metrics/lessons/event HTTP/1.1\r\nHost: x\r\nX-API-KEY: demo-key\r\nContent-Type: application/json\r\n${framing}\r\n`;

    it("answers a chunked body that grows past 16 MiB at once, with Connection: close, without waiting for its end", async () => {
      const before = await dumpTenant(small.redis, smallTenant);
      // 16 MiB in chunks, then one byte more and no end: the last byte sent is the one past 16 MiB,
      // so the server has read all there is when it answers (no reset can cut the answer off).
      // A server reading on to the body's end, as it does under 16 MiB, would answer nothing.
      const mib = "x".repeat(1024 * 1024);
      const body = `${mib.length.toString(16)}\r\n${mib}\r\n`.repeat(16) + "1\r\nx";
      const reply = await exchange(small.url, head("Transfer-Encoding: chunked\r\n") + body, { halfClose: true });
      expect(reply).toMatch(/^HTTP\/1\.1 413 /);
      expect(reply).toMatch(/\r\nConnection: close\r\n/i);
      expect(reply).toContain('{"error":"Request body larger than 1024 bytes"}');
      expect(await dumpTenant(small.redis, smallTenant)).toEqual(before);
    });

    it("reads a refused body of hundreds of KB to its end, so the client reads the 413 (not a reset) and the connection serves its next request", async () => {
      // Closed with the upload unread, the connection was reset under the sender: fetch and the
      // SDK saw EPIPE instead of the 413 from ~200 KB on. Now the announced bytes are read and
      // dropped, never as requests, and the request after them is answered.
      const before = await dumpTenant(small.redis, smallTenant);
      const announced = await exchange(small.url, head(`Content-Length: ${smuggled.length}\r\n`) + smuggled + next);
      const chunk = (text: string) => `${text.length.toString(16)}\r\n${text}\r\n`;
      const chunked = await exchange(small.url, head("Transfer-Encoding: chunked\r\n") + chunk(smuggled.slice(0, 100_000)) + chunk(smuggled.slice(100_000)) + "0\r\n\r\n" + next);
      for (const reply of [announced, chunked]) {
        expect(reply.match(/HTTP\/1\.1 \d{3} /g)).toEqual(["HTTP/1.1 413 ", "HTTP/1.1 200 "]);
        expect(reply).toContain('{"error":"Request body larger than 1024 bytes"}');
        expect(reply).toContain('"key":"xp"');
      }
      expect(await dumpTenant(small.redis, smallTenant)).toEqual(before);
    });

    it("still accepts a body under the limit, chunked or not", async () => {
      const ok = await small.call("POST", "/v1/metrics/lessons/event", { user: { id: "seed" }, value: 1 });
      expect(ok.status).toBe(201);
      const bytes = Buffer.from(JSON.stringify({ user: { id: "seed" }, value: 1 }));
      const chunked = await raw(`${small.url}/v1/metrics/lessons/event`, {
        method: "POST",
        headers: { "x-api-key": small.apiKey, "content-type": "application/json" },
        body: new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(bytes.subarray(0, 10));
            controller.enqueue(bytes.subarray(10));
            controller.close();
          },
        }),
        duplex: "half",
      });
      expect(chunked.status).toBe(201);
      expect(chunked.body).toMatchObject({ total: 3 });
    });

    it("decodes a chunked body whose chunks split a character's UTF-8 bytes as one text", async () => {
      const name = "Zoë 日本";
      const bytes = Buffer.from(JSON.stringify({ user: { id: "utf8-split", name }, value: 1 }));
      const chunked = await postInTwoChunks(bytes, bytes.indexOf(Buffer.from("日")) + 1); // inside the three bytes of 日
      expect(chunked.status).toBe(201);
      const user = await small.call("GET", "/v1/users/utf8-split");
      expect(user.body).toMatchObject({ id: "utf8-split", name });
    });

    /** An event for user id `id` + the bytes `tail`, as raw bytes: in one piece, or chunked with a split `splitAt` bytes into `tail`. */
    const eventWithBytes = (id: string, tail: Buffer, splitAt?: number) => {
      const [head, rest] = JSON.stringify({ user: { id: `${id}#` }, value: 1 }).split("#") as [string, string];
      const bytes = Buffer.concat([Buffer.from(head), tail, Buffer.from(rest)]);
      if (splitAt !== undefined) return postInTwoChunks(bytes, head.length + splitAt);
      return raw(`${small.url}/v1/metrics/lessons/event`, { method: "POST", headers: { "x-api-key": small.apiKey, "content-type": "application/json" }, body: bytes });
    };

    it("refuses a body that is not UTF-8 with 400, in one piece or chunked: two ids differing in invalid bytes are not made one", async () => {
      for (const tail of [Buffer.from([0xff]), Buffer.from([0xfe]), Buffer.from([0xe6, 0x97]) /* 日 cut short */, Buffer.from([0xc0, 0xaf]) /* overlong "/" */]) {
        expect(await refused(400, () => eventWithBytes("not-utf8", tail), small, smallTenant)).toBe("Request body is not valid UTF-8");
        expect(await refused(400, () => eventWithBytes("not-utf8", tail, 1), small, smallTenant)).toBe("Request body is not valid UTF-8");
      }
    });

    it("takes a U+FFFD that is properly encoded, as any character", async () => {
      const replacement = Buffer.from("\uFFFD");
      const whole = await eventWithBytes("fffd", replacement);
      expect(whole.status, JSON.stringify(whole.body)).toBe(201);
      const chunked = await eventWithBytes("fffd", replacement, 2); // inside its three bytes
      expect(chunked.status, JSON.stringify(chunked.body)).toBe(201);
      expect(chunked.body).toMatchObject({ total: 2 });
      expect((await small.call("GET", `/v1/users/${encodeURIComponent("fffd\uFFFD")}`)).body).toMatchObject({ id: "fffd\uFFFD" });
    });
  });
});

describe("ambiguous framing: a request a proxy could read otherwise (HTTP desync)", () => {
  // Each request carries, as its body or after it, a second request that must never be served:
  // the refusal closes the connection, so the server answers exactly once.
  const smuggled = `GET /v1/points/xp HTTP/1.1\r\nHost: x\r\nX-API-KEY: ${"demo-key"}\r\n\r\n`;
  const eventBody = JSON.stringify({ user: { id: "framed" }, value: 1 });
  const post = (framing: string) => `POST /v1/metrics/lessons/event HTTP/1.1\r\nHost: x\r\nX-API-KEY: demo-key\r\nContent-Type: application/json\r\n${framing}\r\n`;
  const chunk = (text: string) => `${text.length.toString(16)}\r\n${text}\r\n0\r\n\r\n`;

  async function refusedOnce(request: string, status: number, message: string): Promise<void> {
    const before = await dumpTenant(t.redis, tenantId);
    const reply = await exchange(t.url, request, { halfClose: true });
    expect(reply.match(/HTTP\/1\.1 \d{3} /g), reply).toEqual([`HTTP/1.1 ${status} `]);
    expect(reply).toMatch(/\r\nConnection: close\r\n/i);
    // The body is `{"error": ...}` (padded with spaces past uWS's cork buffer: framing.ts).
    expect(JSON.parse(reply.slice(reply.indexOf("\r\n\r\n") + 4))).toEqual({ error: message });
    expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
  }

  it("refuses a second Content-Length with 400 and closes, whether the two agree or not (uWS frames by the first)", async () => {
    const message = "Request has more than one Content-Length header";
    // A proxy framing by the last would pass the smuggled request on as this one's body.
    await refusedOnce(post(`Content-Length: 0\r\nContent-Length: ${eventBody.length + smuggled.length}\r\n`) + eventBody + smuggled, 400, message);
    await refusedOnce(post(`Content-Length: ${eventBody.length}\r\nContent-Length: ${eventBody.length}\r\n`) + eventBody + smuggled, 400, message);
    // A read too (uWS frames a GET's body as well), and a path no route serves (no 404 first).
    await refusedOnce(`GET /v1/users/seed/points/xp HTTP/1.1\r\nHost: x\r\nX-API-KEY: demo-key\r\nContent-Length: 0\r\nContent-Length: ${smuggled.length}\r\n\r\n` + smuggled, 400, message);
    await refusedOnce(`POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: ${smuggled.length}\r\n\r\n` + smuggled, 400, message);
  });

  it("refuses a second Transfer-Encoding, or one not ending with chunked, with 400, chunked under another coding with 501, and closes (uWS reads chunks under any)", async () => {
    await refusedOnce(post("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n") + chunk(eventBody) + smuggled, 400, "Request has more than one Transfer-Encoding header");
    for (const coding of ["gzip", "identity", "xchunked", "chunked, gzip"]) {
      await refusedOnce(post(`Transfer-Encoding: ${coding}\r\n`) + chunk(eventBody) + smuggled, 400, `Transfer-Encoding ${JSON.stringify(coding)} does not end with chunked: the body's end cannot be known`);
    }
    await refusedOnce(post("Transfer-Encoding: gzip, chunked\r\n") + chunk(eventBody) + smuggled, 501, 'Transfer-Encoding "gzip, chunked" is not supported: send the body with Content-Length, or chunked alone');
    await refusedOnce(`GET /v1/users/seed/points/xp HTTP/1.1\r\nHost: x\r\nX-API-KEY: demo-key\r\nTransfer-Encoding: xchunked\r\n\r\n` + chunk("x") + smuggled, 400, `Transfer-Encoding "xchunked" does not end with chunked: the body's end cannot be known`);
  });

  it("closes a connection sending both Content-Length and Transfer-Encoding unanswered, writing nothing (uWS's own refusal)", async () => {
    const before = await dumpTenant(t.redis, tenantId);
    const reply = await exchange(t.url, post(`Transfer-Encoding: chunked\r\nContent-Length: ${eventBody.length}\r\n`) + chunk(eventBody) + smuggled, { halfClose: true });
    expect(reply).toBe("");
    expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
  });

  it("takes one Content-Length or one chunked Transfer-Encoding however it is spelt", async () => {
    for (const framing of [`Content-Length: ${eventBody.length}\r\n`, "Transfer-Encoding: chunked\r\n", "transfer-encoding: CHUNKED\r\n"]) {
      const body = framing.startsWith("Content-Length") ? eventBody : chunk(eventBody);
      // Connection: close, so that the server ends the exchange (a half-close would abort the event's answer).
      const reply = await exchange(t.url, post(`${framing}Connection: close\r\n`) + body);
      expect(reply.match(/HTTP\/1\.1 \d{3} /g), framing).toEqual(["HTTP/1.1 201 "]);
    }
    expect((await t.call("GET", "/v1/users/framed/points/xp")).body).toMatchObject({ total: 30 });
  });
});

describe("the number of header fields (uWS's limit)", () => {
  it("answers a request of 48 header fields, and one of 49 not at all (README: what the HTTP layer does)", async () => {
    // A route that answers at once (the points system), so that the client's half-close after
    // the request cannot abort an answer that waits for Redis: what does not come is refused.
    const request = (fields: number) =>
      `GET /v1/points/xp HTTP/1.1\r\nHost: x\r\nX-API-KEY: ${t.apiKey}\r\n` + Array.from({ length: fields - 2 }, (_, i) => `X-Pad-${i}: v\r\n`).join("") + "\r\n";
    expect((await exchange(t.url, request(48), { halfClose: true })).match(/HTTP\/1\.1 \d{3} /g)).toEqual(["HTTP/1.1 200 "]);
    expect(await exchange(t.url, request(49), { halfClose: true })).toBe("");
  });
});

describe("what is logged", () => {
  it("logs no client error (4xx): only the service's own faults are logged", async () => {
    const lines: { level: number; msg: string }[] = [];
    const logged = await startTestApp({ jobs: false, logger: pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) }) });
    lines.length = 0; // what the start says (the test Redis keeps no append-only file) is not at issue
    try {
      const key = { "x-api-key": logged.apiKey };
      const answers = [
        await logged.call("POST", "/v1/metrics/lessons/event", "{not json"),
        await logged.call("POST", "/v1/metrics/lessons/event", { user: { id: "u" }, value: 1 }, { "x-api-key": "wrong-key" }),
        await logged.call("POST", "/v1/metrics/nope/event", { user: { id: "u" }, value: 1 }),
        await logged.call("GET", "/v1/users/nobody/points/xp"),
        await logged.call("POST", "/v1/metrics/lessons/event", { user: { id: "u", tz: "Mars/Olympus" }, value: 1 }),
        await logged.call("GET", "/v1/users/u/points/xp?awards=abc"),
        await logged.call("POST", "/v1/metrics/lessons/event", "x".repeat(70_000)),
        await raw(`${logged.url}/v1/metrics/lessons/event`, { method: "POST", headers: { ...key, "content-type": "text/plain" }, body: "x" }),
      ];
      expect(answers.map((a) => a.status)).toEqual([400, 401, 404, 404, 422, 400, 413, 415]);
      expect(lines.filter((l) => l.level >= 40).map((l) => l.msg)).toEqual([]);
    } finally {
      await logged.close();
    }
  });
});

describe("tenant isolation", () => {
  let app: TestApp;
  const a = { id: uniqueTenantId("a"), apiKey: "tenant-a-api-key", adminKey: "tenant-a-admin-key", asDigest: false };
  // B's keys are written as their digests ({sha256}, the production form): requests send them plain.
  const b = { id: uniqueTenantId("b"), apiKey: "tenant-b-api-key", adminKey: "tenant-b-admin-key", asDigest: true };

  /** The demo tenant under another id and other keys. */
  function tenantYaml(tenant: typeof a): string {
    const body = DEMO_YAML.slice(DEMO_YAML.indexOf("  - id: demo"));
    const written = (key: string) => (tenant.asDigest ? `{ sha256: ${createHash("sha256").update(key).digest("hex")} }` : key);
    return body
      .replace(/^(\s*- id: )demo$/m, `$1${tenant.id}`)
      .replace("apiKeys: [demo-key]", `apiKeys: [${written(tenant.apiKey)}]`)
      .replace("adminKeys: [demo-admin-key]", `adminKeys: [${written(tenant.adminKey)}]`);
  }

  beforeAll(async () => {
    const yaml = `tenants:\n${tenantYaml(a)}${tenantYaml(b)}`;
    app = await startTestApp({ yaml, jobs: false }); // as `t`: no job writes under a dump
    expect(app.tenants.map((x) => x.id)).toEqual([a.id, b.id]);
  });
  afterAll(async () => app.close());

  const post = (key: string, userId: string, value: number) =>
    app.call("POST", "/v1/metrics/lessons/event", { user: { id: userId }, value }, { "x-api-key": key });
  const points = (key: string, userId: string) => app.call("GET", `/v1/users/${userId}/points/xp`, undefined, { "x-api-key": key });

  it("keeps the same user id apart in two tenants of one app", async () => {
    const beforeB = await dumpTenant(app.redis, b.id);
    expect((await post(a.apiKey, "shared", 3)).body).toMatchObject({ total: 3 });
    // Tenant A's write touched none of tenant B's keys.
    expect(await dumpTenant(app.redis, b.id)).toEqual(beforeB);

    const firstB = await post(b.apiKey, "shared", 5);
    expect(firstB.status).toBe(201);
    // A new user in B: B's own first-identification award, B's own total.
    expect(firstB.body).toMatchObject({ total: 5, points: { energy: { added: 100 }, xp: { total: 50 } } });

    expect((await post(a.apiKey, "shared", 1)).body).toMatchObject({ total: 4 });
    expect((await points(a.apiKey, "shared")).body).toMatchObject({ total: 40 });
    expect((await points(b.apiKey, "shared")).body).toMatchObject({ total: 50 });

    // No key of either tenant leaks into the other's key space.
    for (const key of Object.keys(await dumpTenant(app.redis, a.id))) expect(key).not.toContain(b.id);
    for (const key of Object.keys(await dumpTenant(app.redis, b.id))) expect(key).not.toContain(a.id);
  });

  it("does not let tenant A's key read tenant B's users", async () => {
    expect((await post(b.apiKey, "only-in-b", 2)).status).toBe(201);
    await refused(404, () => points(a.apiKey, "only-in-b"), app, a.id);
    expect((await points(b.apiKey, "only-in-b")).body).toMatchObject({ total: 20 });
  });

  it("does not let one tenant's admin key act as the other's or as an API key", async () => {
    await refused(401, () => post(a.adminKey, "shared", 1), app, a.id);
    await refused(401, () => post(b.adminKey, "shared", 1), app, b.id);
    await refused(401, () => post("demo-key", "shared", 1), app, a.id);
    // Each opens its own tenant's admin routes (B's written as its digest).
    for (const key of [a.adminKey, b.adminKey]) expect((await app.call("GET", "/admin/v1/webhooks", undefined, { "x-api-key": key })).status, key).toBe(200);
  });
});
