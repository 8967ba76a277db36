import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TrophyApi, TrophyApiClient } from "@trophyso/node";
import { startTestApp, type TestApp } from "../helpers/app.js";
import { errorBody, rejection } from "../helpers/sdk.js";

/**
 * Issue 3 through the unmodified official SDK (@trophyso/node 1.0.42): users.*, preferences,
 * achievements.complete and the two admin streak methods (trophy-compat §2.2 #2, #4-#9, #25,
 * #26; §3.1, §3.4, §3.9, §3.10). Every success body goes through the SDK's response schemas, so
 * a shape it cannot parse throws a ParseError and fails the test (trophy-compat §1.5, §4); error
 * bodies must parse as `{error}` to become the typed errors asserted here.
 */

const NOW = "2026-03-02T12:00:00.000Z";

let t: TestApp;
let trophy: TrophyApiClient;
let admin: TrophyApiClient;

const clientWith = (app: TestApp, apiKey: string) =>
  new TrophyApiClient({ apiKey, environment: { api: `${app.url}/v1`, admin: `${app.url}/admin/v1` } });

beforeAll(async () => {
  t = await startTestApp({ manualClock: NOW });
  trophy = clientWith(t, t.apiKey);
  admin = clientWith(t, t.adminKey);
});
afterAll(async () => t.close());



