import fc from "fast-check";
import { afterAll, beforeAll, expect, it } from "vitest";
import { demoConfig, dumpKeys, startAppOnOwnRedis, type TestApp } from "../helpers/app.js";
import { propertyParameters } from "../helpers/property.js";

/**
 * What a hostile or careless client sends, to every route at once: random path parameters
 * (odd Unicode, bad percent-encoding, reserved names, very long ids), random query values,
 * bodies that are valid ones with a field swapped for a wrong type, removed, or joined by an
 * unknown key, arbitrary JSON, and text that is not JSON; any of the keys or none.
 *
 * Whatever arrives, the service must answer with a status below 500; every refusal is exactly
 * `{"error": "<message>"}`; and a refused request changes nothing in Redis. The app runs on its
 * own redis-server without background jobs, so the dump of every key before and after a refusal
 * sees only what the request did.
 */

let t: TestApp;
let close: () => Promise<void>;

beforeAll(async () => {
  ({ t, close } = await startAppOnOwnRedis({ yaml: demoConfig().yaml, manualClock: "2026-03-02T12:00:00Z" }));
  // Known users with history, so that valid ids reach the deeper code of every read and write.
  for (const id of ["seed", "other"]) {
    expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id, tz: "Europe/Paris" }, value: 3 })).status).toBe(201);
  }
  expect((await t.call("PATCH", "/v1/users/seed/preferences", { notifications: { recap: ["email"] } })).status).toBe(200);
});
afterAll(async () => close?.());

/** What each kind of path parameter names when it names something that exists. */
const KNOWN: Record<string, string[]> = {
  user: ["seed", "other"],
  metric: ["lessons", "api-calls"],
  system: ["xp", "energy", "coins"],
  achievement: ["first-lesson", "complete-profile", "ten-lessons"],
  board: ["xp-all-time", "weekly-lessons"],
  boost: ["00000000-0000-5000-8000-000000000000"],
  delivery: ["1", "ghost"],
};
const ANY_KNOWN = Object.values(KNOWN).flat();

/** A path parameter: mostly one that exists, else another kind's, one that does not, or hostile text. */
function segment(kind: string): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...KNOWN[kind]) },
    { weight: 1, arbitrary: fc.constantFrom(...ANY_KNOWN, "ghost") },
    { weight: 1, arbitrary: fc.constantFrom("", "%", "%zz", "%ED%A0%80", "%00", "..", "__proto__", "constructor", "a%2Fb", "%F0%9F%98%80", "%E2%80%AE", "x".repeat(300)) },
    { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 12 }).map(encodeURIComponent) },
  );
}

