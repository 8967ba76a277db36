import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { histogramTop, rangesOfTop } from "../../src/domain/histogram.js";
import { levelIndex } from "../../src/domain/levels.js";
import { localDayIndex } from "../../src/domain/periods.js";
import { shardOf } from "../../src/store/keys.js";
import { LOST_STREAK_CAP } from "../../src/store/read-store.js";
import { startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";
import { commandsDuring } from "../helpers/monitor.js";
import { startTestRedis } from "../helpers/redis-server.js";

/**
 * 100 000 users, written straight into the per-shard structures the event script keeps (the
 * counters {t:s}:agg, the points zsets, the streak zsets) by one seeding script per shard and
 * chunk. The cross-user reads must be exact against the same generator, and each must stay a
 * small set of Redis calls that does not grow with the number of users (DESIGN: cross-user
 * reads merge S per-shard structures). Its own redis-server, so MONITOR sees only this test.
 */
const USERS = 100_000;
const SHARDS = 16;
const NOW = Date.parse("2026-06-15T12:00:00Z");
const DAY = 86_400_000;
const tenantId = uniqueTenantId("big");
const YAML = tenantYaml(
  tenantId,
  `
    shards: ${SHARDS}
    metrics: [{ key: lessons, name: Lessons }]
    points:
      - key: xp
        name: XP
        triggers: [{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 10 }]
        levels:
          - { key: bronze, name: Bronze, points: 50 }
          - { key: silver, name: Silver, points: 1000 }
          - { key: gold, name: Gold, points: 4000 }
    achievements:
      - { key: first, name: First, type: metric, metric: lessons, value: 1 }
      - { key: tenth, name: Tenth, type: metric, metric: lessons, value: 10 }
      - { key: hundredth, name: Hundredth, type: metric, metric: lessons, value: 100 }
    streak: { frequency: daily, metrics: [{ metric: lessons, threshold: 1 }] }
`,
);

/** The generator: what user i holds. Deterministic, so the test computes the truth from it. */
interface Seeded {
  id: string;
  xp: number | null;
  achievements: string[];
  /** Current streak length in {t:s}:sa, with its deadline; lost when the deadline is past. */
  streak: { length: number; lost: boolean } | null;
  best: number;
}

function user(i: number): Seeded {
  const xp = i % 10 === 0 ? null : (i * 7919) % 5003;
  const achievements = ["first", ...(i % 5 === 0 ? ["tenth"] : []), ...(i % 97 === 0 ? ["hundredth"] : [])];
  const length = i % 3 === 0 ? 1 + ((i * 31) % 400) : 0;
  const streak = length > 0 ? { length, lost: i % 9 === 0 } : null;
  return { id: `u${i}`, xp, achievements, streak, best: Math.max(length, (i * 13) % 420) };
}

const SEED = `
local prefix, now, day = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local counts = {}
local function bump(field) counts[field] = (counts[field] or 0) + 1 end
local i = 4
while i <= #ARGV do
  local id, xp, ach, len, lost, best, full = ARGV[i], tonumber(ARGV[i+1]), ARGV[i+2], tonumber(ARGV[i+3]), ARGV[i+4], tonumber(ARGV[i+5]), ARGV[i+6]
  i = i + 7
  bump('users')
  if xp >= 0 then redis.call('ZADD', prefix .. 'pz:xp', xp, id) end
  for a in string.gmatch(ach, '[^,]+') do bump('ac:' .. a) end
  if len > 0 then
    redis.call('ZADD', prefix .. 'sa', len, id)
    redis.call('ZADD', prefix .. 'sd', lost == '1' and (now - day) or (now + day), id)
  end
  if best > 0 then redis.call('ZADD', prefix .. 'sb', best, id) end
  if full == '1' then
    local today = math.floor(now / day)
    local last = lost == '1' and (today - 2) or today
    local state = { ct = now, up = now, cd = today }
    if len > 0 then state.sl = len; state.ss = last - len + 1; state.sp = last end
    redis.call('HSET', prefix .. 'u:' .. id, 's', cmsgpack.pack(state), 'nm', 'Name ' .. id, 'tz', 'UTC')
  end
end
for field, n in pairs(counts) do redis.call('HINCRBY', prefix .. 'agg', field, n) end
return 1
`;

let redisServer: Awaited<ReturnType<typeof startTestRedis>>;
let t: TestApp;
const all = Array.from({ length: USERS }, (_, i) => user(i));
const byId = new Map(all.map((u) => [u.id, u]));
const levelThresholds = [{ points: 50 }, { points: 1000 }, { points: 4000 }];

/** Length desc, then id desc in bytes: the documented order of the rankings. */
const rankOrder = (a: { id: string; n: number }, b: { id: string; n: number }) => b.n - a.n || Buffer.compare(Buffer.from(b.id), Buffer.from(a.id));
const activeTop = all
  .filter((u) => u.streak && !u.streak.lost)
  .map((u) => ({ id: u.id, n: u.streak!.length }))
  .sort(rankOrder);
const longestTop = all.map((u) => ({ id: u.id, n: u.best })).sort(rankOrder);
/** Users the reads will look at closely get a full user hash (state, name, zone). */
const full = new Set([...activeTop.slice(0, 100), ...longestTop.slice(0, 100)].map((x) => x.id).concat(["u3", "u9"]));

beforeAll(async () => {
  redisServer = await startTestRedis();
  // No background jobs: MONITOR sees every client, and the streak expiry's BullMQ worker and
  // queue events poll (BZPOPMIN, XREAD BLOCK, a script) every few seconds of wall time; a poll
  // that fell inside a read's window counted against that read.
  t = await startTestApp({ yaml: YAML, redisUrl: redisServer.url, manualClock: new Date(NOW).toISOString(), jobs: false });
  const seeder = new Redis(redisServer.url);
  const byShard = new Map<number, (string | number)[]>();
  for (const u of all) {
    const args = byShard.get(shardOf(u.id, SHARDS)) ?? [];
    args.push(u.id, u.xp ?? -1, u.achievements.join(","), u.streak?.length ?? 0, u.streak?.lost ? "1" : "0", u.best, full.has(u.id) ? "1" : "0");
    byShard.set(shardOf(u.id, SHARDS), args);
  }
  for (const [shard, args] of byShard) {
    for (let from = 0; from < args.length; from += 7 * 2000) {
      await seeder.eval(SEED, 0, `{${tenantId}:${shard}}:`, NOW, DAY, ...args.slice(from, from + 7 * 2000));
    }
  }
  seeder.disconnect();
});
afterAll(async () => {
  try {
    await t?.close();
  } finally {
    await redisServer?.stop();
  }
});

describe(`cross-user reads over ${USERS} seeded users`, () => {
  it("the seed respects the lost-streak bound of the streak reads", async () => {
    const lostPerShard = new Map<number, number>();
    for (const u of all) if (u.streak?.lost) lostPerShard.set(shardOf(u.id, SHARDS), (lostPerShard.get(shardOf(u.id, SHARDS)) ?? 0) + 1);
    expect(Math.max(...lostPerShard.values())).toBeLessThan(LOST_STREAK_CAP);
  });

  it("achievements: completions and rarity are exact", async () => {
    const res = await t.call("GET", "/v1/achievements");
    const count = (key: string) => all.filter((u) => u.achievements.includes(key)).length;
    expect(res.body.map((a: { key: string; completions: number; rarity: number }) => [a.key, a.completions, a.rarity])).toEqual(
      ["first", "tenth", "hundredth"].map((k) => [k, count(k), Math.round((count(k) / USERS) * 10_000) / 100]),
    );
  });

  it("level summary: users per level", async () => {
    const res = await t.call("GET", "/v1/points/xp/level-summary");
    const at = (n: number) => all.filter((u) => u.xp !== null && levelIndex(levelThresholds, u.xp) === n).length;
    expect(res.body.map((l: { users: number }) => l.users)).toEqual([at(1), at(2), at(3)]);
  });

  it("points summary: the histogram of totals", async () => {
    const res = await t.call("GET", "/v1/points/xp/summary");
    const totals = all.map((u) => u.xp ?? 0);
    const ranges = rangesOfTop(histogramTop(Math.max(...totals)));
    expect(ranges[0]).toEqual([1, 1000]);
    expect(res.body).toEqual([
      { from: 0, to: 0, users: totals.filter((x) => x === 0).length },
      ...ranges.map(([from, to]) => ({ from, to, users: totals.filter((x) => x >= from && x <= to).length })),
    ]);
  });

  it("rankings: active (lost streaks excluded) and longest, merged from the shards", async () => {
    const active = await t.call("GET", "/v1/streaks/rankings?limit=100");
    expect(active.body).toEqual(activeTop.slice(0, 100).map((x) => ({ userId: x.id, name: `Name ${x.id}`, streakLength: x.n })));
    const longest = await t.call("GET", "/v1/streaks/rankings?type=longest&limit=25");
    expect(longest.body).toEqual(longestTop.slice(0, 25).map((x) => ({ userId: x.id, name: `Name ${x.id}`, streakLength: x.n })));
  });

  it("a user's rank counts the longer active streaks of every shard", async () => {
    const u3 = byId.get("u3")!;
    expect(u3.streak).toEqual({ length: 94, lost: false });
    expect(localDayIndex(NOW, "UTC")).toBe(Math.floor(NOW / DAY));
    const res = await t.call("GET", "/v1/users/u3/streak?historyPeriods=1");
    expect(res.body.length).toBe(94);
    expect(res.body.rank).toBe(1 + activeTop.filter((x) => x.n > 94).length);
    // u9's streak is lost (its deadline passed): no rank.
    expect((await t.call("GET", "/v1/users/u9/streak")).body).toMatchObject({ length: 0, rank: null });
  });

  it("each read is a small, bounded set of Redis calls, whatever the number of users", async () => {
    const reads: [string, number, number][] = [
      // path, most commands from the service, most commands the scripts run inside Redis
      // A count over every shard is one call (a standalone Redis: src/store/cross-shard.ts);
      // strings (the counters' HMGET, ZREVRANGE pages) are read with one plain command a shard.
      ["/v1/achievements", SHARDS, 0],
      ["/v1/points/xp/level-summary", 1, 3 * SHARDS],
      ["/v1/points/xp/summary", 2, 2 * SHARDS * 14],
      // The rankings then read their users' names: an HGET each (ReadStore.names), as many as the
      // limit asks for (at most 100), whatever the number of users. A bulk read reads its users
      // in one call.
      ["/v1/streaks/rankings?limit=10", 1 + 10, SHARDS * 4],
      ["/v1/streaks/rankings?type=longest&limit=10", SHARDS + 10, 0],
      [`/v1/streaks?userIds=${Array.from({ length: 40 }, (_, i) => `u${i}`).join(",")}`, 1, 40],
      // The user's script, and the rank script over every shard, which takes out the lost streaks
      // not yet settled: on every shard here (the seed writes them; the expiry sweep, which
      // settles them in service, has not run).
      ["/v1/users/u3/streak", 2, 5 + SHARDS * 4],
    ];
    for (const [path, maxCommands, maxLua] of reads) {
      const seen = await commandsDuring(redisServer.url, () => t.call("GET", path));
      expect(seen.commands.length, `${path}: ${seen.commands.map((c) => c[0]).join(" ")}`).toBeLessThanOrEqual(maxCommands);
      expect(seen.luaCalls.length, `${path}: ${seen.luaCalls.join(" ")}`).toBeLessThanOrEqual(maxLua);
    }
  });

  // Last: it takes the seed's lost streaks out, as the expiry sweep does once it has settled them
  // (src/jobs/streak-expiry.ts; most of the seed's users have no state for it to settle).
  it("with no lost streak awaiting settlement, a user's rank is the same, still one call over every shard", async () => {
    const before = (await t.call("GET", "/v1/users/u3/streak")).body.rank;
    const settled = t.redis.pipeline();
    for (const u of all) {
      if (!u.streak?.lost) continue;
      const prefix = `{${tenantId}:${shardOf(u.id, SHARDS)}}:`;
      settled.zrem(`${prefix}sa`, u.id).zrem(`${prefix}sd`, u.id);
    }
    await settled.exec();
    const seen = await commandsDuring(redisServer.url, () => t.call("GET", "/v1/users/u3/streak"));
    expect(seen.commands.map((c) => c[0]!.toLowerCase())).toEqual(["fcall", "fcall"]);
    expect((await t.call("GET", "/v1/users/u3/streak")).body.rank).toBe(before);
  });
});