describe("users.create, identify, get, update", () => {
  it("users.create returns the User with Date created/updated, a boolean control and the attributes", async () => {
    const user = await trophy.users.create({
      id: "sdk-u-create",
      email: "ada@example.com",
      name: "Ada",
      tz: "Europe/London",
      deviceTokens: ["tok-1", "tok-2"],
      subscribeToEmails: true,
      attributes: { plan: "pro" },
    });
    expect(user).toEqual({
      id: "sdk-u-create",
      email: "ada@example.com",
      name: "Ada",
      tz: "Europe/London",
      deviceTokens: ["tok-1", "tok-2"],
      subscribeToEmails: true,
      attributes: { plan: "pro" },
      control: false,
      created: new Date(NOW),
      updated: new Date(NOW),
    });
    expect(user.created).toBeInstanceOf(Date);
    expect(user.updated).toBeInstanceOf(Date);
    expect(typeof user.control).toBe("boolean");

    // users.get reads back exactly what was stored.
    expect(await trophy.users.get("sdk-u-create")).toEqual(user);
  });

  it("a user created with only an id has nulls the SDK drops, subscribeToEmails true and attributes {}", async () => {
    const user = await trophy.users.create({ id: "sdk-u-bare" });
    expect(user).toEqual({ id: "sdk-u-bare", subscribeToEmails: true, attributes: {}, control: false, created: new Date(NOW), updated: new Date(NOW) });
  });

  it("first identification by users.identify pays the energy welcome exactly once", async () => {
    const first = await trophy.users.identify("sdk-u-ident", { name: "Ida", attributes: { plan: "free" } });
    expect(first).toMatchObject({ id: "sdk-u-ident", name: "Ida", attributes: { plan: "free" }, control: false });
    expect(first.created).toEqual(new Date(NOW));

    const welcome = await trophy.users.points("sdk-u-ident", "energy");
    expect(welcome.total).toBe(100);
    expect(welcome.awards).toHaveLength(1);
    expect(welcome.awards[0]).toMatchObject({ awarded: 100, total: 100, trigger: { type: "user_creation", points: 100 } });

    // Identified again, then an event: neither is a first identification.
    const again = await trophy.users.identify("sdk-u-ident", { name: "Ida" });
    expect(again.attributes).toEqual({ plan: "free" });
    expect(again.created).toEqual(first.created);
    const event = await trophy.metrics.event("lessons", { user: { id: "sdk-u-ident" }, value: 1 });
    expect(Object.keys(event.points).sort()).toEqual(["xp"]);

    const after = await trophy.users.points("sdk-u-ident", "energy");
    expect(after.total).toBe(100);
    expect(after.awards).toHaveLength(1);
    expect(after.awards[0]!.id).toBe(welcome.awards[0]!.id);
  });

  it("users.identify takes every field of the SDK's UpdatedUser", async () => {
    const user = await trophy.users.identify("sdk-u-ident-all", {
      email: "ida@example.com",
      name: "Ida",
      tz: "America/New_York",
      deviceTokens: ["tok-a"],
      subscribeToEmails: true,
      attributes: { plan: "pro" },
    });
    expect(user).toEqual({
      id: "sdk-u-ident-all",
      email: "ida@example.com",
      name: "Ida",
      tz: "America/New_York",
      deviceTokens: ["tok-a"],
      subscribeToEmails: true,
      attributes: { plan: "pro" },
      control: false,
      created: new Date(NOW),
      updated: new Date(NOW),
    });
    expect(await trophy.users.get("sdk-u-ident-all")).toEqual(user);
  });

  it("users.create of an existing id updates it (an upsert) without a second welcome", async () => {
    const user = await trophy.users.create({ id: "sdk-u-ident", email: "ida@example.com" });
    expect(user).toMatchObject({ id: "sdk-u-ident", name: "Ida", email: "ida@example.com", attributes: { plan: "free" } });
    const energy = await trophy.users.points("sdk-u-ident", "energy");
    expect(energy.awards.filter((a) => a.trigger?.type === "user_creation")).toHaveLength(1);
    // The SDK hides the status; on the wire a create is 201 and an upsert of a known id 200.
    expect((await t.call("POST", "/v1/users", { id: "sdk-u-wire" })).status).toBe(201);
    expect((await t.call("POST", "/v1/users", { id: "sdk-u-wire" })).status).toBe(200);
    expect((await t.call("PUT", "/v1/users/sdk-u-wire-2", {})).status).toBe(200);
  });

  it("users.update changes the sent fields, keeps the others, and moves only `updated`", async () => {
    const later = "2026-03-02T13:00:00.000Z";
    await t.setClock(later);
    const user = await trophy.users.update("sdk-u-create", { name: "Ada L.", attributes: { plan: "free" } });
    expect(user).toMatchObject({
      id: "sdk-u-create",
      name: "Ada L.",
      email: "ada@example.com",
      tz: "Europe/London",
      deviceTokens: ["tok-1", "tok-2"],
      attributes: { plan: "free" },
    });
    expect(user.created).toEqual(new Date(NOW));
    expect(user.updated).toEqual(new Date(later));
    expect(await trophy.users.get("sdk-u-create")).toEqual(user);

    // An update that changes nothing leaves `updated` alone; a token sent twice is one device.
    await t.setClock("2026-03-02T13:30:00.000Z");
    const same = await trophy.users.update("sdk-u-create", { name: "Ada L.", deviceTokens: ["tok-1", "tok-2", "tok-1"] });
    expect(same.updated).toEqual(new Date(later));
    expect(same.deviceTokens).toEqual(["tok-1", "tok-2"]);
  });

  it("an empty name blanks the name (null means not sent, so \"\" is how to clear it); names are kept as sent, untrimmed", async () => {
    await trophy.users.identify("sdk-u-blank", { name: "Grace", email: "grace@example.com" });
    expect((await trophy.users.update("sdk-u-blank", { name: "" })).name).toBe("");
    expect((await trophy.users.get("sdk-u-blank")).name).toBe("");
    expect((await trophy.users.update("sdk-u-blank", { name: "  Grace  " })).name).toBe("  Grace  ");
    // An event's user upserts the same way.
    await trophy.metrics.event("lessons", { user: { id: "sdk-u-blank", name: "" }, value: 1 });
    expect((await trophy.users.get("sdk-u-blank")).name).toBe("");
  });

  it("subscribeToEmails: opting in needs an email; opting out drops the email and clears a stored one", async () => {
    const err = await rejection(trophy.users.create({ id: "sdk-u-optin", subscribeToEmails: true }));
    expect(err).toBeInstanceOf(TrophyApi.UnprocessableEntityError);
    expect(errorBody(err)).toBe("body.email is required when subscribeToEmails is true");
    expect((await rejection(trophy.users.get("sdk-u-optin"))).statusCode).toBe(404);

    // Sent together with false, the email is not stored (the SDK drops the null).
    const out = await trophy.users.create({ id: "sdk-u-optout", email: "out@example.com", subscribeToEmails: false });
    expect(out.email).toBeUndefined();
    expect(out.subscribeToEmails).toBe(false);
    const { store } = t.app.tenants.all[0]!;
    const stored = await t.redis.hget(store.keys.user(store.shard("sdk-u-optout"), "sdk-u-optout"), "em");
    expect(stored === null || stored === "").toBe(true);

    // A stored email is cleared by opting out, on an event's user as on the user routes.
    expect((await trophy.users.create({ id: "sdk-u-leaver", email: "leaver@example.com" })).email).toBe("leaver@example.com");
    await trophy.metrics.event("lessons", { user: { id: "sdk-u-leaver", subscribeToEmails: false }, value: 1 });
    const left = await trophy.users.get("sdk-u-leaver");
    expect(left.email).toBeUndefined();
    expect(left.subscribeToEmails).toBe(false);
    // An address sent later without the flag is not shown while the user is unsubscribed...
    expect((await trophy.users.update("sdk-u-leaver", { email: "new@example.com" })).email).toBeUndefined();
    // ...and opting in again, with an email, shows it.
    const back = await trophy.users.update("sdk-u-leaver", { email: "back@example.com", subscribeToEmails: true });
    expect(back).toMatchObject({ email: "back@example.com", subscribeToEmails: true });
  });

  it("a zone sent in any letter case is IANA's zone, stored and shown in IANA's spelling; a link keeps the name sent", async () => {
    // 12:00Z is 02:00 on 3 March in Kiritimati (UTC+14): the streak's day says which zone counted.
    const res = await trophy.metrics.event("lessons", { user: { id: "sdk-u-zone", tz: "pacific/kiritimati" }, value: 1 });
    expect(res.currentStreak).toMatchObject({ length: 1, periodStart: "2026-03-03" });
    expect((await trophy.users.get("sdk-u-zone")).tz).toBe("Pacific/Kiritimati");
    // The same zone in a third spelling, by an event: still IANA's, and still Kiritimati's day.
    const again = await trophy.metrics.event("lessons", { user: { id: "sdk-u-zone", tz: "PACIFIC/KIRITIMATI" }, value: 1 });
    expect(again.currentStreak).toMatchObject({ length: 1, periodStart: "2026-03-03" });
    expect((await trophy.users.get("sdk-u-zone")).tz).toBe("Pacific/Kiritimati");
    expect((await trophy.users.update("sdk-u-zone", { tz: "utc" })).tz).toBe("UTC");
    // ICU answers Asia/Kolkata with its own older name (Asia/Calcutta): IANA's list spells it.
    expect((await trophy.users.update("sdk-u-zone", { tz: "asia/kolkata" })).tz).toBe("Asia/Kolkata");
    expect((await trophy.users.update("sdk-u-zone", { tz: "us/eastern" })).tz).toBe("US/Eastern");
    expect((await trophy.users.identify("sdk-u-zone", { tz: "US/Eastern" })).tz).toBe("US/Eastern");
    const unknown = await rejection(trophy.users.update("sdk-u-zone", { tz: "pacific/nowhere" }));
    expect(errorBody(unknown)).toBe('Unknown IANA time zone: "pacific/nowhere"');
    expect((await trophy.users.get("sdk-u-zone")).tz).toBe("US/Eastern");
  });

  it("users.update of an unknown user is a NotFoundError and creates nothing", async () => {
    const err = await rejection(trophy.users.update("sdk-u-ghost", { name: "Ghost" }));
    expect(err).toBeInstanceOf(TrophyApi.NotFoundError);
    expect(err.statusCode).toBe(404);
    errorBody(err);
    // Still unknown afterwards.
    expect((await rejection(trophy.users.get("sdk-u-ghost"))).statusCode).toBe(404);
  });

  it("finds a user whose id the SDK puts in the path unencoded: a space, non-ASCII letters, + @ : and an email", async () => {
    // The SDK writes `users/${id}` as is; fetch then percent-encodes the space and the non-ASCII
    // letters and leaves + @ : alone. Laurel decodes the path, and a + in it stays a +.
    for (const id of ["ada lovelace", "zoë-ümlaut", "a+b", "x:y", "ada@example.com"]) {
      await trophy.metrics.event("lessons", { user: { id, name: id }, value: 1 });
      expect((await trophy.users.get(id)).name, id).toBe(id);
      expect((await trophy.users.points(id, "xp")).total, id).toBe(10);
      expect((await trophy.users.streak(id)).length, id).toBe(1);
      expect((await trophy.users.singleMetric(id, "lessons")).current, id).toBe(1);
      expect((await trophy.users.leaderboard(id, "xp-all-time")).value, id).toBe(10);
      expect((await trophy.users.update(id, { name: `${id}!` })).name, id).toBe(`${id}!`);
    }
    // "a b" and "a+b" are two users.
    expect((await rejection(trophy.users.get("a b"))).statusCode).toBe(404);
  });

  it("users.get of an unknown user is a plain TrophyApiError 404 (users.get does not map 404, trophy-compat §2.2 #5)", async () => {
    const err = await rejection(trophy.users.get("sdk-u-nobody"));
    expect(err.statusCode).toBe(404);
    expect(err).not.toBeInstanceOf(TrophyApi.NotFoundError);
    expect(errorBody(err)).toMatch(/not found/i);
  });

  it("an undeclared user attribute is an UnprocessableEntityError naming the key", async () => {
    const err = await rejection(trophy.users.create({ id: "sdk-u-bad-attr", attributes: { plan: "pro", tier: "gold" } }));
    expect(err).toBeInstanceOf(TrophyApi.UnprocessableEntityError);
    expect(errorBody(err)).toBe("Invalid attribute keys: tier");
    expect((await rejection(trophy.users.get("sdk-u-bad-attr"))).statusCode).toBe(404);
  });
});

