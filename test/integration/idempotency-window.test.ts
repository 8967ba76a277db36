import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { loadConfigText } from "../../src/config/load.js";
import { startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { commandsDuring } from "../helpers/monitor.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";

/**
 * `idempotencyWindowHours` (README: Idempotency): a key is remembered for the window after its
 * event, as its own Redis key that expires, instead of forever in the user's hash. The rule
 * itself (replay inside the window, a new event after it) is also held to the reference model
 * by test/property/events.property.test.ts (tenant propw).
 */
const TENANT = uniqueTenantId("idemwin");
const START = "2026-06-01T12:00:00Z";
const yaml = tenantYaml(
  TENANT,
  `
    shards: 1
    idempotencyWindowHours: 2
    metrics: [{ key: lessons, name: Lessons }]
`,
);

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ yaml, manualClock: START, jobs: false });
});
afterAll(async () => t?.close());

const lesson = (key: string) => t.call("POST", "/v1/metrics/lessons/event", { user: { id: "ada" }, value: 1 }, { "idempotency-key": key });

describe("an idempotency window", () => {
  it("replays a key inside the window, counts it again after, and keeps no key in the user's hash", async () => {
    const first = await lesson("k1");
    expect([first.status, first.body.total, first.body.idempotentReplayed]).toEqual([201, 1, false]);

    await t.setClock("2026-06-01T13:59:59.999Z");
    const replay = await lesson("k1");
    expect([replay.status, replay.body.eventId, replay.body.total, replay.body.idempotentReplayed]).toEqual([202, first.body.eventId, 1, true]);

    await t.setClock("2026-06-01T14:00:00Z");
    const again = await lesson("k1");
    expect([again.status, again.body.total, again.body.idempotentReplayed]).toEqual([201, 2, false]);
    expect(again.body.eventId).not.toBe(first.body.eventId);

    const fields = await t.redis.hkeys(`{${TENANT}:0}:u:ada`);
    expect(fields.filter((f) => f.startsWith("i:"))).toEqual([]);
    const key = `{${TENANT}:0}:ik:lessons:ada\x1fk1`;
    expect(await t.redis.get(key)).toBe(`${again.body.eventId}|${Date.parse("2026-06-01T16:00:00Z")}`);
    // Redis drops the key after the window (wall time): memory no longer grows with every key.
    const ttl = await t.redis.pttl(key);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(2 * 3_600_000);
  });

  it("still costs one script call, with one GET and one SET of the key inside it", async () => {
    // The service's own connection's commands, and the scripts' commands on this tenant's keys.
    const seen = await commandsDuring(inject("redisUrl"), () => lesson("k2"), t.redis);
    expect(seen.commands.map((c) => c[0]!.toLowerCase())).toEqual(["fcall"]);
    // MONITOR prints the key's \x1f escaped: match its start.
    const onKey = seen.luaCommands.filter((c) => c[1]?.startsWith(`{${TENANT}:0}:ik:lessons:ada`));
    expect(onKey.map((c) => c[0]!.toLowerCase())).toEqual(["get", "set"]);
  });

  it("refuses a window that is not a whole number of hours from 1 to 87600, naming the field", () => {
    for (const bad of ["0", "1.5", "87601", '"24h"']) {
      const text = tenantYaml(TENANT, `    idempotencyWindowHours: ${bad}\n    metrics: [{ key: lessons, name: Lessons }]\n`);
      expect(() => loadConfigText(text, "bad.yaml", {}), bad).toThrow(/idempotencyWindowHours/);
    }
  });
});

describe("turning a window on", () => {
  it("still honours a key stored forever before it", async () => {
    const tenantId = uniqueTenantId("idemwin");
    const body = (window: string) => tenantYaml(tenantId, `    shards: 1\n${window}    metrics: [{ key: lessons, name: Lessons }]\n`);
    const before = await startTestApp({ yaml: body(""), manualClock: START, jobs: false });
    const first = await before.call("POST", "/v1/metrics/lessons/event", { user: { id: "ada" }, value: 1 }, { "idempotency-key": "old" });
    await before.close();
    expect(first.status).toBe(201);

    const after = await startTestApp({ yaml: body("    idempotencyWindowHours: 1\n"), manualClock: "2027-06-01T00:00:00Z", jobs: false });
    try {
      const retry = await after.call("POST", "/v1/metrics/lessons/event", { user: { id: "ada" }, value: 1 }, { "idempotency-key": "old" });
      expect([retry.status, retry.body.eventId, retry.body.total]).toEqual([202, first.body.eventId, 1]);
    } finally {
      await after.close();
    }
  });
});

describe("turning a window off", () => {
  it("still honours a key stored under it until its window has passed, then remembers new keys forever", async () => {
    const tenantId = uniqueTenantId("idemoff");
    const body = (window: string) => tenantYaml(tenantId, `    shards: 1\n${window}    metrics: [{ key: lessons, name: Lessons }]\n`);
    const send = (app: TestApp, key: string) => app.call("POST", "/v1/metrics/lessons/event", { user: { id: "bo" }, value: 1 }, { "idempotency-key": key });
    const before = await startTestApp({ yaml: body("    idempotencyWindowHours: 1\n"), manualClock: START, jobs: false });
    const first = await send(before, "windowed");
    await before.close();
    expect(first.status).toBe(201);

    // The window is gone from the config a minute later: the key, stored under it, was forgotten
    // (counted twice: 201, total 2).
    const after = await startTestApp({ yaml: body(""), manualClock: new Date(Date.parse(START) + 60_000).toISOString(), jobs: false });
    try {
      const retry = await send(after, "windowed");
      expect([retry.status, retry.body.eventId, retry.body.total]).toEqual([202, first.body.eventId, 1]);
      // A new key is remembered forever, in the user's hash, as without a window.
      expect((await send(after, "fresh")).status).toBe(201);
      await after.setClock("2030-01-01T00:00:00Z");
      expect((await send(after, "fresh")).status).toBe(202);
      // And the old one once its window has passed (by the service clock): new again.
      expect((await send(after, "windowed")).status).toBe(201);
    } finally {
      await after.close();
    }
  });
});
