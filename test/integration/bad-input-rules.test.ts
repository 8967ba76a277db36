import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { demoConfig, dumpTenant, startTestApp, type TestApp } from "../helpers/app.js";

/**
 * Bad input on the endpoints of issue 3 other than boosts (those are in admin-boosts.test.ts):
 * users, preferences, API completions, admin freezes and restore. Every refusal carries exactly
 * `{"error": "<message>"}` (trophy-compat §1.5) and writes nothing: each case compares a dump of
 * the tenant's keys before and after.
 */

let t: TestApp;
let tenantId: string;

beforeAll(async () => {
  const config = demoConfig();
  tenantId = config.tenantId;
  t = await startTestApp({ yaml: config.yaml, manualClock: "2026-03-02T12:00:00Z", jobs: false });
  // An existing user with preferences, a streak and a completion, so that a partial write to a
  // known user would show in the dump too.
  expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "seed", tz: "Europe/Paris", attributes: { plan: "pro" } }, value: 1 })).status).toBe(201);
  expect((await t.call("PATCH", "/v1/users/seed/preferences", { notifications: { recap: ["email"] } })).status).toBe(200);
  expect((await t.call("POST", "/v1/achievements/complete-profile/complete", { user: { id: "seed" } })).status).toBe(201);
});
afterAll(async () => t.close());

interface Reply {
  status: number;
  body: unknown;
}

async function refused(status: number, send: () => Promise<Reply>): Promise<string> {
  const before = await dumpTenant(t.redis, tenantId);
  expect(Object.keys(before).some((key) => key.endsWith(":u:seed"))).toBe(true);
  const reply = await send();
  expect(reply.status, JSON.stringify(reply.body)).toBe(status);
  expect(reply.body).toEqual({ error: expect.any(String) });
  const message = (reply.body as { error: string }).error;
  expect(message.trim().length).toBeGreaterThan(0);
  expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
  return message;
}

const ADMIN = () => ({ "x-api-key": t.adminKey });

