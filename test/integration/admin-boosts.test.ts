import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { shardOf } from "../../src/domain/shards.js";
import { demoConfig, dumpTenant, startTestApp, type TestApp } from "../helpers/app.js";
import { wavesDuring } from "../helpers/waves.js";

/**
 * Boosts over HTTP (spec: Points boost, States and transitions, rules 6 and 7; trophy-compat
 * §5.5, §6.4): user boosts through the admin API, the read endpoints, their status by the
 * manual clock (scheduled → active → finished), stacking with the demo's global boosts, rounding,
 * deductions, ending with DELETE, and bad input that must write nothing.
 *
 * One app whose clock only moves forward, from 20 November 2026 to the demo's weekend window
 * (2026-11-28T00:00Z to 2026-11-30T00:00Z): `pro-weekend` ×2 on xp for plan=pro, `weekend`
 * ×1.5 rounding up on coins for everyone. The time triggers are not needed here (jobs off).
 */

let t: TestApp;
let tenantId: string;

beforeAll(async () => {
  const config = demoConfig();
  tenantId = config.tenantId;
  t = await startTestApp({ yaml: config.yaml, manualClock: "2026-11-20T00:00:00Z", jobs: false });
});
afterAll(async () => t.close());

const ADMIN = () => ({ "x-api-key": t.adminKey });
const now = () => new Date(t.clock.now()).toISOString();

async function identify(id: string, attributes?: Record<string, string>) {
  const res = await t.call("PUT", `/v1/users/${id}`, attributes ? { attributes } : {});
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}

async function createBoost(system: string, body: Record<string, unknown>) {
  const res = await t.call("POST", `/admin/v1/points/${system}/boosts`, body, ADMIN());
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

/** Points a lesson event adds to a system (0 if the system is not in the reply). */
async function lesson(id: string, system = "xp", attributes?: Record<string, string>): Promise<number> {
  const res = await t.call("POST", "/v1/metrics/lessons/event", { user: { id }, value: 1, ...(attributes ? { attributes } : {}) });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const entry = res.body.points[system];
  if (!entry) return 0;
  // One award per event here, and the award carries the boosted amount.
  expect(entry.awards).toHaveLength(1);
  expect(entry.awards[0].awarded).toBe(entry.added);
  return entry.added;
}

const adminList = async (system: string, query = "") => {
  const res = await t.call("GET", `/admin/v1/points/${system}/boosts${query}`, undefined, ADMIN());
  expect(res.status).toBe(200);
  return res.body as any[];
};
const userList = async (id: string, system: string, query = "") => {
  const res = await t.call("GET", `/v1/users/${id}/points/${system}/boosts${query}`);
  expect(res.status).toBe(200);
  return res.body as any[];
};
const globalList = async (system: string, query = "") => {
  const res = await t.call("GET", `/v1/points/${system}/boosts${query}`);
  expect(res.status).toBe(200);
  return res.body as any[];
};

describe("a user boost from scheduled to active to finished", () => {
  let boost: any;

  it("is created scheduled, with the PointsBoost shape, and does not apply before its start", async () => {
    await identify("life");
    boost = await createBoost("xp", { userId: "life", name: "Double XP day", multiplier: 2, start: "2026-11-21T00:00:00Z", end: "2026-11-22T00:00:00Z" });
    expect(boost).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      name: "Double XP day",
      status: "scheduled",
      userId: "life",
      pointsSystemId: expect.any(String),
      pointsSystemKey: "xp",
      pointsSystemName: "XP",
      start: "2026-11-21T00:00:00.000Z",
      end: "2026-11-22T00:00:00.000Z",
      multiplier: 2,
      rounding: "down",
      created: "2026-11-20T00:00:00.000Z",
    });
    expect(await adminList("xp")).toEqual([boost]);
    expect(await adminList("xp", "?userId=life")).toEqual([boost]);
    expect(await adminList("xp", "?userId=someone-else")).toEqual([]);
    // An empty userId is no filter, as an empty value of every optional parameter is.
    expect(await adminList("xp", "?userId=")).toEqual(await adminList("xp"));
    expect(await adminList("coins")).toEqual([]);
    // Not a plan=pro user: the pro weekend is not theirs; their own boost is.
    expect(await userList("life", "xp")).toEqual([boost]);
    expect(await lesson("life")).toBe(10);
  });

  it("the global list holds the config's boosts, with their cohort", async () => {
    expect(await globalList("xp")).toEqual([
      {
        id: expect.any(String),
        key: "pro-weekend",
        name: "Pro weekend double XP",
        status: "scheduled",
        userId: null,
        pointsSystemId: boost.pointsSystemId,
        pointsSystemKey: "xp",
        pointsSystemName: "XP",
        start: "2026-11-28T00:00:00.000Z",
        end: "2026-11-30T00:00:00.000Z",
        multiplier: 2,
        rounding: "down",
        userAttributes: [{ key: "plan", value: "pro" }],
      },
    ]);
    expect(await globalList("coins")).toEqual([expect.objectContaining({ key: "weekend", multiplier: 1.5, rounding: "up", status: "scheduled" })]);
    expect(await globalList("energy")).toEqual([]);
  });

  it("is active from its start (inclusive) and doubles the lesson award", async () => {
    await t.setClock("2026-11-21T00:00:00Z");
    expect(await adminList("xp")).toEqual([{ ...boost, status: "active" }]);
    expect(await userList("life", "xp")).toEqual([{ ...boost, status: "active" }]);
    expect(await lesson("life")).toBe(20);
    await t.setClock("2026-11-21T23:59:59.999Z");
    expect(await lesson("life")).toBe(20);
  });

  it("is finished from its end (exclusive): no longer applied, listed only with includeFinished", async () => {
    await t.setClock("2026-11-22T00:00:00Z");
    expect(await lesson("life")).toBe(10);
    expect(await adminList("xp")).toEqual([]);
    expect(await userList("life", "xp")).toEqual([]);
    expect(await adminList("xp", "?includeFinished=true")).toEqual([{ ...boost, status: "finished" }]);
    expect(await userList("life", "xp", "?includeFinished=true")).toEqual([{ ...boost, status: "finished" }]);
    const points = await t.call("GET", "/v1/users/life/points/xp");
    expect(points.body.total).toBe(10 + 20 + 20 + 10);
    expect(points.body.awards.map((a: any) => a.awarded)).toEqual([10, 20, 20, 10]);
  });
});