/** Routes with `:kind` for each parameter, and the body a valid request would carry. */
const ROUTES: Array<{ method: string; path: string; body?: unknown; admin?: boolean }> = [
  { method: "POST", path: "/v1/metrics/:metric/event", body: { user: { id: "seed", email: "a@b.co", tz: "UTC" }, value: 1, attributes: {} } },
  { method: "POST", path: "/api/metrics/:metric/event", body: { user: { id: "seed" }, value: 2 } },
  { method: "GET", path: "/v1/users/:user/points/:system" },
  { method: "GET", path: "/v1/points/:system" },
  { method: "GET", path: "/v1/points/:system/levels" },
  { method: "GET", path: "/v1/points/:system/boosts" },
  { method: "GET", path: "/v1/users/:user/points/:system/boosts" },
  { method: "POST", path: "/v1/users", body: { id: "newbie", email: "n@b.co", name: "N", tz: "Asia/Tokyo", subscribeToEmails: true, attributes: {} } },
  { method: "GET", path: "/v1/users/:user" },
  { method: "PUT", path: "/v1/users/:user", body: { name: "Ada", tz: "Europe/Paris" } },
  { method: "PATCH", path: "/v1/users/:user", body: { email: "ada@b.co" } },
  { method: "GET", path: "/v1/users/:user/preferences" },
  { method: "PATCH", path: "/v1/users/:user/preferences", body: { notifications: { recap: ["email"] } } },
  { method: "POST", path: "/v1/achievements/:achievement/complete", body: { user: { id: "seed" } } },
  { method: "GET", path: "/v1/users/:user/metrics" },
  { method: "GET", path: "/v1/users/:user/metrics/:metric" },
  { method: "GET", path: "/v1/users/:user/metrics/:metric/event-summary" },
  { method: "GET", path: "/v1/users/:user/points/:system/event-summary" },
  { method: "GET", path: "/v1/users/:user/achievements" },
  { method: "GET", path: "/v1/achievements" },
  { method: "GET", path: "/v1/users/:user/streak" },
  { method: "GET", path: "/v1/streaks" },
  { method: "GET", path: "/v1/streaks/rankings" },
  { method: "GET", path: "/v1/points/:system/summary" },
  { method: "GET", path: "/v1/points/:system/level-summary" },
  { method: "GET", path: "/v1/users/:user/wrapped" },
  { method: "GET", path: "/v1/leaderboards" },
  { method: "GET", path: "/v1/leaderboards/:board" },
  { method: "GET", path: "/v1/users/:user/leaderboards/:board" },
  { method: "POST", path: "/admin/v1/points/:system/boosts", admin: true, body: { userId: "seed", name: "B", multiplier: 2, start: "2026-03-03T00:00:00Z", end: "2026-03-04T00:00:00Z" } },
  { method: "GET", path: "/admin/v1/points/:system/boosts", admin: true },
  { method: "DELETE", path: "/admin/v1/points/:system/boosts/:boost", admin: true },
  { method: "POST", path: "/admin/v1/streaks/freezes", admin: true, body: { freezes: [{ userId: "seed" }] } },
  { method: "POST", path: "/admin/v1/streaks/restore", admin: true, body: { users: [{ id: "seed" }] } },
  { method: "GET", path: "/admin/v1/webhooks", admin: true },
  { method: "GET", path: "/admin/v1/webhooks/deliveries", admin: true },
  { method: "GET", path: "/admin/v1/webhooks/deliveries/:delivery", admin: true },
  { method: "POST", path: "/admin/v1/webhooks/deliveries/:delivery/replay", admin: true, body: {} },
  { method: "POST", path: "/admin/v1/webhooks/deliveries/replay", admin: true, body: { status: "dead" } },
  { method: "GET", path: "/admin/v1/clock", admin: true },
  { method: "GET", path: "/healthz" },
];

/** JSON values a careless client puts where another type belongs. */
const wrongValue = fc.oneof(
  fc.constantFrom(null, true, false, 0, -0, -1, 0.5, 1e308, -1e308, 9e15, 2 ** 53 + 1, "", " ", "NaN", "Infinity", "1e400", "\u0000", "\uFEFF", "🙂".repeat(50), "x".repeat(5000), [], {}, [null], { "": 1 }),
  fc.string({ unit: "grapheme", maxLength: 20 }),
  fc.double(),
  fc.integer(),
  fc.jsonValue({ maxDepth: 3 }),
);

type Path = Array<string | number>;

/** Every place in a JSON value where a field can be swapped, removed or added. */
function places(value: unknown, at: Path = []): Path[] {
  if (value === null || typeof value !== "object") return [at];
  const inner = Array.isArray(value) ? value.flatMap((v, i) => places(v, [...at, i])) : Object.entries(value).flatMap(([k, v]) => places(v, [...at, k]));
  return [at, ...inner];
}

function withChange(body: unknown, at: Path, change: { kind: "swap"; value: unknown } | { kind: "drop" } | { kind: "add"; key: string; value: unknown }): unknown {
  const copy = structuredClone(body);
  if (at.length === 0) return change.kind === "swap" ? change.value : copy;
  let parent: any = copy;
  for (const step of at.slice(0, -1)) parent = parent[step];
  const last = at[at.length - 1];
  if (change.kind === "swap") parent[last] = change.value;
  else if (change.kind === "drop") Array.isArray(parent) ? parent.splice(Number(last), 1) : delete parent[last];
  else if (parent[last] !== null && typeof parent[last] === "object" && !Array.isArray(parent[last])) parent[last][change.key] = change.value;
  return copy;
}