describe("users.getPreferences and users.updatePreferences", () => {
  beforeAll(async () => {
    await trophy.users.identify("sdk-u-prefs", {});
  });

  it("a user who never set a preference has no notification types", async () => {
    expect(await trophy.users.getPreferences("sdk-u-prefs")).toEqual({ notifications: {} });
  });

  it("round-trips through the snake_case wire keys; unset types stay absent", async () => {
    const updated = await trophy.users.updatePreferences("sdk-u-prefs", {
      notifications: { achievementCompleted: ["email"], streakReminder: ["push", "email"] },
    });
    expect(updated).toEqual({ notifications: { achievementCompleted: ["email"], streakReminder: ["push", "email"] } });
    expect(await trophy.users.getPreferences("sdk-u-prefs")).toEqual(updated);

    // On the wire the keys are snake_case (trophy-compat §3.10).
    const wire = await t.call("GET", "/v1/users/sdk-u-prefs/preferences");
    expect(wire.body).toEqual({ notifications: { achievement_completed: ["email"], streak_reminder: ["push", "email"] } });
  });

  it("an empty list disables a type; types not sent keep their value", async () => {
    const updated = await trophy.users.updatePreferences("sdk-u-prefs", { notifications: { recap: [], achievementCompleted: ["push"] } });
    expect(updated).toEqual({ notifications: { achievementCompleted: ["push"], recap: [], streakReminder: ["push", "email"] } });
    expect(updated.notifications.reactivation).toBeUndefined();
    expect(await trophy.users.getPreferences("sdk-u-prefs")).toEqual(updated);
  });

  it("sets the fourth type, reactivation, with both channels", async () => {
    const updated = await trophy.users.updatePreferences("sdk-u-prefs", { notifications: { reactivation: ["email", "push"] } });
    expect(updated).toEqual({ notifications: { achievementCompleted: ["push"], recap: [], reactivation: ["email", "push"], streakReminder: ["push", "email"] } });
    expect(await trophy.users.getPreferences("sdk-u-prefs")).toEqual(updated);
  });

  it("an update without notifications changes nothing", async () => {
    const before = await trophy.users.getPreferences("sdk-u-prefs");
    expect(await trophy.users.updatePreferences("sdk-u-prefs", {})).toEqual(before);
  });

  it("`updated` moves when a preference changes, not when a patch repeats what is stored", async () => {
    const before = (await trophy.users.get("sdk-u-prefs")).updated;
    const later = "2026-03-02T13:45:00.000Z";
    await t.setClock(later);
    await trophy.users.updatePreferences("sdk-u-prefs", { notifications: { reactivation: ["email", "push"] } });
    expect((await trophy.users.get("sdk-u-prefs")).updated).toEqual(before);
    await trophy.users.updatePreferences("sdk-u-prefs", { notifications: { reactivation: ["push"] } });
    expect((await trophy.users.get("sdk-u-prefs")).updated).toEqual(new Date(later));
  });

  it("a type sent as null is not sent (kept as stored); a channel named twice is kept once", async () => {
    const stored = (await t.call("GET", "/v1/users/sdk-u-prefs/preferences")).body.notifications;
    const res = await t.call("PATCH", "/v1/users/sdk-u-prefs/preferences", { notifications: { reactivation: null, recap: ["email", "email"] } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ notifications: { ...stored, recap: ["email"] } });
  });

  it("an unknown user gives NotFoundError on both", async () => {
    expect(await rejection(trophy.users.getPreferences("sdk-u-nobody"))).toBeInstanceOf(TrophyApi.NotFoundError);
    const err = await rejection(trophy.users.updatePreferences("sdk-u-nobody", { notifications: { recap: ["email"] } }));
    expect(err).toBeInstanceOf(TrophyApi.NotFoundError);
    errorBody(err);
  });
});

