import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Redis } from "ioredis";
import { loadLua, type LuaSource } from "../../src/store/lua-loader.js";
import { demoConfig, startTestApp, type TestApp } from "../helpers/app.js";

/**
 * A user's rank read while the user's own event lands between its two reads: the user's entry
 * (their board value, their streak length) is read first, then the entries ahead of it are
 * counted over every shard. An event of the user in between moved their own entry ahead of the
 * value read, and it was counted among those ahead: rank 2 on a board (or a tenant's streaks)
 * of one. Reads may be a little stale; they may not count the user twice.
 *
 * Found with two `node dist/main.js` on one Redis, events and reads of one user sent in parallel:
 * GET /v1/users/{id}/leaderboards/{key} answered rank 2 on a board of one in 1 963 reads of 3 000,
 * GET /v1/users/{id}/streak rank 2 in 152 of 600 (a day each, the clock moved between).
 *
 * Here the race is made, not waited for: two apps of one tenant on one Redis (two processes),
 * one reading, one writing. The reader's Redis client holds the counting call (the script named)
 * and every command after it unsent, in their order, until the writer's event for the user has
 * been answered, then sends them.
 */
let t: TestApp;
let w: TestApp;

beforeAll(async () => {
  const { yaml } = demoConfig();
  t = await startTestApp({ yaml, manualClock: "2026-03-02T12:00:00Z", jobs: false });
  w = await startTestApp({ yaml, manualClock: "2026-03-02T12:00:00Z", jobs: false });
});
afterAll(async () => {
  await t?.close();
  await w?.close();
});

type Command = { name: string; args: unknown[]; promise: Promise<unknown> };

/** Holds the first call of `script` the client sends from now on, and every command after it, until release(); then sends them in order. */
function holdFromCall(redis: Redis, script: LuaSource): { held: Promise<void>; release: () => void } {
  const client = redis as unknown as { sendCommand: (command: Command, stream?: unknown) => unknown };
  const send = client.sendCommand;
  let heldNow!: () => void;
  const held = new Promise<void>((resolve) => (heldNow = resolve));
  const queue: [Command, unknown][] = [];
  let holding = false;
  client.sendCommand = (command, stream) => {
    const first = String(command.args[0]);
    if (!holding && (command.name === "fcall" || command.name === "evalsha") && (first === script.functionName || first === script.sha)) {
      holding = true;
      heldNow();
    }
    if (!holding) return send.call(redis, command, stream);
    queue.push([command, stream]);
    return command.promise;
  };
  const release = () => {
    client.sendCommand = send;
    for (const [command, stream] of queue) void send.call(redis, command, stream);
  };
  return { held, release };
}

/** A lesson of `user`, through the writing app. */
const lesson = (user: string) => w.call("POST", "/v1/metrics/lessons/event", { user: { id: user }, value: 1 });
const setClocks = async (iso: string) => {
  await t.setClock(iso);
  await w.setClock(iso);
};

describe("a user's rank read around the user's own event", () => {
  it("GET /v1/users/{id}/leaderboards/{key}: never ranks the user behind their own newer entry", async () => {
    // Alone on the XP board (tenant of this file only): 10 XP.
    expect((await lesson("solo")).status).toBe(201);
    const hold = holdFromCall(t.redis, loadLua("boardPlaces-1"));
    const read = t.call("GET", "/v1/users/solo/leaderboards/xp-all-time");
    // The entry (10 XP) is read; the count of the entries ahead of it waits.
    await hold.held;
    // The user's next lesson: 20 XP, the user's entry now above the value read.
    expect((await lesson("solo")).status).toBe(201);
    hold.release();
    const { status, body } = await read;
    expect(status).toBe(200);
    // Was: rank 2, value 10 (the user's 20 counted ahead of their 10). Now the rank of the entry
    // the user has: the entry read again behind the count (held with it, so after the lesson)
    // had moved, and the rank was counted again for it, the answer naming that entry.
    expect(body).toMatchObject({ rank: 1, value: 20 });
    expect((await t.call("GET", "/v1/users/solo/leaderboards/xp-all-time")).body).toMatchObject({ rank: 1, value: 20 });
  });

  it("GET /v1/users/{id}/streak: never ranks the user behind their own streak extended meanwhile", async () => {
    expect((await lesson("streaker")).status).toBe(201);
    await setClocks("2026-03-03T12:00:00Z");
    const hold = holdFromCall(t.redis, loadLua("streakRanks-2"));
    const read = t.call("GET", "/v1/users/streaker/streak");
    // Read at length 1 (yesterday's, still alive); the count of longer streaks waits.
    await hold.held;
    // Today's lesson extends it to 2.
    expect((await lesson("streaker")).status).toBe(201);
    hold.release();
    const { status, body } = await read;
    expect(status).toBe(200);
    expect(body.length).toBe(1);
    // Was 2: the user's own streak of 2 counted as a longer one than their 1.
    expect(body.rank).toBe(1);
    expect((await t.call("GET", "/v1/users/streaker/streak")).body).toMatchObject({ length: 2, rank: 1 });
  });

  it("GET /v1/users/{id}/streak: still counts the other users' longer streaks", async () => {
    // Another user with a longer streak: ahead of `streaker` (2) once it is 3.
    await setClocks("2026-03-01T12:00:00Z");
    expect((await lesson("rival")).status).toBe(201);
    for (const day of ["02", "03"]) {
      await setClocks(`2026-03-${day}T13:00:00Z`);
      expect((await lesson("rival")).status).toBe(201);
    }
    await setClocks("2026-03-03T14:00:00Z");
    expect((await t.call("GET", "/v1/users/rival/streak")).body).toMatchObject({ length: 3, rank: 1 });
    expect((await t.call("GET", "/v1/users/streaker/streak")).body).toMatchObject({ length: 2, rank: 2 });
  });
});
