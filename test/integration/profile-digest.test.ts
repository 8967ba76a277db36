import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/app.js";
import { commandsDuring } from "../helpers/monitor.js";

// The event script reads and writes no profile field when the event repeats the profile the
// last event applied (its digest is kept in the user's state, `pd`: lua/event-2.lua ARGV[7]).
// Every other write of a profile field forgets the digest, so a later event applies its fields.
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ manualClock: "2026-03-02T12:00:00Z", jobs: false });
});
afterAll(async () => t.close());

const event = (user: Record<string, unknown>) => t.call("POST", "/v1/metrics/lessons/event", { user, value: 1 });
const profileOf = async (id: string) => (await t.call("GET", `/v1/users/${id}`)).body;
/**
 * The commands the event script ran inside Redis for one event: those on this file's tenant's keys
 * (MONITOR sees every client's scripts, and other test files may run at the same time).
 */
const insideEvent = async (user: Record<string, unknown>) => {
  const prefix = `{${t.app.tenants.all[0]!.tenant.id}:`;
  return (await commandsDuring(inject("redisUrl"), () => event(user), t.redis)).luaCommands.filter((c) => c[1]?.startsWith(prefix));
};
const PROFILE_FIELDS = ["em", "nm", "tz", "se", "dt"];

describe("the event's profile digest", () => {
  it("an event repeating the profile reads no profile field and writes none", async () => {
    const user = { id: "digest-same", email: "same@example.com", name: "Same", tz: "Europe/Paris" };
    expect((await event(user)).status).toBe(201);
    const inside = await insideEvent(user);
    const hmgets = inside.filter((c) => c[0]!.toLowerCase() === "hmget");
    const hsets = inside.filter((c) => c[0]!.toLowerCase() === "hset");
    expect(hmgets).toHaveLength(1);
    // The state (and what the filters read), no profile field.
    expect(hmgets[0]!.slice(2)).toContain("s");
    expect(hmgets[0]!.slice(2).filter((f) => PROFILE_FIELDS.includes(f))).toEqual([]);
    expect(hsets).toHaveLength(1);
    expect(hsets[0]!.slice(2).filter((_, i) => i % 2 === 0)).toEqual(["s"]);
  });

  it("an event with a changed field reads the sent fields and writes only the changed one", async () => {
    const user = { id: "digest-changed", email: "old@example.com", name: "Name", tz: "UTC" };
    await event(user);
    const inside = await insideEvent({ ...user, email: "new@example.com" });
    const read = inside.filter((c) => c[0]!.toLowerCase() === "hmget").flatMap((c) => c.slice(2));
    expect(read).toEqual(expect.arrayContaining(["em", "nm"]));
    const hsets = inside.filter((c) => c[0]!.toLowerCase() === "hset");
    expect(hsets.flatMap((c) => c.slice(2).filter((_, i) => i % 2 === 0)).sort()).toEqual(["em", "s"]);
    expect(await profileOf("digest-changed")).toMatchObject({ email: "new@example.com", name: "Name", tz: "UTC" });
  });

  it("a profile changed by the users API is set back by the next event that sends the old values", async () => {
    const user = { id: "digest-api", email: "event@example.com", tz: "Asia/Tokyo" };
    await event(user);
    await event(user); // the digest is stored and matched
    expect((await t.call("PATCH", "/v1/users/digest-api", { email: "api@example.com", tz: "America/New_York" })).status).toBe(200);
    expect(await profileOf("digest-api")).toMatchObject({ email: "api@example.com", tz: "America/New_York" });
    // Same fields as before the PATCH: the stored digest would match, but the PATCH forgot it.
    expect((await event(user)).status).toBe(201);
    expect(await profileOf("digest-api")).toMatchObject({ email: "event@example.com", tz: "Asia/Tokyo" });
  });

  it("a profile set by identification (PUT) is set back likewise", async () => {
    const user = { id: "digest-put", email: "event@example.com", name: "Event" };
    await event(user);
    await event(user);
    expect((await t.call("PUT", "/v1/users/digest-put", { email: "put@example.com", name: "Put" })).status).toBe(200);
    await event(user);
    expect(await profileOf("digest-put")).toMatchObject({ email: "event@example.com", name: "Event" });
  });

  it("a profile changed by completing an api achievement (complete-4) is set back likewise", async () => {
    const user = { id: "digest-complete", email: "event@example.com", name: "Event" };
    await event(user);
    await event(user);
    const completed = await t.call("POST", "/v1/achievements/complete-profile/complete", { user: { ...user, email: "complete@example.com", name: "Complete" } });
    expect(completed.status).toBe(201);
    expect(await profileOf("digest-complete")).toMatchObject({ email: "complete@example.com", name: "Complete" });
    await event(user);
    expect(await profileOf("digest-complete")).toMatchObject({ email: "event@example.com", name: "Event" });
  });

  it("an event without profile fields leaves the stored profile as it is", async () => {
    await event({ id: "digest-none", email: "kept@example.com", tz: "Europe/Berlin" });
    expect((await event({ id: "digest-none" })).status).toBe(201);
    expect(await profileOf("digest-none")).toMatchObject({ email: "kept@example.com", tz: "Europe/Berlin" });
  });
});