describe("achievements.complete", () => {
  it("completes an API achievement: completionId, Date achievedAt, and the coins profile bonus", async () => {
    await trophy.users.identify("sdk-u-complete", {});
    const now = new Date(t.clock.now());
    const res = await trophy.achievements.complete("complete-profile", { user: { id: "sdk-u-complete" } });

    expect(res.completionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.achievement).toMatchObject({ key: "complete-profile", name: "Profile completed", trigger: "api" });
    expect(res.achievement.achievedAt).toBeInstanceOf(Date);
    expect(res.achievement.achievedAt).toEqual(now);

    // The user already existed: only the achievement trigger's system changed.
    expect(Object.keys(res.points)).toEqual(["coins"]);
    expect(res.points.coins).toMatchObject({ key: "coins", name: "Coins", total: 50, added: 50 });
    expect(res.points.coins!.awards).toHaveLength(1);
    expect(res.points.coins!.awards[0]).toMatchObject({
      awarded: 50,
      total: 50,
      trigger: { type: "achievement", points: 50, achievementName: "Profile completed" },
    });

    // A second completion: the same completionId and achievedAt, no points, nothing paid.
    await t.setClock("2026-03-02T14:00:00.000Z");
    const again = await trophy.achievements.complete("complete-profile", { user: { id: "sdk-u-complete" } });
    expect(again.completionId).toBe(res.completionId);
    expect(again.achievement.achievedAt).toEqual(now);
    expect(again.points).toEqual({});
    const coins = await trophy.users.points("sdk-u-complete", "coins");
    expect(coins.total).toBe(50);
    expect(coins.awards).toHaveLength(1);
    // On the wire: 201 for the completion, 200 for the repeat.
    const wire = () => t.call("POST", "/v1/achievements/complete-profile/complete", { user: { id: "sdk-u-complete-wire" } });
    expect((await wire()).status).toBe(201);
    expect((await wire()).status).toBe(200);
  });

  it("a completion that first identifies the user also pays the welcome", async () => {
    const res = await trophy.achievements.complete("complete-profile", {
      user: { id: "sdk-u-complete-new", email: "new@example.com", name: "New", tz: "Asia/Tokyo", deviceTokens: ["tok-n"], subscribeToEmails: true, attributes: { plan: "pro" } },
    });
    expect(Object.keys(res.points).sort()).toEqual(["coins", "energy"]);
    expect(res.points.energy).toMatchObject({ added: 100, total: 100 });
    expect(res.points.coins).toMatchObject({ added: 50, total: 50 });
    // The user was upserted with every profile field the SDK sent.
    expect(await trophy.users.get("sdk-u-complete-new")).toMatchObject({
      email: "new@example.com",
      name: "New",
      tz: "Asia/Tokyo",
      deviceTokens: ["tok-n"],
      subscribeToEmails: true,
      attributes: { plan: "pro" },
    });
  });

  it("maps an unknown achievement to NotFoundError and a non-API one to UnprocessableEntityError", async () => {
    expect(await rejection(trophy.achievements.complete("no-such-achievement", { user: { id: "sdk-u-complete" } }))).toBeInstanceOf(TrophyApi.NotFoundError);
    for (const key of ["first-lesson", "week-streak", "dedicated"]) {
      const err = await rejection(trophy.achievements.complete(key, { user: { id: "sdk-u-complete" } }));
      expect(err).toBeInstanceOf(TrophyApi.UnprocessableEntityError);
      errorBody(err);
    }
  });
});