describe("GET /v1/users/{id}/points/{key}/boosts", () => {
  it("reads the user and their boosts in one round trip", async () => {
    await lesson("boost-waves");
    const { result, waves } = await wavesDuring(t.redis, () => t.call("GET", "/v1/users/boost-waves/points/xp/boosts?includeFinished=true"));
    expect(result.status).toBe(200);
    // The user's read (a script: FCALL, or EVALSHA with LAUREL_LUA=eval) and the shard's boosts together.
    expect(waves).toHaveLength(1);
    expect(waves[0]).toHaveLength(2);
    expect(waves[0]).toContain("hgetall");
  });
});

describe("DELETE /admin/v1/points/{key}/boosts/{id}", () => {
  it("stops an active boost immediately", async () => {
    await t.setClock("2026-11-22T06:00:00Z");
    await identify("stop");
    const boost = await createBoost("xp", { userId: "stop", name: "Triple", multiplier: 3, start: now() });
    expect(boost).toMatchObject({ status: "active", end: null });
    expect(await lesson("stop")).toBe(30);

    await t.setClock("2026-11-22T07:00:00Z");
    const ended = await t.call("DELETE", `/admin/v1/points/xp/boosts/${boost.id}`, undefined, ADMIN());
    expect(ended.status).toBe(200);
    expect(ended.body).toEqual({ ...boost, status: "finished", end: "2026-11-22T07:00:00.000Z" });
    expect(await lesson("stop")).toBe(10);
    expect(await adminList("xp", "?userId=stop")).toEqual([]);
    expect(await adminList("xp", "?userId=stop&includeFinished=true")).toEqual([ended.body]);

    // Ending it again is a no-op.
    const again = await t.call("DELETE", `/admin/v1/points/xp/boosts/${boost.id}`, undefined, ADMIN());
    expect(again).toEqual({ status: 200, body: ended.body });
  });

  it("cancels a scheduled boost: it never applies", async () => {
    await identify("cancel");
    const boost = await createBoost("xp", { userId: "cancel", name: "Later", multiplier: 5, start: "2026-11-23T00:00:00Z", end: "2026-11-24T00:00:00Z" });
    const ended = await t.call("DELETE", `/admin/v1/points/xp/boosts/${boost.id}`, undefined, ADMIN());
    expect(ended.status).toBe(200);
    // A cancelled boost has an empty window: it is finished, not waiting to start.
    expect(ended.body).toMatchObject({ id: boost.id, status: "finished", start: boost.start, end: boost.start });
    expect(await adminList("xp", "?userId=cancel")).toEqual([]);
    expect(await userList("cancel", "xp")).toEqual([]);

    await t.setClock("2026-11-23T12:00:00Z");
    expect(await lesson("cancel")).toBe(10);
    expect(await adminList("xp", "?userId=cancel&includeFinished=true")).toEqual([expect.objectContaining({ id: boost.id, status: "finished", end: boost.start })]);
  });

  it("leaves a boost that finished before as it is: its own end, nothing written", async () => {
    await identify("over");
    const boost = await createBoost("xp", { userId: "over", name: "Hour", multiplier: 2, start: now(), end: "2026-11-23T13:00:00Z" });
    await t.setClock("2026-11-23T14:00:00Z");
    const before = await dumpTenant(t.redis, tenantId);
    const ended = await t.call("DELETE", `/admin/v1/points/xp/boosts/${boost.id}`, undefined, ADMIN());
    expect(ended).toEqual({ status: 200, body: { ...boost, status: "finished" } });
    expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
  });

  it("ends a boost DELETEd in the millisecond it started 1 ms after its start: it ran, so its window is not empty", async () => {
    await t.setClock("2026-11-23T15:00:00Z");
    await identify("blink");
    const boost = await createBoost("xp", { userId: "blink", name: "Blink", multiplier: 3, start: now() });
    expect(await lesson("blink")).toBe(30);
    const ended = await t.call("DELETE", `/admin/v1/points/xp/boosts/${boost.id}`, undefined, ADMIN());
    expect(ended.status).toBe(200);
    // Active for the rest of its millisecond, then finished: not the empty window of a cancelled one.
    expect(ended.body).toEqual({ ...boost, status: "active", end: "2026-11-23T15:00:00.001Z" });
    await t.setClock("2026-11-23T15:00:00.001Z");
    expect(await lesson("blink")).toBe(10);
    expect(await adminList("xp", "?userId=blink&includeFinished=true")).toEqual([{ ...ended.body, status: "finished" }]);
  });
});

