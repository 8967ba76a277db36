import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as serialization from "@trophyso/node/serialization/index.js";
import { startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";
import { startReceiver, type Receiver } from "../helpers/webhook-receiver.js";

/**
 * Webhook payloads against the contracts the official SDK declares for them (trophy-compat §3.12:
 * @trophyso/node 1.0.42 ships a schema per payload type, used by no client method). Each
 * delivered body is parsed by the SDK's own schema with the options it uses for responses
 * (unknown keys passed through, unknown enum values tolerated), so a missing required field, a
 * null where an object is required or a wrong type fails here. Types newer than the SDK
 * (points.level_changed, points.boost_*) are checked in test/integration/webhooks.test.ts.
 */
const SCHEMAS: Record<string, { parse: (raw: unknown, opts: object) => unknown }> = {
  "achievement.completed": serialization.WebhooksAchievementCompletedPayload,
  "streak.started": serialization.WebhooksStreakStartedPayload,
  "streak.extended": serialization.WebhooksStreakExtendedPayload,
  "streak.lost": serialization.WebhooksStreakLostPayload,
  "streak.freeze_consumed": serialization.WebhooksStreakFreezeConsumedPayload,
  "streak.freeze_earned": serialization.WebhooksStreakFreezeEarnedPayload,
  "points.changed": serialization.WebhooksPointsChangedPayload,
  "leaderboard.started": serialization.WebhooksLeaderboardStartedPayload,
  "leaderboard.finished": serialization.WebhooksLeaderboardFinishedPayload,
  "leaderboard.rank_changed": serialization.WebhooksLeaderboardRankChangedPayload,
};
const AS_THE_SDK_PARSES = { unrecognizedObjectKeys: "passthrough", allowUnrecognizedUnionMembers: true, allowUnrecognizedEnumValues: true, breadcrumbsPrefix: ["webhook"] };

let receiver: Receiver;
let t: TestApp;

beforeAll(async () => {
  receiver = await startReceiver();
  const yaml = tenantYaml(
    uniqueTenantId("whsdk"),
    `
    metrics: [{ key: lessons, name: Lessons }]
    points:
      - key: xp
        name: XP
        triggers: [{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 10 }]
    achievements:
      - { key: first-lesson, name: First lesson, type: metric, metric: lessons, value: 1 }
    streak:
      frequency: daily
      metrics: [{ metric: lessons, threshold: 1 }]
      freezes: { initial: 0, max: 1 }
    leaderboards:
      - { key: daily-xp, name: Daily XP, rankBy: points, points: xp, start: "2026-06-01", runUnit: day, runInterval: 1 }
    webhooks:
      - { key: sdk, url: "${receiver.url}", secret: "sdk-contract-secret-0123", events: [${Object.keys(SCHEMAS).join(", ")}] }
`,
  );
  t = await startTestApp({ yaml, manualClock: "2026-06-01T12:00:00Z" });
});
afterAll(async () => {
  await t.close();
  await receiver.close();
});

describe("webhook payloads parse with the SDK's schemas", () => {
  it("every type the SDK declares", async () => {
    await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "sdk-user", tz: "UTC", name: "Sdk" }, value: 1 });
    await t.call("POST", "/admin/v1/streaks/freezes", { freezes: [{ userId: "sdk-user" }] }, { "x-api-key": "demo-admin-key" });
    // 06-02 passes without a lesson (the freeze covers it), 06-03 too (no freeze left: lost); runs turn daily.
    await t.setClock("2026-06-03T00:00:00Z");
    await t.setClock("2026-06-04T00:00:00Z");
    const seen = new Set<string>();
    for (const type of Object.keys(SCHEMAS)) {
      const [got] = await receiver.waitFor(1, (r) => r.body.type === type);
      const result = (await SCHEMAS[type]!.parse(got!.body, AS_THE_SDK_PARSES)) as { ok: boolean; errors?: unknown };
      expect(result, `${type}: ${JSON.stringify(result.errors)}`).toMatchObject({ ok: true });
      seen.add(type);
    }
    expect(seen.size).toBe(Object.keys(SCHEMAS).length);
  });
});