describe("admin.streaks.freezes.create", () => {
  beforeAll(async () => {
    await trophy.users.identify("sdk-f-a", {});
    await trophy.users.identify("sdk-f-b", {});
  });

  it("grants one freeze per entry up to the maximum of 2, with issues for the rest", async () => {
    const res = await admin.admin.streaks.freezes.create({
      freezes: [{ userId: "sdk-f-a" }, { userId: "sdk-f-a" }, { userId: "sdk-f-a" }, { userId: "sdk-f-ghost" }, { userId: "sdk-f-b" }],
    });
    expect(res.issues).toEqual([
      expect.objectContaining({ userId: "sdk-f-a", level: "warning", reason: "Would exceed maximum freeze limit" }),
      expect.objectContaining({ userId: "sdk-f-ghost", level: "error", reason: "User does not exist" }),
    ]);
    expect(await trophy.users.streak("sdk-f-a")).toMatchObject({ freezes: 2, maxFreezes: 2 });
    expect(await trophy.users.streak("sdk-f-b")).toMatchObject({ freezes: 1, maxFreezes: 2 });

    // At the maximum, another grant is a warning and changes nothing; the unknown user stays unknown.
    const more = await admin.admin.streaks.freezes.create({ freezes: [{ userId: "sdk-f-a" }, { userId: "sdk-f-b" }] });
    expect(more.issues).toEqual([expect.objectContaining({ userId: "sdk-f-a", level: "warning", reason: "Would exceed maximum freeze limit" })]);
    expect(await trophy.users.streak("sdk-f-a")).toMatchObject({ freezes: 2 });
    expect(await trophy.users.streak("sdk-f-b")).toMatchObject({ freezes: 2 });
    expect((await rejection(trophy.users.get("sdk-f-ghost"))).statusCode).toBe(404);
  });

  it("needs the admin key: the API key gets UnauthorizedError", async () => {
    const err = await rejection(trophy.admin.streaks.freezes.create({ freezes: [{ userId: "sdk-f-b" }] }));
    expect(err).toBeInstanceOf(TrophyApi.UnauthorizedError);
    errorBody(err);
    const restore = await rejection(trophy.admin.streaks.restore({ users: [{ id: "sdk-f-b" }] }));
    expect(restore).toBeInstanceOf(TrophyApi.UnauthorizedError);
  });
});