describe("users", () => {
  it.each([
    ["POST", "/v1/users", { id: "newbie", timezone: "UTC" }, "an unknown field (timezone for tz)"],
    ["POST", "/v1/users", { id: "newbie", extra: 1 }, "an unknown top-level field"],
    ["POST", "/v1/users", { name: "No id" }, "no id"],
    ["POST", "/v1/users", { id: 42 }, "a numeric id"],
    ["POST", "/v1/users", { id: "" }, "an empty id"],
    ["POST", "/v1/users", { id: "newbie", name: 7 }, "a numeric name"],
    ["POST", "/v1/users", { id: "newbie", subscribeToEmails: "yes" }, "subscribeToEmails as a string"],
    ["POST", "/v1/users", { id: "newbie", deviceTokens: "tok" }, "deviceTokens not an array"],
    ["POST", "/v1/users", { id: "newbie", attributes: { plan: 1 } }, "a non-string attribute value"],
    ["POST", "/v1/users", { id: "newbie", attributes: ["plan"] }, "attributes as an array"],
    ["POST", "/v1/users", [{ id: "newbie" }], "an array body"],
    ["PUT", "/v1/users/seed", { id: "seed" }, "an id in the identify body (the id is in the path)"],
    ["PUT", "/v1/users/seed", { tz: 1 }, "a numeric tz"],
    ["PUT", "/v1/users/newbie", { nickname: "n" }, "an unknown field on identify"],
    ["PATCH", "/v1/users/seed", { email: ["a@example.com"] }, "email as an array"],
    ["PATCH", "/v1/users/seed", { timezone: "UTC" }, "an unknown field on update"],
  ])("%s %s refuses %j (%s) with 400", async (method, path, body, _why) => {
    await refused(400, () => t.call(method, path, body));
  });

  it("refuses malformed JSON with 400", async () => {
    await refused(400, () => t.call("POST", "/v1/users", '{"id": "newbie"'));
    await refused(400, () => t.call("PUT", "/v1/users/newbie", ""));
    await refused(400, () => t.call("PATCH", "/v1/users/seed", "null"));
  });

  it("refuses an unknown user on PATCH with 404, and does not create it", async () => {
    expect(await refused(404, () => t.call("PATCH", "/v1/users/ghost", { name: "Ghost" }))).toMatch(/not found/i);
    await refused(404, () => t.call("GET", "/v1/users/ghost"));
  });

  it("refuses undeclared attribute keys with 422 and the hosted API's message", async () => {
    expect(await refused(422, () => t.call("POST", "/v1/users", { id: "newbie", attributes: { plan: "pro", tier: "gold" } }))).toBe("Invalid attribute keys: tier");
    expect(await refused(422, () => t.call("PUT", "/v1/users/seed", { attributes: { tier: "gold", source: "web" } }))).toBe("Invalid attribute keys: tier, source");
    // `source` is an event attribute, not a user attribute.
    expect(await refused(422, () => t.call("PATCH", "/v1/users/seed", { attributes: { source: "web" } }))).toBe("Invalid attribute keys: source");
    // The attribute check comes before the existence check, and still writes nothing.
    await refused(422, () => t.call("PATCH", "/v1/users/ghost", { attributes: { tier: "gold" } }));
  });

  it("refuses control characters or lone surrogates in deviceTokens with 422", async () => {
    expect(await refused(422, () => t.call("POST", "/v1/users", { id: "newbie", deviceTokens: ["tok\u0000en"] }))).toBe("body.deviceTokens contains control characters");
    expect(await refused(422, () => t.call("PATCH", "/v1/users/seed", { deviceTokens: ["ok", "\ud800"] }))).toBe("body.deviceTokens contains a lone surrogate (not valid Unicode)");
  });

  it("refuses an unknown zone or a malformed email with 422", async () => {
    await refused(422, () => t.call("POST", "/v1/users", { id: "newbie", tz: "Mars/Olympus" }));
    expect(await refused(422, () => t.call("PATCH", "/v1/users/seed", { email: "not-an-email" }))).toBe("body.email is not an email address");
    expect(await refused(422, () => t.call("POST", "/v1/metrics/lessons/event", { user: { id: "seed", email: "not-an-email" }, value: 1 }))).toBe("user.email is not an email address");
    expect(await refused(422, () => t.call("PUT", "/v1/users/seed", { attributes: { plan: "p\u0007" } }))).toBe("body.attributes.plan must be at most 1000 characters without control characters");
  });

  it("refuses subscribeToEmails true without an email in the same request with 422, on every upsert", async () => {
    // Named where the request holds the user: the users routes' body is the user, an event's and a completion's is `user`.
    const message = "body.email is required when subscribeToEmails is true";
    expect(await refused(422, () => t.call("POST", "/v1/users", { id: "newbie", subscribeToEmails: true }))).toBe(message);
    expect(await refused(422, () => t.call("PUT", "/v1/users/seed", { subscribeToEmails: true, name: "Seed" }))).toBe(message);
    expect(await refused(422, () => t.call("PATCH", "/v1/users/seed", { subscribeToEmails: true, email: null }))).toBe(message);
    const nested = "user.email is required when subscribeToEmails is true";
    expect(await refused(422, () => t.call("POST", "/v1/metrics/lessons/event", { user: { id: "seed", subscribeToEmails: true }, value: 1 }))).toBe(nested);
    expect(await refused(422, () => t.call("POST", "/v1/achievements/complete-profile/complete", { user: { id: "newbie", subscribeToEmails: true } }))).toBe(nested);
  });

  it("refuses a bad user id in the path with 400", async () => {
    await refused(400, () => t.call("PUT", `/v1/users/${"u".repeat(300)}`, {}));
    await refused(400, () => t.call("PUT", "/v1/users/se%01ed", {}));
    await refused(400, () => t.call("PUT", "/v1/users/%20seed", {}));
  });

  it("refuses the admin key or no key with 401", async () => {
    await refused(401, () => t.call("POST", "/v1/users", { id: "newbie" }, ADMIN()));
    await refused(401, () => t.call("PUT", "/v1/users/newbie", {}, { "x-api-key": "" }));
    await refused(401, () => t.call("PATCH", "/v1/users/seed", { name: "x" }, { "x-api-key": "wrong" }));
    await refused(401, () => t.call("GET", "/v1/users/seed", undefined, ADMIN()));
  });
});

