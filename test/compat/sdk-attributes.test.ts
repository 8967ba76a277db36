import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TrophyApi, TrophyApiClient } from "@trophyso/node";
import { startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { errorBody, rejection } from "../helpers/sdk.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";

/**
 * Attribute filters through the unmodified SDK (@trophyso/node 1.0.42): the optional parameters
 * that carry attributes (metrics.event `attributes`, achievements.all and points.summary
 * `userAttributes`) sent by the SDK and checked by the values they select. The demo tenant has
 * no filtered achievement, so there achievements.all gave the same list with or without the
 * parameter; this tenant has one per user attribute and a trigger per filter kind.
 */
const TENANT = `
    attributes: { user: [plan, region], event: [source] }
    metrics: [{ key: words, name: Words, units: words }]
    points:
      - key: gems
        name: Gems
        triggers:
          - { key: per-ten, type: metric, metric: words, threshold: 10, points: 1 }
          - { key: from-app, type: metric, metric: words, threshold: 10, points: 2, eventAttributes: { source: app } }
          - { key: pro-words, type: metric, metric: words, threshold: 10, points: 5, userAttributes: { plan: pro } }
    achievements:
      - { key: ten-words, name: Ten words, type: metric, metric: words, value: 10 }
      - { key: pro-ten, name: Pro ten, type: metric, metric: words, value: 10, userAttributes: { plan: pro } }
      - { key: eu-ten, name: EU ten, type: metric, metric: words, value: 10, userAttributes: { region: eu } }
`;

let app: TestApp;
let trophy: TrophyApiClient;

beforeAll(async () => {
  app = await startTestApp({ yaml: tenantYaml(uniqueTenantId("sdkattr"), TENANT), manualClock: "2026-03-02T12:00:00Z", jobs: false });
  trophy = new TrophyApiClient({ apiKey: app.apiKey, environment: { api: `${app.url}/v1`, admin: `${app.url}/admin/v1` } });
});
afterAll(async () => app.close());

const keys = (list: { key?: string }[]) => list.map((a) => a.key);

describe("metrics.event with event attributes", () => {
  it("pays an event-filtered trigger only for the events whose attributes match, a user-filtered one only for matching users", async () => {
    // ada (pro, eu), from the app: every trigger pays; all three achievements are hers.
    const ada = await trophy.metrics.event("words", { user: { id: "ada", attributes: { plan: "pro", region: "eu" } }, value: 10, attributes: { source: "app" } });
    expect(ada.points.gems).toMatchObject({ added: 8, total: 8 });
    expect(ada.points.gems!.awards.map((a) => a.awarded)).toEqual([1, 2, 5]);
    expect(keys(ada.achievements)).toEqual(["ten-words", "pro-ten", "eu-ten"]);
    // The filter comes back as the SDK's AchievementResponseUserAttributesItem[].
    expect(ada.achievements[1]!.userAttributes).toEqual([{ key: "plan", value: "pro" }]);
    expect(ada.achievements[0]!.userAttributes).toBeUndefined();

    // bo (free, eu) from the web: only the unfiltered trigger; not the pro achievement.
    const web = await trophy.metrics.event("words", { user: { id: "bo", attributes: { plan: "free", region: "eu" } }, value: 10, attributes: { source: "web" } });
    expect(web.points.gems).toMatchObject({ added: 1, total: 1 });
    expect(keys(web.achievements)).toEqual(["ten-words", "eu-ten"]);
    // From the app next: the app trigger's own sum reaches its first 10 now.
    const app2 = await trophy.metrics.event("words", { user: { id: "bo" }, value: 10, attributes: { source: "app" } });
    expect(app2.total).toBe(20);
    expect(app2.points.gems).toMatchObject({ added: 3, total: 4 });
    expect(app2.points.gems!.awards.map((a) => a.awarded)).toEqual([1, 2]);

    // cy, no attributes at all, events without attributes.
    const cy = await trophy.metrics.event("words", { user: { id: "cy" }, value: 30 });
    expect(cy.points.gems).toMatchObject({ added: 3, total: 3 });
    expect(keys(cy.achievements)).toEqual(["ten-words"]);

    // dee (pro, us) is identified, with no event and no gems.
    await trophy.users.identify("dee", { attributes: { plan: "pro", region: "us" } });
  });

  it("refuses an undeclared event attribute with UnprocessableEntityError and counts nothing", async () => {
    const err = await rejection(trophy.metrics.event("words", { user: { id: "cy" }, value: 10, attributes: { device: "ios" } }));
    expect(err).toBeInstanceOf(TrophyApi.UnprocessableEntityError);
    expect(errorBody(err)).toBe("Invalid attribute keys: device");
    expect((await trophy.users.singleMetric("cy", "words")).current).toBe(30);
  });
});

describe("achievements.all with userAttributes", () => {
  it("lists every achievement with completions and rarity, and only those a user with the attributes can complete when filtered", async () => {
    const all = await trophy.achievements.all();
    // 4 users: ada, bo, cy, dee.
    expect(all.map((a) => [a.key, a.completions, a.rarity])).toEqual([
      ["ten-words", 3, 75],
      ["pro-ten", 1, 25],
      ["eu-ten", 2, 50],
    ]);
    expect(all[2]!.userAttributes).toEqual([{ key: "region", value: "eu" }]);

    expect(keys(await trophy.achievements.all({ userAttributes: "plan:pro" }))).toEqual(["ten-words", "pro-ten"]);
    expect(keys(await trophy.achievements.all({ userAttributes: "region:eu" }))).toEqual(["ten-words", "eu-ten"]);
    expect(keys(await trophy.achievements.all({ userAttributes: "plan:pro,region:eu" }))).toEqual(["ten-words", "pro-ten", "eu-ten"]);
    expect(keys(await trophy.achievements.all({ userAttributes: "plan:free,region:us" }))).toEqual(["ten-words"]);
    // The statistics are the tenant's, whatever the filter.
    expect((await trophy.achievements.all({ userAttributes: "plan:pro" }))[1]).toMatchObject({ completions: 1, rarity: 25 });
  });

  it("maps an undeclared key to UnprocessableEntityError and a malformed pair to a 400 TrophyApiError", async () => {
    const unknown = await rejection(trophy.achievements.all({ userAttributes: "tier:gold" }));
    expect(unknown).toBeInstanceOf(TrophyApi.UnprocessableEntityError);
    expect(errorBody(unknown)).toBe("Invalid attribute keys: tier");
    // achievements.all maps 401 and 422 only.
    const malformed = await rejection(trophy.achievements.all({ userAttributes: "plan" }));
    expect(malformed.statusCode).toBe(400);
    errorBody(malformed);
  });
});

describe("users.allMetrics, users.singleMetric and users.achievements leave out what the user cannot complete", () => {
  it("shows each user the metric achievements their attributes allow", async () => {
    const [bo] = await trophy.users.allMetrics("bo");
    expect(bo).toMatchObject({ key: "words", current: 20 });
    expect(keys(bo!.achievements)).toEqual(["ten-words", "eu-ten"]);
    expect(keys((await trophy.users.singleMetric("cy", "words")).achievements)).toEqual(["ten-words"]);
    const dee = await trophy.users.singleMetric("dee", "words");
    expect(dee.achievements.map((a) => [a.key, a.achievedAt])).toEqual([
      ["ten-words", undefined],
      ["pro-ten", undefined],
    ]);
    const incomplete = await trophy.users.achievements("dee", { includeIncomplete: "true" });
    expect(incomplete.map((a) => [a.key, a.achievedAt, a.completions])).toEqual([
      ["ten-words", undefined, 3],
      ["pro-ten", undefined, 1],
    ]);
    expect(await trophy.users.achievements("dee")).toEqual([]);
  });
});

describe("points.summary with userAttributes", () => {
  it("counts every user, or only the users whose attributes match, in the 11 ranges", async () => {
    // Totals: ada 8, bo 4, cy 3, dee 0. Highest 8: ten ranges of one point from 1 to 10.
    const users = (ranges: TrophyApi.PointsRange[]) => ranges.filter((r) => r.users > 0).map((r) => [r.from, r.to, r.users]);
    const all = await trophy.points.summary("gems");
    expect(all).toHaveLength(11);
    expect(all[1]).toEqual({ from: 1, to: 1, users: 0 });
    expect(users(all)).toEqual([
      [0, 0, 1],
      [3, 3, 1],
      [4, 4, 1],
      [8, 8, 1],
    ]);
    expect(users(await trophy.points.summary("gems", { userAttributes: "region:eu" }))).toEqual([
      [4, 4, 1],
      [8, 8, 1],
    ]);
    // dee, pro without a point, is in 0..0.
    expect(users(await trophy.points.summary("gems", { userAttributes: "plan:pro" }))).toEqual([
      [0, 0, 1],
      [8, 8, 1],
    ]);
    expect(users(await trophy.points.summary("gems", { userAttributes: "plan:pro,region:us" }))).toEqual([[0, 0, 1]]);
    expect(users(await trophy.points.summary("gems", { userAttributes: "plan:nobody" }))).toEqual([]);
  });

  it("maps an undeclared key to UnprocessableEntityError and an unknown system to NotFoundError", async () => {
    const unknown = await rejection(trophy.points.summary("gems", { userAttributes: "tier:gold" }));
    expect(unknown).toBeInstanceOf(TrophyApi.UnprocessableEntityError);
    expect(errorBody(unknown)).toBe("Invalid attribute keys: tier");
    expect(await rejection(trophy.points.summary("no-such-system"))).toBeInstanceOf(TrophyApi.NotFoundError);
  });
});
