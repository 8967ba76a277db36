import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { commandsDuring } from "../helpers/monitor.js";
import { lessonsXpTenantYaml, tenantYaml } from "../helpers/tenant-yaml.js";
import { startReceiver, type Receiver } from "../helpers/webhook-receiver.js";

/**
 * leaderboard.rank_changed for board changes that gave no rank: a board of one, where every
 * user after the first stays off it. The event script writes such a change into the record (the
 * board part) but logs no rank-history entry, since it had no rank before or after. The consumer
 * must send nothing for it, and must know that from the history alone: no cross-shard rank
 * reads (src/jobs/webhooks/payloads.ts, ranksOf).
 */
/** Lessons paying 10 XP on 4 shards, one board (`board`: its YAML mapping's fields after the key) and an endpoint for rank changes. */
const boardTenantYaml = (id: string, board: string, url: string) =>
  lessonsXpTenantYaml(
    id,
    4,
    `    leaderboards:
      - { key: top, name: Top, ${board} }
    webhooks:
      - { key: main, url: "${url}", secret: "a-test-secret-0123456789", events: [leaderboard.rank_changed] }
`,
  );

const tenantId = uniqueTenantId("wrk");
let receiver: Receiver;
let t: TestApp;

beforeAll(async () => {
  receiver = await startReceiver();
  const yaml = boardTenantYaml(tenantId, `rankBy: points, points: xp, start: "2026-06-01", maxParticipants: 1`, receiver.url);
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

describe("rank changes the consumer reaches late", () => {
  /**
   * A board of ten: `peer` at 50 XP (and, with `rival`, `rival` at solo's final value), then
   * `solo` sending `lessons` lessons at one instant, all before the consumer runs. The
   * rank_changed events it sends, as [previousRank, rank, value].
   */
  async function lateRanks(lessons: number, ranking = "competition", rival = false) {
    const late = await startReceiver();
    const yaml = boardTenantYaml(uniqueTenantId("wrl"), `rankBy: points, points: xp, start: "2026-06-01", maxParticipants: 10, ranking: ${ranking}`, late.url);
    const app = await startTestApp({ yaml, manualClock: "2026-06-01T12:00:00Z" });
    try {
      expect((await app.call("POST", "/v1/metrics/lessons/event", { user: { id: "peer" }, value: 5 })).status).toBe(201);
      if (rival) expect((await app.call("POST", "/v1/metrics/lessons/event", { user: { id: "rival" }, value: lessons })).status).toBe(201);
      for (let i = 0; i < lessons; i++) expect((await app.call("POST", "/v1/metrics/lessons/event", { user: { id: "solo" }, value: 1 })).status).toBe(201);
      await app.app.webhooks!.drain();
      await app.app.webhooks!.settled();
      // `user?.`: once, under a clean-clone CI run on a loaded box, this receiver (a port picked
      // free) also got a request that was not this tenant's (no user): another test's, to a port
      // it had known before. Only the user's rank changes are this test's to read. (The receiver
      // now drops requests other than POSTs and names them on stderr: webhook-receiver.ts.)
      return late.received.filter((r) => r.body?.user?.id === "solo").map((r) => [r.body.leaderboard.previousRank, r.body.leaderboard.rank, r.body.leaderboard.value]);
    } finally {
      await app.close();
      await late.close();
    }
  }

  it("finds a change deeper than the first history entries read (forty at once): its recorded ranks", async () => {
    // The first change, null → 2, lies 39 entries deep. Ranked on the board as it is now, the
    // user's own later entry (400) counted above it: null → 3, and more changes after it.
    expect(await lateRanks(40)).toEqual([
      [null, 2, 10],
      [2, 1, 50], // level with peer: competition ranks ties alike
    ]);
  });

  it.each(["competition", "dense", "ordinal"])("ranks changes older than the whole history (%s) on the board without the user's own later entry", async (ranking) => {
    // 130 changes: the history keeps its newest 100-120, so the first ones are ranked on the
    // board as it is now, and must come out as the event script recorded them for 10 changes.
    const recorded = await lateRanks(10, ranking);
    // Level with peer at 50: competition and dense rank ties alike; ordinal puts solo first, both
    // having reached 50 at the same (manual clock's) instant, by the ids' order.
    expect(recorded).toEqual([
      [null, 2, 10],
      [2, 1, 50],
    ]);
    expect(await lateRanks(130, ranking)).toEqual(recorded);
  });

  it("ranks a trimmed change on a dense board where another user holds the user's own later value", async () => {
    // The board now: rival 1300, solo 1300, peer 50. Solo's first changes are trimmed from the
    // history, so they are ranked on it without solo's own entry; its value 1300 still counts
    // among the distinct values above, since rival holds it too. 10: values 1300 and 50 above,
    // rank 3 (as the script recorded it: rival was there first). 50: level with peer, 1300
    // above, rank 2. The last change, still in the history: level with rival, rank 1.
    expect(await lateRanks(130, "dense", true)).toEqual([
      [null, 3, 10],
      [3, 2, 50],
      [2, 1, 1300],
    ]);
  });
});

describe("a change off the board, behind a later change onto it", () => {
  it("sends nothing for it and reads no ranks: a history never trimmed says it had none", async () => {
    const receiver = await startReceiver();
    const tenantId = uniqueTenantId("wro");
    const yaml = boardTenantYaml(tenantId, `rankBy: metric, metric: lessons, start: "2026-06-01", maxParticipants: 1`, receiver.url);
    const app = await startTestApp({ yaml, manualClock: "2026-06-01T12:00:00Z" });
    const send = async (user: string, value: number) => expect((await app.call("POST", "/v1/metrics/lessons/event", { user: { id: user }, value })).status).toBe(201);
    try {
      await send("peer", 50);
      await send("solo", 10); // behind peer on a board of one: no rank, no history entry
      await send("peer", -45);
      await send("solo", 1); // 11: onto the board (the script counts the place: the clock has not moved, no threshold is cached)
      let processed = 0;
      const seen = await commandsDuring(inject("redisUrl"), async () => {
        processed = await app.app.webhooks!.drain();
      });
      await app.app.webhooks!.settled(tenantId);
      expect(processed).toBe(4);
      // The first version of the deeper read ranked solo's 10 on the board as it is now: a
      // second null → 1, with 8 ZCOUNTs.
      // Values in the metric's units, previous ones included (the board keeps micro-units).
      expect(
        receiver.received.filter((r) => r.body.user.id === "solo").map((r) => [r.body.leaderboard.previousRank, r.body.leaderboard.rank, r.body.leaderboard.previousValue, r.body.leaderboard.value]),
      ).toEqual([[null, 1, 10, 11]]);
      expect(seen.commands.filter((c) => c[0]!.toLowerCase() === "zcount" && c.some((a) => a.includes(tenantId)))).toEqual([]);
    } finally {
      await app.close();
      await receiver.close();
    }
  });
});

describe("changes of one instant with the same values, one ranked and one not", () => {
  const id = uniqueTenantId("wrb");
  let r: Receiver;
  let app: TestApp;
  beforeAll(async () => {
    r = await startReceiver();
    const yaml = tenantYaml(
      id,
      `
    metrics: [{ key: lessons, name: Lessons }]
    leaderboards:
      - { key: top, name: Top, rankBy: metric, metric: lessons, start: "2026-06-01", maxParticipants: 1 }
    webhooks:
      - { key: main, url: "${r.url}", secret: "a-test-secret-0123456789", events: [leaderboard.rank_changed] }
`,
    );
    app = await startTestApp({ yaml, manualClock: "2026-06-01T12:00:00Z" });
  });
  afterAll(async () => {
    await app.close();
    await r.close();
  });

  it("sends nothing for it when it had no rank: not the ranks of the earlier change at that value", async () => {
    const lesson = async (user: string, value: number) => expect((await app.call("POST", "/v1/metrics/lessons/event", { user: { id: user }, value })).status).toBe(201);
    // The clock stands still: one instant. yo takes the board's one place at 1, lead passes at 2,
    // yo falls to -2 (its rank goes), then comes back to 1: second, off the board, as before the fall.
    await lesson("yo", 1);
    await lesson("lead", 2);
    await lesson("yo", -3);
    await lesson("yo", 3);
    await app.app.webhooks!.drain();
    await app.app.webhooks!.settled(id);
    const counts = (await app.call("GET", "/admin/v1/webhooks", undefined, { "x-api-key": "demo-admin-key" })).body.deliveries;
    expect(counts.delivered).toBe(3);
    const sent = r.received.map((x) => [x.body.user.id, x.body.leaderboard.previousValue, x.body.leaderboard.value, x.body.leaderboard.previousRank, x.body.leaderboard.rank]);
    expect(sent.sort()).toEqual(
      [
        ["lead", null, 2, null, 1],
        ["yo", null, 1, null, 1],
        ["yo", 1, -2, 1, null],
      ].sort(),
    );
  });

  it("sends nothing for it when an earlier change of the instant had the same values before and after and a rank (the record carries its ranks)", async () => {
    const lesson = async (user: string, value: number) => expect((await app.call("POST", "/v1/metrics/lessons/event", { user: { id: user }, value })).status).toBe(201);
    // Still one instant (a board of one, alone on it or not): up from 1 to 2 onto the board, lead
    // passes, down to 1 off it, then up from 1 to 2 again, still behind lead: the same values as
    // the first rise, but no rank before or after, so no entry in the history; the earlier rise's
    // entry matched its instant and values and sent "rank 1" a second time.
    await lesson("lead2", 2);
    await lesson("yo2", 1);
    await lesson("lead2", -2);
    await lesson("yo2", 1);
    await lesson("lead2", 5);
    await lesson("yo2", -1);
    await lesson("yo2", 1);
    await app.app.webhooks!.drain();
    await app.app.webhooks!.settled(id);
    const sent = r.received.filter((x) => x.body.user.id === "yo2").map((x) => [x.body.leaderboard.previousValue, x.body.leaderboard.value, x.body.leaderboard.previousRank, x.body.leaderboard.rank]);
    expect(sent.sort()).toEqual(
      [
        [1, 2, null, 1],
        [2, 1, 1, null],
      ].sort(),
    );
  });
});
