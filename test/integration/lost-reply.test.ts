import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { demoConfig, startAppOnOwnRedis, type TestApp } from "../helpers/app.js";

/**
 * A connection to Redis can drop after Redis ran an event's script and before its reply reached
 * the service (a network blip, a proxy restart). ioredis then re-sends every command that had no
 * reply on the new connection (autoResendUnfulfilledCommands), and a script run twice would
 * count the event twice although the client got one 201. Each event call carries the service
 * process's writer id and a call number that grows with every call; the script remembers the
 * last one it applied for the user and answers a call it has already applied without applying it
 * again (lua/event-1.lua, step 1; the admin freeze grant the same way, src/store/call-order.ts).
 *
 * The drop is made exact, not timed: the service's socket stops reading, the test waits until
 * Redis has run every call (INFO commandstats on another connection), then destroys the socket.
 */

let t: TestApp;
let close: () => Promise<void>;
let observer: Redis;

beforeAll(async () => {
  ({ t, close } = await startAppOnOwnRedis({ yaml: demoConfig().yaml, manualClock: "2026-03-02T12:00:00Z" }));
  observer = new Redis(t.redis.options);
});
afterAll(async () => {
  observer?.disconnect();
  await close?.();
});

const lesson = (user: string, headers: Record<string, string> = {}) => t.call("POST", "/v1/metrics/lessons/event", { user: { id: user, tz: "UTC" }, value: 1 }, headers);

async function scriptCalls(): Promise<number> {
  const stats = await observer.info("commandstats");
  return Number(/cmdstat_fcall:calls=(\d+)/.exec(stats)?.[1] ?? 0);
}

/** Sends the requests, lets Redis run all `calls` of them, and drops the connection before any reply is read. */
async function withLostReplies<T>(calls: number, send: () => Promise<T>[]): Promise<T[]> {
  await observer.config("RESETSTAT");
  const socket = (t.redis as unknown as { stream: import("node:net").Socket }).stream;
  socket.pause();
  const pending = send();
  while ((await scriptCalls()) < calls) await new Promise((r) => setTimeout(r, 5));
  socket.destroy();
  return Promise.all(pending);
}

describe("an event whose reply was lost with the connection", () => {
  it("is counted once when ioredis re-sends it, and answered 201 with its event id and the current total", async () => {
    const replies = await withLostReplies(3, () => [lesson("lost-a"), lesson("lost-a"), lesson("lost-b")]);
    expect(replies.map((r) => r.status)).toEqual([201, 201, 201]);
    // Redis ran the three scripts once each before the drop, and the re-sent three again.
    expect(await scriptCalls()).toBe(6);
    // The changes went with the lost replies: each answer carries the total as it stands.
    expect(replies.map((r) => r.body.total)).toEqual([2, 2, 1]);
    expect(replies.map((r) => [r.body.points, r.body.achievements])).toEqual([[{}, []], [{}, []], [{}, []]]);
    for (const r of replies) expect(r.body.eventId).toMatch(/^[0-9a-f-]{36}$/);
    expect((await t.call("GET", "/v1/users/lost-a/metrics/lessons")).body.current).toBe(2);
    expect((await t.call("GET", "/v1/users/lost-a/points/xp")).body.total).toBe(20);
    expect((await t.call("GET", "/v1/users/lost-b/points/xp")).body.total).toBe(10);
    // One first identification each: the welcome energy was paid once.
    const energy = await t.call("GET", "/v1/users/lost-a/points/energy?awards=100");
    expect(energy.body.awards.filter((a: { trigger: { type: string } }) => a.trigger.type === "user_creation")).toHaveLength(1);
  });

  it("with an Idempotency-Key, is answered as the first request (201, not a replay)", async () => {
    const [reply] = await withLostReplies(1, () => [lesson("lost-k", { "idempotency-key": "k-1" })]);
    expect(reply!.status).toBe(201);
    expect(reply!.body).toMatchObject({ total: 1, idempotencyKey: "k-1", idempotentReplayed: false });
    const again = await lesson("lost-k", { "idempotency-key": "k-1" });
    expect(again.status).toBe(202);
    expect(again.body.eventId).toBe(reply!.body.eventId);
  });

  it("an admin freeze grant whose reply was lost grants once", async () => {
    expect((await lesson("lost-f")).status).toBe(201);
    const admin = { "x-api-key": t.adminKey };
    const [reply] = await withLostReplies(1, () => [t.call("POST", "/admin/v1/streaks/freezes", { freezes: [{ userId: "lost-f" }] }, admin)]);
    expect(reply).toEqual({ status: 200, body: { issues: [] } });
    expect((await t.call("GET", "/v1/users/lost-f/streak")).body.freezes).toBe(1);
    // A new grant is a new call: it applies.
    expect((await t.call("POST", "/admin/v1/streaks/freezes", { freezes: [{ userId: "lost-f" }] }, admin)).status).toBe(200);
    expect((await t.call("GET", "/v1/users/lost-f/streak")).body.freezes).toBe(2);
  });

  it("does not hold back the events that follow on the new connection", async () => {
    expect((await lesson("lost-a")).body.total).toBe(3);
    expect((await lesson("lost-c")).body.total).toBe(1);
    expect((await t.call("GET", "/v1/users/lost-a/points/xp")).body.total).toBe(30);
  });
});