describe("stacking, rounding and deductions", () => {
  it("outside the weekend: the coins mobile-lesson trigger pays 1 and pro users get no double XP", async () => {
    await identify("early-pro", { plan: "pro" });
    expect(await lesson("early-pro", "coins", { source: "mobile" })).toBe(1);
    expect(await lesson("early-pro")).toBe(10);
  });

  it("inside the weekend: a user ×2 and the pro-weekend ×2 multiply to ×4 (10 → 40)", async () => {
    await t.setClock("2026-11-28T12:00:00Z");
    await identify("pro-boosted", { plan: "pro" });
    await identify("pro-only", { plan: "pro" });
    await identify("free-boosted", { plan: "free" });
    await identify("free-only", { plan: "free" });
    const own = await createBoost("xp", { userId: "pro-boosted", name: "Own double", multiplier: 2, start: "2026-11-28T00:00:00Z" });
    await createBoost("xp", { userId: "free-boosted", name: "Own double", multiplier: 2, start: "2026-11-28T00:00:00Z" });

    expect(await lesson("pro-boosted")).toBe(40);
    expect(await lesson("pro-only")).toBe(20);
    expect(await lesson("free-boosted")).toBe(20);
    expect(await lesson("free-only")).toBe(10);

    // The user's list: the global boost of their cohort first, then their own.
    const list = await userList("pro-boosted", "xp");
    expect(list.map((b) => [b.key ?? b.id, b.status, b.multiplier])).toEqual([
      ["pro-weekend", "active", 2],
      [own.id, "active", 2],
    ]);
    expect((await userList("free-only", "xp")).length).toBe(0);
    expect(await globalList("xp")).toEqual([expect.objectContaining({ key: "pro-weekend", status: "active" })]);
  });

  it("the coins weekend ×1.5 rounds up: the mobile-lesson trigger pays 2 for 1", async () => {
    expect(await lesson("free-only", "coins", { source: "mobile" })).toBe(2);
    // The event-attribute filter still decides: a web lesson pays no coins.
    expect(await lesson("free-only", "coins", { source: "web" })).toBe(0);
    expect(await lesson("free-only", "coins")).toBe(0);
    expect((await userList("free-only", "coins")).map((b) => [b.key, b.status, b.rounding])).toEqual([["weekend", "active", "up"]]);
  });

  it("stacked boosts that disagree on rounding take the most conservative mode (down, then nearest, then up) of their decimal multipliers", async () => {
    // 1 coin for a mobile lesson, × the weekend's 1.5 (up) × the user's own.
    const cases = [
      ["stack-nearest", 1.5, "nearest", 2], // 2.25: nearest 2 (up would be 3)
      ["stack-down", 1.7, "down", 2], // 2.55: down 2 (nearest or up would be 3)
      ["stack-up", 1.7, "up", 3], // 2.55: both up
      // 4.5: a whole multiplier's mode has no say (spec: a rounding mode applies only to decimal
      // multipliers), so the weekend's up rounds it: 5, not 4.
      ["stack-whole", 3, "down", 5],
    ] as const;
    for (const [id, multiplier, rounding, paid] of cases) {
      await identify(id);
      await createBoost("coins", { userId: id, name: "Own", multiplier, rounding, start: now() });
      expect(await lesson(id, "coins", { source: "mobile" }), id).toBe(paid);
    }
  });

  it("nearest rounds x.5 up and below it down", async () => {
    // 10 XP a lesson; not a pro user, so only the user's own boost applies.
    for (const [id, multiplier, paid] of [["nearest-half", 1.25, 13], ["nearest-below", 1.24, 12]] as const) {
      await identify(id);
      await createBoost("xp", { userId: id, name: "Own", multiplier, rounding: "nearest", start: now() });
      expect(await lesson(id), id).toBe(paid);
    }
  });

  it("never boosts a deduction, even with a user boost on the system", async () => {
    await identify("meter");
    await createBoost("energy", { userId: "meter", name: "Energy ×3", multiplier: 3, start: now() });
    const res = await t.call("POST", "/v1/metrics/api-calls/event", { user: { id: "meter" }, value: 1 });
    expect(res.status).toBe(201);
    expect(res.body.points.energy).toMatchObject({ added: -1, total: 99 });
    expect(res.body.points.energy.awards.map((a: any) => a.awarded)).toEqual([-1]);
    const two = await t.call("POST", "/v1/metrics/api-calls/event", { user: { id: "meter" }, value: 2 });
    expect(two.body.points.energy).toMatchObject({ added: -2, total: 97 });
  });

  it("after the weekend only the user's own boost is left", async () => {
    await t.setClock("2026-11-30T00:00:00Z");
    expect(await lesson("pro-boosted")).toBe(20);
    expect(await lesson("pro-only")).toBe(10);
    expect(await lesson("free-only", "coins", { source: "mobile" })).toBe(1);
    expect(await globalList("xp")).toEqual([]);
    expect(await globalList("xp", "?includeFinished=true")).toEqual([expect.objectContaining({ key: "pro-weekend", status: "finished" })]);
  });
});