/** A body: the route's valid one with one change, arbitrary JSON, or text that is not JSON. */
function bodyFor(valid: unknown): fc.Arbitrary<string | undefined> {
  const changed = fc
    .record({
      at: fc.constantFrom(...places(valid)),
      change: fc.oneof(
        wrongValue.map((value) => ({ kind: "swap" as const, value })),
        fc.constant({ kind: "drop" as const }),
        fc.record({ kind: fc.constant("add" as const), key: fc.oneof(fc.constantFrom("__proto__", "constructor", "prototype", "extra", "", "k\ud800", "\udc00"), fc.string({ maxLength: 8 })), value: wrongValue }),
      ),
    })
    .map(({ at, change }) => JSON.stringify(withChange(valid, at, change)));
  return fc.oneof(
    { weight: 6, arbitrary: changed },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)) },
    { weight: 1, arbitrary: fc.constantFrom("", "{", "nul", "{\"user\":", "[1,]", "{\"__proto__\":{\"admin\":true}}", "\uFEFF{}", "{\"a\":1}{\"b\":2}", "1".repeat(400)) },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );
}

const QUERY_NAMES = ["awards", "includeIncomplete", "includeFinished", "userId", "run", "userAttributes", "limit", "offset", "status", "endpoint", "type", "aggregation", "startDate", "endDate", "tz", "year", "points", "x"];
const queryValue = fc.oneof(
  fc.constantFrom("", "0", "1", "10", "100", "101", "-1", "1.5", "NaN", "1e309", "0x10", " 5", "true", "false", "daily", "2026-03-01", "2026-13-45", "Mars/Olympus", "seed", "dead", "plan:pro", "%", "%zz"),
  fc.string({ unit: "grapheme", maxLength: 10 }).map(encodeURIComponent),
);
const query = fc.array(fc.tuple(fc.constantFrom(...QUERY_NAMES), queryValue), { maxLength: 3 }).map((pairs) => (pairs.length ? "?" + pairs.map(([k, v]) => `${k}=${v}`).join("&") : ""));

const request = fc.constantFrom(...ROUTES).chain((route) =>
  fc.record({
    method: fc.constant(route.method),
    path: fc.tuple(...(route.path.match(/:[a-z]+/g) ?? []).map((name) => segment(name.slice(1)))).map((parts) => {
      let i = 0;
      return route.path.replace(/:[a-z]+/g, () => parts[i++]);
    }),
    query,
    body: route.body === undefined ? fc.constant(undefined) : bodyFor(route.body),
    key: fc.oneof({ weight: 4, arbitrary: fc.constant(route.admin ? "demo-admin-key" : "demo-key") }, { weight: 1, arbitrary: fc.constantFrom(undefined, "", "demo-key", "demo-admin-key", "demo-key ", "DEMO-KEY", "x".repeat(2000)) }),
    idempotencyKey: fc.option(fc.constantFrom("k1", "k1", " ", "x".repeat(300), "a\tb", "cl\u00e9", "../k"), { freq: 3 }),
    contentType: fc.oneof({ weight: 6, arbitrary: fc.constant("application/json") }, { weight: 1, arbitrary: fc.constantFrom(undefined, "text/plain", "application/json; charset=latin1", "application/x-www-form-urlencoded") }),
  }),
);

it("answers every hostile request below 500, refuses with {error} alone, and a refusal writes nothing", async () => {
  await fc.assert(
    fc.asyncProperty(request, async (r) => {
      const headers: Record<string, string> = {};
      if (r.key !== undefined) headers["x-api-key"] = r.key;
      if (r.body !== undefined && r.contentType !== undefined) headers["content-type"] = r.contentType;
      if (r.idempotencyKey !== null) headers["idempotency-key"] = r.idempotencyKey;
      const before = await dumpKeys(t.redis, "*");
      const res = await fetch(t.url + r.path + r.query, { method: r.method, headers, body: r.body });
      const text = await res.text();
      expect(res.status, text).toBeLessThan(500);
      if (res.status < 400) return;
      const body = JSON.parse(text) as unknown;
      expect(body).toEqual({ error: expect.any(String) });
      expect((body as { error: string }).error.trim()).not.toBe("");
      // Strict JSON parsers (serde_json) refuse a lone surrogate's escape: a message must have none.
      expect((body as { error: string }).error.isWellFormed(), text).toBe(true);
      expect(await dumpKeys(t.redis, "*")).toEqual(before);
    }),
    { ...propertyParameters(300), endOnFailure: true },
  );
});