describe("user field bounds: the last value taken, the next refused", () => {
  const id = (n: number) => `b${"u".repeat(n - 1)}`;
  it.each([
    ["id of 256 characters", { id: id(256) }, { id: id(255) }, 400],
    ["name of 201 characters", { id: "bound-name", name: "n".repeat(201) }, { id: "bound-name", name: "n".repeat(200) }, 400],
    ["email of 321 characters", { id: "bound-email", email: `${"e".repeat(309)}@example.com` }, { id: "bound-email", email: `${"e".repeat(308)}@example.com` }, 400],
    ["101 device tokens", { id: "bound-tokens", deviceTokens: Array.from({ length: 101 }, (_, i) => `t${i}`) }, { id: "bound-tokens", deviceTokens: Array.from({ length: 100 }, (_, i) => `t${i}`) }, 400],
    ["a device token of 513 characters", { id: "bound-token", deviceTokens: ["d".repeat(513)] }, { id: "bound-token", deviceTokens: ["d".repeat(512)] }, 400],
    ["an empty device token", { id: "bound-token0", deviceTokens: [""] }, { id: "bound-token0", deviceTokens: ["x"] }, 400],
    ["an attribute value of 1001 characters", { id: "bound-attr", attributes: { plan: "p".repeat(1001) } }, { id: "bound-attr", attributes: { plan: "p".repeat(1000) } }, 422],
  ])("POST /v1/users refuses %s, takes the bound", async (_what, over, at, status) => {
    await refused(status as number, () => t.call("POST", "/v1/users", over));
    const taken = await t.call("POST", "/v1/users", at);
    expect(taken.status, JSON.stringify(taken.body)).toBe(201);
    const { id: _id, ...fields } = at as Record<string, unknown>;
    expect(taken.body).toMatchObject(fields);
  });

  it.each([
    ["a C0 control (BEL)", "Ada\u0007"],
    ["a C1 control (NEL)", "Ada\u0085"],
    ["a C1 control (CSI)", "\u009bAda"],
    ["DEL", "Ada\u007f"],
    ["a lone surrogate", "Ada\udc00"],
  ])("refuses a name with %s with 422, on create, identify and update", async (what, name) => {
    const said = what === "a lone surrogate" ? "a lone surrogate (not valid Unicode)" : "control characters";
    expect(await refused(422, () => t.call("POST", "/v1/users", { id: "newbie", name }))).toBe(`body.name contains ${said}`);
    expect(await refused(422, () => t.call("PUT", "/v1/users/seed", { name }))).toBe(`body.name contains ${said}`);
    expect(await refused(422, () => t.call("PATCH", "/v1/users/seed", { name }))).toBe(`body.name contains ${said}`);
    expect(await refused(422, () => t.call("POST", "/v1/metrics/lessons/event", { user: { id: "seed", name }, value: 1 }))).toBe(`user.name contains ${said}`);
  });

  it("refuses C1 controls in ids, device tokens and attribute values too", async () => {
    await refused(400, () => t.call("POST", "/v1/users", { id: "new\u0085bie" }));
    await refused(400, () => t.call("PUT", "/v1/users/se%C2%9Fed", {}));
    await refused(422, () => t.call("PATCH", "/v1/users/seed", { deviceTokens: ["tok\u0090en"] }));
    await refused(422, () => t.call("PATCH", "/v1/users/seed", { attributes: { plan: "pro\u0080" } }));
  });
});

describe("messages that quote a refused value", () => {
  // Each quotes the start of what was sent (60 or 64 UTF-16 units), here with an emoji across
  // the cut: cut in half, the message held a lone surrogate, sent as "\ud83d", which strict JSON
  // parsers (serde_json) refuse, so the client could not read why it was refused.
  const across = (units: number) => `${"a".repeat(units - 1)}😀`;
  it.each([
    ["a name too long (the value's preview)", () => t.call("POST", "/v1/users", { id: "newbie", name: "😀".repeat(101) }), 400],
    ["a body that is a JSON string", () => t.call("POST", "/v1/users", JSON.stringify(across(59))), 400],
    ["an undeclared attribute key", () => t.call("POST", "/v1/users", { id: "newbie", attributes: { [across(64)]: "x" } }), 422],
    ["an undeclared filter key", () => t.call("GET", `/v1/achievements?userAttributes=${encodeURIComponent(across(64))}:x`), 422],
    ["a filter key named twice", () => t.call("GET", `/v1/achievements?userAttributes=${encodeURIComponent(`${across(64)}:x,${across(64)}:y`)}`), 400],
  ])("never cut a character in half: %s", async (_what, send, status) => {
    const message = await refused(status as number, send as () => Promise<Reply>);
    expect(message.isWellFormed(), JSON.stringify(message)).toBe(true);
  });
});