describe("bad input writes nothing", () => {
  interface Reply {
    status: number;
    body: any;
  }
  let base: Record<string, unknown>;
  let liveBoostId: string;

  beforeAll(async () => {
    await identify("seed");
    base = { userId: "seed", name: "Seed boost", multiplier: 2, start: now() };
    liveBoostId = (await createBoost("xp", { ...base, name: "Live" })).id;
  });

  async function refused(status: number, send: () => Promise<Reply>): Promise<string> {
    const before = await dumpTenant(t.redis, tenantId);
    expect(Object.keys(before).some((k) => k.endsWith(":ub"))).toBe(true);
    const reply = await send();
    expect(reply.status, JSON.stringify(reply.body)).toBe(status);
    expect(reply.body).toEqual({ error: expect.any(String) });
    expect(reply.body.error.length).toBeGreaterThan(0);
    expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
    return reply.body.error;
  }
  const post = (body: unknown, system = "xp", headers: Record<string, string> = ADMIN()) => t.call("POST", `/admin/v1/points/${system}/boosts`, body, headers);

  it.each([
    ["multiplier 0", { multiplier: 0 }],
    ["a negative multiplier", { multiplier: -2 }],
    ["a multiplier over 1000", { multiplier: 1000.5 }],
    ["a multiplier with more than 6 decimals", { multiplier: 1.0000001 }],
    ["end before start", { start: "2026-12-02T00:00:00Z", end: "2026-12-01T00:00:00Z" }],
    ["end equal to start", { start: "2026-12-02T00:00:00Z", end: "2026-12-02T00:00:00Z" }],
    ["end in the past", { start: "2026-11-01T00:00:00Z", end: "2026-11-29T00:00:00Z" }],
    ["a malformed start", { start: "next tuesday" }],
    ["a start on a day that does not exist", { start: "2026-02-30T00:00:00Z" }],
    ["a start without a zone", { start: "2026-12-01T00:00:00" }],
    ["a malformed end", { end: "2026-13-01" }],
    ["a name with a NUL", { name: "Double\u0000XP" }],
    ["a name with a lone surrogate", { name: "Double \ud800" }],
  ])("refuses %s with 422", async (_name, patch) => {
    await refused(422, () => post({ ...base, ...patch }));
  });

  it("accepts the bounds: a multiplier of 1000, one with 6 decimals, an end 1 ms from now", async () => {
    await identify("bounds");
    const soon = new Date(t.clock.now() + 1).toISOString();
    for (const patch of [{ multiplier: 1000 }, { multiplier: 1.000001 }, { end: soon }]) {
      expect(await createBoost("xp", { ...base, userId: "bounds", ...patch })).toMatchObject({ userId: "bounds", ...("end" in patch ? { end: soon } : patch) });
    }
  });

  it("refuses an end equal to now with 422 (it must be in the future)", async () => {
    expect(await refused(422, () => post({ ...base, start: "2026-11-01T00:00:00Z", end: now() }))).toBe("end must be in the future");
  });

  it("refuses a multiplier of 1e400 (JSON.parse makes it Infinity)", async () => {
    await refused(422, () => post(`{"userId": "seed", "name": "x", "multiplier": 1e400, "start": "${now()}"}`));
    await refused(422, () => post(`{"userId": "seed", "name": "x", "multiplier": -1e400, "start": "${now()}"}`));
  });

  it.each([
    ["the multiplier as a string", { multiplier: "2" }],
    ["the multiplier null", { multiplier: null }],
    ["no multiplier", { multiplier: undefined }],
    ["no start", { start: undefined }],
    ["start as a number", { start: Date.parse("2026-12-01T00:00:00Z") }],
    ["an unknown rounding", { rounding: "sideways" }],
    ["an empty name", { name: "" }],
    ["an unknown field", { factor: 2 }],
    ["userId as a number", { userId: 42 }],
    ["an empty userId", { userId: "" }],
  ])("refuses %s with 400", async (_name, patch) => {
    await refused(400, () => post(JSON.stringify({ ...base, ...patch })));
  });

  it("refuses a malformed JSON body with 400", async () => {
    await refused(400, () => post('{"userId": "seed", "multiplier": '));
  });

  it("refuses an unknown user or system with 404", async () => {
    expect(await refused(404, () => post({ ...base, userId: "nobody" }))).toMatch(/user/i);
    expect(await refused(404, () => post(base, "no-such-system"))).toMatch(/points system/i);
    await refused(404, () => t.call("GET", "/admin/v1/points/no-such-system/boosts", undefined, ADMIN()));
    await refused(404, () => t.call("GET", "/v1/points/no-such-system/boosts"));
    await refused(404, () => t.call("GET", "/v1/users/nobody/points/xp/boosts"));
    await refused(404, () => t.call("GET", "/v1/users/seed/points/no-such-system/boosts"));
  });

  it("refuses DELETE of an unknown boost id, or of a real id under another system, with 404", async () => {
    await refused(404, () => t.call("DELETE", "/admin/v1/points/xp/boosts/00000000-0000-0000-0000-000000000000", undefined, ADMIN()));
    await refused(404, () => t.call("DELETE", `/admin/v1/points/coins/boosts/${liveBoostId}`, undefined, ADMIN()));
    await refused(404, () => t.call("DELETE", `/admin/v1/points/no-such-system/boosts/${liveBoostId}`, undefined, ADMIN()));
  });

  it("refuses a missing, wrong or application key on every admin boost route with 401", async () => {
    const keys: Record<string, string>[] = [{ "x-api-key": "" }, { "x-api-key": "wrong" }, { "x-api-key": t.apiKey }];
    for (const headers of keys) {
      await refused(401, () => post(base, "xp", headers));
      await refused(401, () => t.call("GET", "/admin/v1/points/xp/boosts", undefined, headers));
      await refused(401, () => t.call("DELETE", `/admin/v1/points/xp/boosts/${liveBoostId}`, undefined, headers));
    }
    // No header at all.
    await refused(401, async () => {
      const bare = await fetch(`${t.url}/admin/v1/points/xp/boosts`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(base) });
      return { status: bare.status, body: await bare.json() };
    });
    // The admin key is not an application key.
    await refused(401, () => t.call("GET", "/v1/points/xp/boosts", undefined, ADMIN()));
    // The live boost is still there and still active.
    expect(await adminList("xp", "?userId=seed")).toEqual([expect.objectContaining({ id: liveBoostId, status: "active" })]);
  });

  it("refuses a bad includeFinished with 400", async () => {
    await refused(400, () => t.call("GET", "/v1/points/xp/boosts?includeFinished=yes"));
    await refused(400, () => t.call("GET", "/admin/v1/points/xp/boosts?includeFinished=1", undefined, ADMIN()));
  });
});