describe("admin.streaks.restore", () => {
  // Its own app: this scenario moves the manual clock across days.
  let r: TestApp;
  let api: TrophyApiClient;
  let adm: TrophyApiClient;
  beforeAll(async () => {
    r = await startTestApp({ manualClock: "2026-03-02T12:00:00Z" });
    api = clientWith(r, r.apiKey);
    adm = clientWith(r, r.adminKey);
  });
  afterAll(async () => r.close());

  const lesson = (id: string) => api.metrics.event("lessons", { user: { id, tz: "UTC" }, value: 1 });

  it("restores a lost streak, and reports the users it cannot restore as issues", async () => {
    // r-lost: three days in a row (2-4 March), then 5 March missed with no freeze to spend.
    await api.users.identify("r-none", { tz: "UTC" });
    expect((await lesson("r-lost")).currentStreak.length).toBe(1);
    await r.setClock("2026-03-03T12:00:00Z");
    expect((await lesson("r-lost")).currentStreak.length).toBe(2);
    await r.setClock("2026-03-04T12:00:00Z");
    expect((await lesson("r-lost")).currentStreak.length).toBe(3);
    // r-alive: 5 and 6 March, a streak that is still running at its best length.
    await r.setClock("2026-03-05T12:00:00Z");
    await lesson("r-alive");
    await r.setClock("2026-03-06T12:00:00Z");
    expect((await lesson("r-alive")).currentStreak.length).toBe(2);
    expect(await api.users.streak("r-lost")).toMatchObject({ length: 0, freezes: 0 });
    // The two kinds of ranking part here: the lost streak is only among the longest ever.
    expect(await api.streaks.rankings({ type: "active" })).toEqual([{ userId: "r-alive", streakLength: 2 }]);
    expect(await api.streaks.rankings({ type: "longest" })).toEqual([
      { userId: "r-lost", streakLength: 3 },
      { userId: "r-alive", streakLength: 2 },
    ]);
    expect(await api.streaks.rankings({ type: "longest", limit: 1 })).toEqual([{ userId: "r-lost", streakLength: 3 }]);

    const res = await adm.admin.streaks.restore({ users: [{ id: "r-lost" }, { id: "r-alive" }, { id: "r-none" }, { id: "r-ghost" }] });
    expect(res.restoredUsers).toEqual(["r-lost"]);
    expect(res.issues).toEqual([
      expect.objectContaining({ userId: "r-alive", level: "warning", reason: "Streak is already at maximum length" }),
      expect.objectContaining({ userId: "r-none", level: "warning", reason: "No streak to restore" }),
      expect.objectContaining({ userId: "r-ghost", level: "error", reason: "User does not exist" }),
    ]);

    // Back at 3, extendable today: the next lesson makes it 4.
    expect(await api.users.streak("r-lost")).toMatchObject({ length: 3, started: "2026-03-03" });
    expect((await lesson("r-lost")).currentStreak).toMatchObject({ length: 4, extended: true, started: "2026-03-03" });
    expect(await api.users.streak("r-alive")).toMatchObject({ length: 2 });
    expect(await api.streaks.rankings()).toEqual([
      { userId: "r-lost", streakLength: 4 },
      { userId: "r-alive", streakLength: 2 },
    ]);

    // Restoring again: now at its best length.
    const again = await adm.admin.streaks.restore({ users: [{ id: "r-lost" }] });
    expect(again).toEqual({ restoredUsers: [], issues: [expect.objectContaining({ userId: "r-lost", level: "warning", reason: "Streak is already at maximum length" })] });
  });
});