describe("preferences", () => {
  it.each([
    [{ notifications: { sms_digest: ["email"] } }, "an unknown notification type"],
    [{ notifications: { achievementCompleted: ["email"] } }, "the camelCase name instead of the wire name"],
    [{ notifications: { recap: ["sms"] } }, "an unknown channel"],
    [{ notifications: { recap: "email" } }, "a channel list that is a string"],
    [{ notifications: { recap: ["email", "push", "email"] } }, "more than two channels"],
    [{ notifications: ["recap"] }, "notifications as an array"],
    [{ notifications: { recap: ["email"] }, streak: {} }, "an unknown top-level field"],
  ])("refuses %j (%s) with 400", async (body, _why) => {
    await refused(400, () => t.call("PATCH", "/v1/users/seed/preferences", body));
  });

  it("names a channel list's shape, an array of the channels, not of objects", async () => {
    // The channels were a named alias, which the message read as "an object".
    expect(await refused(400, () => t.call("PATCH", "/v1/users/seed/preferences", { notifications: { recap: "email" } }))).toBe(
      'body.notifications.recap must be (an array of strings (each "email" or "push"), at most 2 items) or null (got "email")',
    );
  });

  it("refuses a malformed user id in the path with 400 on GET and PATCH", async () => {
    for (const id of ["se%01ed", "%20seed", "u".repeat(256)]) {
      await refused(400, () => t.call("GET", `/v1/users/${id}/preferences`));
      await refused(400, () => t.call("PATCH", `/v1/users/${id}/preferences`, { notifications: { recap: ["email"] } }));
    }
  });

  it("refuses an unknown user with 404 on GET and PATCH", async () => {
    await refused(404, () => t.call("GET", "/v1/users/ghost/preferences"));
    await refused(404, () => t.call("PATCH", "/v1/users/ghost/preferences", { notifications: { recap: ["email"] } }));
  });

  it("refuses the admin key with 401", async () => {
    await refused(401, () => t.call("PATCH", "/v1/users/seed/preferences", { notifications: { recap: [] } }, ADMIN()));
  });
});

describe("achievement completion", () => {
  const complete = (key: string, body: unknown, headers?: Record<string, string>) => t.call("POST", `/v1/achievements/${key}/complete`, body, headers);

  it("refuses an unknown achievement with 404", async () => {
    await refused(404, () => complete("no-such-achievement", { user: { id: "newbie" } }));
  });

  it.each(["first-lesson", "week-streak", "dedicated"])("refuses the non-API achievement %s with 422, for a new user too", async (key) => {
    await refused(422, () => complete(key, { user: { id: "seed" } }));
    await refused(422, () => complete(key, { user: { id: "newbie" } }));
  });

  it.each([
    [{}, "no user"],
    [{ user: "seed" }, "user as a string"],
    [{ user: { id: 1 } }, "a numeric user id"],
    [{ user: { id: "newbie" }, value: 1 }, "an unknown top-level field"],
    [{ user: { id: "newbie", timezone: "UTC" } }, "an unknown user field"],
    [{ userId: "newbie" }, "userId instead of user"],
  ])("refuses %j (%s) with 400", async (body, _why) => {
    await refused(400, () => complete("complete-profile", body));
  });

  it("refuses an undeclared attribute with 422", async () => {
    expect(await refused(422, () => complete("complete-profile", { user: { id: "newbie", attributes: { tier: "gold" } } }))).toBe("Invalid attribute keys: tier");
  });

  it("refuses the admin key with 401", async () => {
    await refused(401, () => complete("complete-profile", { user: { id: "newbie" } }, ADMIN()));
  });
});

