import { Redis } from "ioredis";
import type { Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runTimeTrigger } from "../../src/jobs/time-triggers.js";
import { readUser } from "../../src/store/user-store.js";
import { demoConfig, startAppOnOwnRedis, type TestApp } from "../helpers/app.js";
import { waitFor } from "../helpers/service-process.js";

/**
 * An admin user boost whose reply was lost with the Redis connection (a network blip after Redis
 * ran the script): ioredis re-sends the call on the new connection (autoResendUnfulfilledCommands)
 * and lua/userBoost-3.lua ran twice. The second run ended the boost it found under the same id
 * "now" and added it again: two entries of one boost in the user's state, both active over
 * [start, now). A time trigger's catch-up pays each interval by the boosts active at its due
 * instant (README, Boosts on time triggers), so the intervals due in that window were boosted
 * twice (x2 x2: 20 coins for two daily allowances of 5 under a x2 boost, instead of 20, 40).
 *
 * The drop is made exact, as in lost-reply.test.ts: the service's socket stops reading, the test
 * waits until Redis has run the call (INFO commandstats on another connection), then destroys
 * the socket; the time trigger is paid by calling the job's function (no job runs: jobs off).
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

async function scriptCalls(): Promise<number> {
  const stats = await observer.info("commandstats");
  const calls = (command: string) => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
  return calls("fcall") + calls("evalsha") + calls("eval");
}

const admin = { "x-api-key": "demo-admin-key" };

describe("a user boost added with its reply lost (the call re-sent by ioredis)", () => {
  it("is added once: a catch-up of a time trigger boosts each interval by it once", async () => {
    const user = "boosted";
    // First identified at 2026-03-02T12:00: the daily allowance (5 coins) is due from 03-03T12:00.
    expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: user }, value: 1 })).status).toBe(201);
    // Two intervals due and not paid yet (no job runs in this app): 03-03T12:00 and 03-04T12:00.
    await t.setClock("2026-03-04T13:00:00Z");

    await observer.config("RESETSTAT");
    const socket = (t.redis as unknown as { stream: Socket }).stream;
    socket.pause();
    const created = t.call("POST", "/admin/v1/points/coins/boosts", { userId: user, name: "Double coins", multiplier: 2, start: "2026-03-03T00:00:00Z", end: "2026-03-10T00:00:00Z" }, admin);
    await waitFor(async () => (await scriptCalls()) >= 1, "Redis to run the boost's call");
    socket.destroy();
    const reply = await created;
    expect(reply.status).toBe(201);
    // ioredis sent it again on the new connection.
    await waitFor(async () => (await scriptCalls()) >= 2, "the re-sent call");

    // One boost for the user, as the admin list says.
    const listed = await t.call("GET", `/admin/v1/points/coins/boosts?userId=${user}`, undefined, admin);
    expect(listed.body).toHaveLength(1);
    // And in the user's state: one entry of it (was two, the first ended at the re-send).
    const { store } = t.app.tenants.all[0]!;
    const read = await readUser(store, user, ["bo:coins"]);
    const entries = String(read!.state.get("bo:coins") ?? "").split(";").filter((e) => e !== "");
    expect(entries).toHaveLength(1);

    // The catch-up: two intervals of 5, each x2 once: 20 coins (were 40: x2 x2).
    const index = store.tenantRules.rules.tt.findIndex((tt: { k: string }) => tt.k === "daily-allowance") + 1;
    expect(index).toBeGreaterThan(0);
    await runTimeTrigger(store, index, t.clock.now());
    expect((await t.call("GET", `/v1/users/${user}/points/coins`)).body).toMatchObject({ total: 20 });
  });
});
