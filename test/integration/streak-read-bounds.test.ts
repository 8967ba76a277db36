import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LOST_STREAK_CAP, readStoreOf } from "../../src/store/read-store.js";
import { wavesDuring } from "../helpers/waves.js";
import { commandsDuring } from "../helpers/monitor.js";
import { startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";

/**
 * The edges of the active-streak reads (GET /v1/streaks/rankings, a user's streak `rank`): a
 * streak is lost at its deadline's very instant ({t:s}:sd, sd <= now: lua/streakTop-2.lua,
 * streakRanks-2.lua), and a shard holding more lost streaks awaiting settlement than
 * LOST_STREAK_CAP cannot tell a rank (null, README: the streak read). One shard; the other users'
 * streaks are written straight into {t:s}:sa and {t:s}:sd, as the event script keeps them, and no
 * background job settles them.
 */
const tenantId = uniqueTenantId("sbound");
const NOW = Date.parse("2026-03-06T12:00:00Z");
let t: TestApp;
// What the app logs at warn and above.
const warnings: { msg: string; read?: string; tenant?: string; cap?: number }[] = [];

beforeAll(async () => {
  t = await startTestApp({
    yaml: tenantYaml(
      tenantId,
      `
    shards: 1
    metrics: [{ key: lessons, name: Lessons }]
    streak: { frequency: daily, metrics: [{ metric: lessons, threshold: 1 }] }
`,
    ),
    manualClock: "2026-03-02T12:00:00Z",
    jobs: false,
    logger: pino({ level: "warn" }, { write: (line: string) => void warnings.push(JSON.parse(line)) }),
  });
  // me: a lesson a day from 2 to 6 March, a streak of 5 alive at NOW.
  for (const day of ["02", "03", "04", "05", "06"]) {
    await t.setClock(`2026-03-${day}T12:00:00Z`);
    expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "me", name: "Me" }, value: 1 })).status).toBe(201);
  }
  // edge's streak is lost at NOW exactly; live's a millisecond later.
  await t.redis.zadd(`{${tenantId}:0}:sa`, 10, "edge", 8, "live");
  await t.redis.zadd(`{${tenantId}:0}:sd`, NOW, "edge", NOW + 1, "live");
});
afterAll(async () => t?.close());

describe("active streaks at the edges", () => {
  it("a streak whose deadline is now is lost: not ranked, not counted above anyone", async () => {
    expect((await t.call("GET", "/v1/streaks/rankings")).body).toEqual([
      { userId: "live", name: null, streakLength: 8 },
      { userId: "me", name: "Me", streakLength: 5 },
    ]);
    expect((await t.call("GET", "/v1/users/me/streak")).body).toMatchObject({ length: 5, rank: 2 });
  });

  it("a lost streak awaiting settlement as long as the user's is not taken out of the count above (it was never in it)", async () => {
    await t.redis.zadd(`{${tenantId}:0}:sa`, 5, "tied-lost");
    await t.redis.zadd(`{${tenantId}:0}:sd`, NOW - 1000, "tied-lost");
    // Above me (5): live (8) only; edge (10) and tied-lost (5) are lost.
    expect((await t.call("GET", "/v1/users/me/streak")).body).toMatchObject({ length: 5, rank: 2 });
  });

  it("lost streaks awaiting settlement, fewer than the cap, ranked above every live one: the rankings skip them all", async () => {
    const lost = Array.from({ length: 100 }, (_, i) => `early-${i}`);
    await t.redis.zadd(`{${tenantId}:0}:sa`, ...lost.flatMap((id) => [30, id]));
    await t.redis.zadd(`{${tenantId}:0}:sd`, ...lost.flatMap((id) => [NOW - 1000, id]));
    expect((await t.call("GET", "/v1/streaks/rankings?limit=2")).body).toEqual([
      { userId: "live", name: null, streakLength: 8 },
      { userId: "me", name: "Me", streakLength: 5 },
    ]);
    expect((await t.call("GET", "/v1/users/me/streak")).body).toMatchObject({ length: 5, rank: 2 });
  });

  it("the ranks of several lengths asked in one turn, one call: each lost streak is taken out of every count it is in", async () => {
    const read = readStoreOf(t.app.tenants.all[0]!.store);
    // Alive at NOW: me (5), live (8). Lost: edge (10), tied-lost (5), early-* (30).
    const lengths = [0, 4, 5, 7, 8, 29, 30];
    const { result, waves } = await wavesDuring(t.redis, () => Promise.all(lengths.map((length) => read.streakRank(length, NOW))));
    expect(waves.map((wave) => wave.length)).toEqual([1]);
    expect(result).toEqual([3, 3, 2, 2, 1, 1, 1]);
    const alone: (number | null)[] = [];
    for (const length of lengths) alone.push(await read.streakRank(length, NOW));
    expect(alone).toEqual(result);
  });

  it("a length several callers of one turn ask for is sent once", async () => {
    const read = readStoreOf(t.app.tenants.all[0]!.store);
    const { host, port } = t.redis.options;
    let ranks: (number | null)[] = [];
    const seen = await commandsDuring(`redis://${host}:${port}`, async () => (ranks = await Promise.all([5, 5, 8, 5].map((length) => read.streakRank(length, NOW)))), t.redis);
    const calls = seen.commands.filter((c) => c[0]!.toLowerCase() === "fcall");
    expect(calls).toHaveLength(1);
    // FCALL <function> 2 <sa> <sd> <now> <cap> <n> <length>... <the asking users' positions>
    // (then their ids: none here, the positions empty): 5 and 8, once each.
    expect(calls[0]!.slice(7)).toEqual(["2", "5", "8", ""]);
    expect(ranks).toEqual([2, 2, 1, 2]);
  });

  it("a shard with more lost streaks awaiting settlement than the cap gives no rank", async () => {
    const lost = Array.from({ length: LOST_STREAK_CAP + 1 }, (_, i) => `lost-${i}`);
    await t.redis.zadd(`{${tenantId}:0}:sa`, ...lost.flatMap((id) => [20, id]));
    await t.redis.zadd(`{${tenantId}:0}:sd`, ...lost.flatMap((id) => [NOW - 1000, id]));
    expect((await t.call("GET", "/v1/users/me/streak")).body).toMatchObject({ length: 5, rank: null });
  });

  it("says so in the log, for a rank and for a ranking, and never while a read was exact", async () => {
    // The start's own warnings aside (this Redis keeps no append-only file).
    const backlog = () => warnings.filter((w) => w.read !== undefined);
    // The reads above, with fewer lost streaks than the cap, logged nothing: only the last.
    expect(backlog()).toEqual([expect.objectContaining({ tenant: tenantId, read: "rank", cap: LOST_STREAK_CAP, msg: expect.stringContaining("streak expiry sweep") })]);
    // 1 001 lost streaks of 20 above live's 8: the ranking cannot reach it.
    const ranking = (await t.call("GET", "/v1/streaks/rankings?limit=2")).body as { userId: string }[];
    expect(ranking.map((r) => r.userId)).not.toContain("live");
    expect(backlog().map((w) => w.read)).toEqual(["rank", "rankings"]);
    // The longest streaks ever take nothing out: exact, and not logged.
    expect((await t.call("GET", "/v1/streaks/rankings?type=longest&limit=1")).status).toBe(200);
    expect(backlog()).toHaveLength(2);
  });
});