describe("the listings of one user's boosts", () => {
  it("hold only the boosts of the system asked for", async () => {
    await identify("two-systems");
    const xp = await createBoost("xp", { userId: "two-systems", name: "XP", multiplier: 2, start: now() });
    const coins = await createBoost("coins", { userId: "two-systems", name: "Coins", multiplier: 3, start: now() });
    expect((await userList("two-systems", "xp")).filter((b) => b.userId !== null)).toEqual([xp]);
    expect((await userList("two-systems", "coins")).filter((b) => b.userId !== null)).toEqual([coins]);
    expect(await adminList("xp", "?userId=two-systems")).toEqual([xp]);
    expect(await adminList("coins", "?userId=two-systems")).toEqual([coins]);
  });
});

describe("the admin listing of user boosts", () => {
  it("lists them oldest created first, those created in the same millisecond by id, across shards", async () => {
    const users = ["order-a", "order-b", "order-c", "order-d", "order-e", "order-f"];
    for (const id of users) await identify(id);
    // Users on several shards: the listing merges one HGETALL per shard, so its order is the sort's.
    expect(new Set(users.map((id) => shardOf(id, t.tenants[0]!.shards))).size).toBeGreaterThan(1);
    const start = Date.parse(now()) + 86_400_000;
    const body = (userId: string) => ({ userId, name: "Order", multiplier: 2, start: new Date(start).toISOString(), end: new Date(start + 3_600_000).toISOString() });
    // Created later first: the last three in one millisecond, then the first three a minute apart.
    const sameMs = [];
    for (const id of users.slice(3)) sameMs.push(await createBoost("coins", body(id)));
    await t.setClock(new Date(Date.parse(now()) + 60_000).toISOString());
    const later = [];
    for (const id of users.slice(0, 3)) later.push(await createBoost("coins", body(id)));
    const listed = (await adminList("coins", "?includeFinished=true")).filter((b) => users.includes(b.userId));
    const byId = (a: { id: string }, b: { id: string }) => a.id.localeCompare(b.id);
    expect(listed.map((b) => b.id)).toEqual([...sameMs.sort(byId), ...later.sort(byId)].map((b) => b.id));
  });
});
