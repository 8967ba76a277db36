import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { commandsDuring } from "../helpers/monitor.js";
import { lessonsXpTenantYaml } from "../helpers/tenant-yaml.js";
import { startReceiver, type Receiver } from "../helpers/webhook-receiver.js";

/**
 * leaderboard.rank_changed for board changes that gave no rank: a board of one, where every
 * user after the first stays off it. The event script writes such a change into the record (the
 * board part) but logs no rank-history entry, since it had no rank before or after. The consumer
 * must send nothing for it, and must know that from the history alone: no cross-shard rank
 * reads (src/jobs/webhooks/payloads.ts, ranksOf).
 */
const tenantId = uniqueTenantId("wrk");
let receiver: Receiver;
let t: TestApp;

beforeAll(async () => {
  receiver = await startReceiver();
  const yaml = lessonsXpTenantYaml(
    tenantId,
    4,
    `    leaderboards:
      - { key: top, name: Top, rankBy: points, points: xp, start: "2026-06-01", maxParticipants: 1 }
    webhooks:
      - { key: main, url: "${receiver.url}", secret: "a-test-secret-0123456789", events: [leaderboard.rank_changed] }
`,
  );
  t = await startTestApp({ yaml, manualClock: "2026-06-01T12:00:00Z" });
});
afterAll(async () => {
  await t.close();
  await receiver.close();
});

const lesson = async (user: string) => expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: user }, value: 1 })).status).toBe(201);

describe("a board change off the board before and after", () => {
  it("sends nothing and reads no ranks, while a change onto the board is sent", async () => {
    await lesson("first");
    await lesson("first");
    await t.app.webhooks!.drain();
    // Onto the board; the second lesson kept rank 1, which is no change.
    const [onBoard] = await receiver.waitFor(1);
    expect(onBoard!.body).toMatchObject({ type: "leaderboard.rank_changed", user: { id: "first" }, leaderboard: { key: "top", rank: 1, previousRank: null, value: 10 } });

    // 10 XP against the leader's 20 on a board of one: no rank, before or after.
    await lesson("second");
    let processed = 0;
    const seen = await commandsDuring(inject("redisUrl"), async () => {
      processed = await t.app.webhooks!.drain();
    });
    expect(processed).toBe(1);
    const rankReads = seen.commands.filter((c) => c[0]!.toLowerCase() === "zcount" && c.some((a) => a.includes(tenantId)));
    expect(rankReads).toEqual([]);
    await t.app.webhooks!.settled(tenantId);
    expect(receiver.received.map((r) => r.body.user.id)).toEqual(["first"]);
  });
});