describe("admin streak freezes and restore", () => {
  const freezes = (body: unknown, headers: Record<string, string> = ADMIN()) => t.call("POST", "/admin/v1/streaks/freezes", body, headers);
  const restore = (body: unknown, headers: Record<string, string> = ADMIN()) => t.call("POST", "/admin/v1/streaks/restore", body, headers);

  it("refuses 0 or 1001 freeze entries with 400", async () => {
    // In words, not typia's names ("Array<> & MinItems<1>").
    expect(await refused(400, () => freezes({ freezes: [] }))).toBe("body.freezes must be an array, at least 1 item (got [])");
    expect(await refused(400, () => freezes({ freezes: Array.from({ length: 1001 }, () => ({ userId: "seed" })) }))).toMatch(/^body\.freezes must be an array, at most 1000 items \(got \[/);
  });

  it("accepts 1000 entries (the bound), granting up to the maximum", async () => {
    const res = await freezes({ freezes: Array.from({ length: 1000 }, () => ({ userId: "seed" })) });
    expect(res.status).toBe(200);
    expect(res.body.issues).toEqual([expect.objectContaining({ userId: "seed", level: "warning" })]);
    expect((await t.call("GET", "/v1/users/seed/streak")).body).toMatchObject({ freezes: 2 });
  });

  it.each([
    [{}, "no freezes"],
    [{ freezes: { userId: "seed" } }, "freezes as an object"],
    [{ freezes: [{ userId: 1 }] }, "a numeric userId"],
    [{ freezes: [{ id: "seed" }] }, "id instead of userId"],
    [{ freezes: [{ userId: "seed", amount: 2 }] }, "an unknown entry field"],
    [{ freezes: [{ userId: "seed" }], dryRun: true }, "an unknown top-level field"],
    [{ freezes: [{ userId: "" }] }, "an empty userId"],
  ])("refuses the freezes body %j (%s) with 400", async (body, _why) => {
    await refused(400, () => freezes(body));
  });

  it("refuses 0 or 101 users to restore with 400", async () => {
    await refused(400, () => restore({ users: [] }));
    await refused(400, () => restore({ users: Array.from({ length: 101 }, (_, i) => ({ id: `u${i}` })) }));
  });

  it.each([
    [{}, "no users"],
    [{ users: ["seed"] }, "ids as strings"],
    [{ users: [{ userId: "seed" }] }, "userId instead of id"],
    [{ users: [{ id: "seed" }], force: true }, "an unknown top-level field"],
  ])("refuses the restore body %j (%s) with 400", async (body, _why) => {
    await refused(400, () => restore(body));
  });

  it("refuses the application key, a wrong key or no key with 401", async () => {
    for (const headers of [{ "x-api-key": t.apiKey }, { "x-api-key": "wrong" }, { "x-api-key": "" }]) {
      await refused(401, () => freezes({ freezes: [{ userId: "seed" }] }, headers));
      await refused(401, () => restore({ users: [{ id: "seed" }] }, headers));
    }
  });

  it("writes nothing for a request whose every user is unknown (200 with issues)", async () => {
    const before = await dumpTenant(t.redis, tenantId);
    const res = await freezes({ freezes: [{ userId: "ghost" }] });
    expect(res).toEqual({ status: 200, body: { issues: [expect.objectContaining({ userId: "ghost", level: "error", reason: "User does not exist" })] } });
    const restored = await restore({ users: [{ id: "ghost" }] });
    expect(restored).toEqual({ status: 200, body: { restoredUsers: [], issues: [expect.objectContaining({ userId: "ghost", level: "error", reason: "User does not exist" })] } });
    expect(await dumpTenant(t.redis, tenantId)).toEqual(before);
  });
});

describe("a tenant without streak freezes", () => {
  let bare: TestApp;
  let bareTenant: string;
  beforeAll(async () => {
    const config = demoConfig();
    bareTenant = config.tenantId;
    bare = await startTestApp({ yaml: config.yaml.replace(/\n      freezes:\n(        .*\n)+/, "\n"), manualClock: "2026-03-02T12:00:00Z", jobs: false });
    expect((await bare.call("PUT", "/v1/users/seed", {})).status).toBe(200);
  });
  afterAll(async () => bare.close());

  it("refuses a freeze grant with 422 and writes nothing", async () => {
    const before = await dumpTenant(bare.redis, bareTenant);
    const res = await bare.call("POST", "/admin/v1/streaks/freezes", { freezes: [{ userId: "seed" }] }, { "x-api-key": bare.adminKey });
    expect(res).toEqual({ status: 422, body: { error: expect.stringMatching(/freezes/i) } });
    expect(await dumpTenant(bare.redis, bareTenant)).toEqual(before);
    // The streak read has no freeze fields there.
    expect((await bare.call("GET", "/v1/users/seed/streak")).body).not.toHaveProperty("freezes");
  });
});
