import type { Command, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sweepExpiredStreaks } from "../../src/jobs/streak-expiry.js";
import { ZONE_ATTEMPTS } from "../../src/store/tenant-store.js";
import { dumpTenant, startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { streakTenantYaml } from "../helpers/tenant-yaml.js";

// An event without `tz` is computed on the zone Node guesses; the script answers -1 with the
// stored zone when the guess was wrong, and Node calls again (ZONE_ATTEMPTS calls in all). Here
// an identify "lands" between every two calls: after each -1, and before Node's next call, the
// user's stored zone is changed again over the service's own connection (commands on one
// connection run in order, so the change is in place before the next call runs). No timing.

let t: TestApp;
let tenantId: string;
const ADMIN = () => ({ "x-api-key": t.adminKey });
const ZONES = ["Asia/Tokyo", "Europe/Paris"];

beforeAll(async () => {
  t = await startTestApp({ manualClock: "2026-03-02T12:00:00Z", jobs: false });
  tenantId = t.tenants[0]!.id;
});
afterAll(() => t?.close());

/**
 * Runs `action` while every script answer -1 is followed by another change of the stored zone
 * (of the user whose hash is `userKey`, or of any user); returns the script calls seen and their statuses.
 */
async function withZoneChangingEveryCall(action: () => Promise<unknown>, app: TestApp = t, onlyUserKey?: string): Promise<number[]> {
  const redis = app.redis;
  const send = redis.sendCommand;
  const statuses: number[] = [];
  let changes = 0;
  redis.sendCommand = ((command: Command, stream?: unknown) => {
    const sent = send.call(redis, command, stream as never) as Promise<unknown>;
    const name = command.name.toLowerCase();
    if (name !== "fcall" && name !== "evalsha") return sent;
    // KEYS[1] of the event and the streak-admin scripts is the user's hash.
    const userKey = String(command.args[2]);
    if (onlyUserKey !== undefined && userKey !== onlyUserKey) return sent;
    return sent.then(async (reply) => {
      if (!Array.isArray(reply)) return reply;
      statuses.push(reply[0] as number);
      if (reply[0] === -1) await send.call(redis, new (command.constructor as typeof Command)("hset", [userKey, "tz", ZONES[changes++ % 2]!]));
      return reply;
    });
  }) as Redis["sendCommand"];
  try {
    await action();
  } finally {
    redis.sendCommand = send;
  }
  return statuses;
}

/** The tenant's keys and values, the users' stored zones left out (the test changes them). */
async function tenantWithoutZones(): Promise<Record<string, unknown>> {
  const dump = await dumpTenant(t.redis, tenantId);
  for (const value of Object.values(dump)) if (value && typeof value === "object" && "tz" in value) delete (value as Record<string, unknown>).tz;
  return dump;
}

describe(`a zone changed between each of ${ZONE_ATTEMPTS} calls`, () => {
  it("an event is a 503 (a status the SDK retries), writes nothing, and is taken when sent again", async () => {
    expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "traveller", tz: "UTC" }, value: 1 })).status).toBe(201);
    // Another process's identify: Node's guess (UTC, its cache) is now wrong.
    await t.redis.hset((await t.redis.keys(`{${tenantId}:*}:u:traveller`))[0]!, "tz", "America/New_York");
    const before = await tenantWithoutZones();
    let reply: { status: number; body: any } | undefined;
    const statuses = await withZoneChangingEveryCall(async () => {
      reply = await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "traveller" }, value: 1 });
    });
    expect(statuses).toEqual(Array(ZONE_ATTEMPTS).fill(-1));
    expect(reply).toEqual({ status: 503, body: { error: expect.stringMatching(/^The user's time zone kept changing while this request ran .*nothing was recorded for that user: send it again$/) } });
    expect(await tenantWithoutZones()).toEqual(before);
    // Once the zone holds still, the same event is recorded, once.
    const again = await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "traveller" }, value: 1 });
    expect(again.status).toBe(201);
    expect(again.body.total).toBe(2);
  });

  it("a streak freeze grant is a 503 too, and grants nothing", async () => {
    expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "freezer", tz: "UTC" }, value: 1 })).status).toBe(201);
    await t.redis.hset((await t.redis.keys(`{${tenantId}:*}:u:freezer`))[0]!, "tz", "America/New_York");
    const before = await tenantWithoutZones();
    let reply: { status: number; body: any } | undefined;
    const statuses = await withZoneChangingEveryCall(async () => {
      reply = await t.call("POST", "/admin/v1/streaks/freezes", { freezes: [{ userId: "freezer" }] }, ADMIN());
    });
    expect(statuses).toEqual(Array(ZONE_ATTEMPTS).fill(-1));
    expect(reply?.status).toBe(503);
    expect(reply?.body.error).toMatch(/^The user's time zone kept changing/);
    expect(await tenantWithoutZones()).toEqual(before);
  });

  it("the streak expiry sweep skips that user (still due, for the next sweep) and settles the others, before and after it", async () => {
    const sweepTenant = uniqueTenantId("zsweep");
    const yaml = streakTenantYaml(sweepTenant);
    // No background jobs: the sweep is called here, on the app's connection, which the hook watches
    // (the service's own sweep runs on a connection of its own).
    const app = await startTestApp({ yaml, manualClock: "2026-06-01T12:00:00Z", jobs: false });
    const store = app.app.tenants.all.find((x) => x.store.tenant.id === sweepTenant)!.store;
    try {
      // 21 users due at one deadline: the sweep settles 16 at a time, in member order, so
      // "aaa-mover" is in the first batch and u15..u19 in the second.
      const users = ["aaa-mover", ...Array.from({ length: 20 }, (_, i) => `u${String(i).padStart(2, "0")}`)];
      for (const id of users) expect((await app.call("POST", "/v1/metrics/lessons/event", { user: { id, tz: "UTC" }, value: 1 })).status).toBe(201);
      const moverKey = (await app.redis.keys(`{${sweepTenant}:0}:u:aaa-mover`))[0]!;
      await app.redis.hset(moverKey, "tz", "America/New_York"); // another process's identify
      // Past every deadline (UTC's and New York's).
      const now = Date.parse("2026-06-03T12:00:00Z");
      let changed = -1;
      const statuses = await withZoneChangingEveryCall(async () => (changed = await sweepExpiredStreaks(store, now)), app, moverKey);
      expect(statuses).toEqual(Array(ZONE_ATTEMPTS).fill(-1));
      expect(changed).toBe(20);
      // Everyone else's streak is settled (lost); the mover's is left, still due.
      const active = await app.redis.zrange(`{${sweepTenant}:0}:sa`, 0, -1);
      expect(active).toEqual(["aaa-mover"]);
      expect(await app.redis.zrange(`{${sweepTenant}:0}:sd`, 0, -1)).toEqual(["aaa-mover"]);
      // Once the zone holds still, the next sweep settles it.
      expect(await sweepExpiredStreaks(store, now + 3_600_000)).toBe(1);
      expect(await app.redis.zrange(`{${sweepTenant}:0}:sa`, 0, -1)).toEqual([]);
    } finally {
      await app.close();
    }
  });
});
