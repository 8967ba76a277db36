import type { Command, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TrophyApiClient, TrophyApiError } from "@trophyso/node";
import { startTestApp, type TestApp } from "../helpers/app.js";

/**
 * The admin batches (freezes, restores) through the SDK when one user's script fails part way.
 * The SDK sends a request answered 5xx again at once, twice (trophy-compat §1.4): a 503 after the
 * users before the failing one were granted their freezes had the SDK grant them again, up to
 * three times. The batch answers 200 with the failure as an issue once it has recorded something.
 *
 * The failure is made as zone-changing.test.ts makes it: after each script answer -1 (the zone
 * Node guessed is not the stored one), the user's stored zone is changed again over the service's
 * own connection, so every call of that user's finds it changed (ZONE_CHANGING). Or the user's
 * script is refused as Redis at its maxmemory refuses a write, without being sent.
 */
let app: TestApp;
let t: TrophyApiClient;
let admin: TrophyApiClient;
const ZONES = ["Asia/Tokyo", "Europe/Paris"];

beforeAll(async () => {
  app = await startTestApp({ manualClock: "2026-03-02T12:00:00Z", jobs: false });
  const environment = { api: `${app.url}/v1`, admin: `${app.url}/admin/v1` };
  t = new TrophyApiClient({ apiKey: app.apiKey, environment });
  admin = new TrophyApiClient({ apiKey: app.adminKey, environment });
});
afterAll(() => app?.close());

async function userKey(id: string): Promise<string> {
  return (await app.redis.keys(`{${app.tenants[0]!.id}:*}:u:${id}`))[0]!;
}

/** Runs `action` while the scripts of the user whose hash is `key` fail: "zone" (ZONE_CHANGING) or "oom" (refused, not sent). */
async function withFailingUser<T>(key: string, how: "zone" | "oom", action: () => Promise<T>): Promise<{ result: T; calls: number }> {
  const redis = app.redis;
  const send = redis.sendCommand;
  let calls = 0;
  let changes = 0;
  redis.sendCommand = ((command: Command, stream?: unknown) => {
    const name = command.name.toLowerCase();
    if ((name !== "fcall" && name !== "evalsha") || String(command.args[2]) !== key) return send.call(redis, command, stream as never);
    calls++;
    if (how === "oom") {
      const err = new Error("OOM command not allowed when used memory > 'maxmemory'.");
      command.reject(err);
      return command.promise;
    }
    return (send.call(redis, command, stream as never) as Promise<unknown>).then(async (reply) => {
      if (Array.isArray(reply) && reply[0] === -1) await send.call(redis, new (command.constructor as typeof Command)("hset", [key, "tz", ZONES[changes++ % 2]!]));
      return reply;
    });
  }) as Redis["sendCommand"];
  try {
    return { result: await action(), calls };
  } finally {
    redis.sendCommand = send;
  }
}

/** A user with a one-day streak, identified in UTC; then another process's identify moves the stored zone (Node's guess is wrong). */
async function streaker(id: string, moveZone: boolean): Promise<string> {
  await t.metrics.event("lessons", { user: { id, tz: "UTC" }, value: 1 });
  const key = await userKey(id);
  if (moveZone) await app.redis.hset(key, "tz", "America/New_York");
  return key;
}

describe("admin.streaks.freezes.create with a failure part way", () => {
  it("grants the users before a user whose zone kept changing once, and reports that user as an issue (200, not retried)", async () => {
    await streaker("fz-a", false);
    const failing = await streaker("fz-b", true);
    await streaker("fz-c", false);
    const { result, calls } = await withFailingUser(failing, "zone", () =>
      admin.admin.streaks.freezes.create({ freezes: [{ userId: "fz-a" }, { userId: "fz-b" }, { userId: "fz-c" }] }),
    );
    expect(result.issues).toEqual([
      expect.objectContaining({ userId: "fz-b", level: "error", reason: expect.stringMatching(/^The user's time zone kept changing/) }),
    ]);
    expect(calls).toBe(8); // one request: ZONE_ATTEMPTS calls for fz-b, no retry by the SDK
    expect((await t.users.streak("fz-a")).freezes).toBe(1);
    expect((await t.users.streak("fz-c")).freezes).toBe(1);
    expect((await t.users.streak("fz-b")).freezes).toBe(0);
  });

  it("stops at a user Redis refuses: the users before it granted once, that user and those after it issues", async () => {
    await streaker("fo-a", false);
    const failing = await streaker("fo-b", false);
    await streaker("fo-c", false);
    const { result } = await withFailingUser(failing, "oom", () =>
      admin.admin.streaks.freezes.create({ freezes: [{ userId: "fo-a" }, { userId: "fo-b" }, { userId: "fo-c" }] }),
    );
    expect(result.issues).toEqual([
      expect.objectContaining({ userId: "fo-b", level: "error", reason: expect.stringMatching(/^Redis is out of memory/) }),
      expect.objectContaining({ userId: "fo-c", level: "error", reason: expect.stringMatching(/^Not applied: the request stopped at user fo-b/) }),
    ]);
    expect((await t.users.streak("fo-a")).freezes).toBe(1);
    expect((await t.users.streak("fo-b")).freezes).toBe(0);
    expect((await t.users.streak("fo-c")).freezes).toBe(0);
  });

  it("a failure before anything was granted is still the 503 (the SDK's retry is harmless then)", async () => {
    const failing = await streaker("fn-a", true);
    const err = await withFailingUser(failing, "zone", () => admin.admin.streaks.freezes.create({ freezes: [{ userId: "fn-a" }] })).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(TrophyApiError);
    expect((err as TrophyApiError).statusCode).toBe(503);
    expect((await t.users.streak("fn-a")).freezes).toBe(0);
  });
});

describe("admin.streaks.restore with a failure part way", () => {
  it("answers the users it restored, and the user whose zone kept changing as an issue", async () => {
    await app.setClock("2026-03-10T12:00:00Z");
    await streaker("rz-a", false);
    const failing = await streaker("rz-b", true);
    // Two days without an extension (no freezes held): both streaks are lost.
    await app.setClock("2026-03-13T12:00:00Z");
    expect((await t.users.streak("rz-a")).length).toBe(0);
    const { result } = await withFailingUser(failing, "zone", () => admin.admin.streaks.restore({ users: [{ id: "rz-a" }, { id: "rz-b" }] }));
    expect(result.restoredUsers).toEqual(["rz-a"]);
    expect(result.issues).toEqual([
      expect.objectContaining({ userId: "rz-b", level: "error", reason: expect.stringMatching(/^The user's time zone kept changing/) }),
    ]);
    expect((await t.users.streak("rz-a")).length).toBe(1);
    expect((await t.users.streak("rz-b")).length).toBe(0);
  });
});
