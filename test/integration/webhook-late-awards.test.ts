import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { lessonsXpTenantYaml } from "../helpers/tenant-yaml.js";
import { startReceiver, type Receiver } from "../helpers/webhook-receiver.js";

/**
 * points.changed carries the `awards` of its change (README: Webhooks, Event types and payloads),
 * read from the user's award list when the event is built (src/jobs/webhooks/payloads.ts,
 * awardsOf). The list keeps the newest 100-120 awards; a consumer more than 20 awards behind
 * (here 25 lessons of one user before it runs) found the oldest changes' awards beyond the 20 it
 * read and sent `awards: []` for them, though the list still held them.
 */
const tenantId = uniqueTenantId("wla");
let receiver: Receiver;
let t: TestApp;

beforeAll(async () => {
  receiver = await startReceiver();
  const yaml = lessonsXpTenantYaml(
    tenantId,
    1,
    `    webhooks:
      - { key: main, url: "${receiver.url}", secret: "a-test-secret-0123456789", events: [points.changed] }
`,
  );
  t = await startTestApp({ yaml, manualClock: "2026-06-01T12:00:00Z" });
});
afterAll(async () => {
  await t.close();
  await receiver.close();
});

describe("points.changed reached late", () => {
  it("carries the awards of each change while the user's award list holds them", async () => {
    const lessons = 25;
    for (let i = 0; i < lessons; i++) expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "late" }, value: 1 })).status).toBe(201);
    await t.app.webhooks!.drain();
    await t.app.webhooks!.settled(tenantId);
    const sent = receiver.received.filter((r) => r.body?.user?.id === "late" && r.body.type === "points.changed");
    expect(sent).toHaveLength(lessons);
    const byTotal = sent.map((r) => r.body.points).sort((a, b) => a.total - b.total);
    byTotal.forEach((points, i) => {
      expect(points.total).toBe(10 * (i + 1));
      expect(points.added).toBe(10);
      expect(points.awards).toEqual([expect.objectContaining({ awarded: 10, total: 10 * (i + 1) })]);
    });
  });
});
