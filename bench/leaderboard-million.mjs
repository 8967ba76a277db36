// Leaderboard reads at a million participants (issue 5, "Cost"): bulk-loads 1,000,000 scores into
// one run of a board spread over 16 shard sorted sets, exactly as the scripts lay them out, then
// measures the Redis time of a top-10 read and of a user-rank read, both done by the service's
// own read functions (dist/store/leaderboard-store.js). Redis time is read from INFO commandstats.
//
//   npm run build && node bench/leaderboard-million.mjs         (BENCH_PARTICIPANTS, BENCH_READS)
// Counts over every shard go as one call, as in the service on a standalone Redis
// (src/store/cross-shard.ts); BENCH_PER_SHARD=1 sends them one command a shard, as before.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { startEmbeddedRedis } from "../dist/embedded-redis.js";
import { boardMember } from "../dist/domain/leaderboards.js";
import { boardKeys, boardRank, entriesAround, rankOf, topEntries } from "../dist/store/leaderboard-store.js";
import { learnShardsPerCall } from "../dist/store/cross-shard.js";
import { shardOf } from "../dist/domain/shards.js";

const PARTICIPANTS = Number(process.env.BENCH_PARTICIPANTS ?? 1_000_000);
const READS = Number(process.env.BENCH_READS ?? 2000);
const SHARDS = 16;

const dir = mkdtempSync(join(tmpdir(), "laurel-lb-"));
const server = await startEmbeddedRedis({ dir, appendOnly: false });
const redis = new Redis(server.url);
// As the service's stores do when they open: a standalone Redis takes a count over every shard in one call.
if (process.env.BENCH_PER_SHARD !== "1") await learnShardsPerCall(redis);
try {
  const board = { key: "xp-all-time", maxParticipants: 1000, ranking: "competition" };
  const store = { redis, tenant: { shards: SHARDS } };
  const keys = boardKeys({ ...store, keys: { prefix: (s) => `{bench:${s}}:` } }, board, 0, "");

  // Scores: a long tail (most users low, few high) with many ties, reached at distinct instants.
  const t0 = Date.now();
  const start = Date.parse("2026-01-01T00:00:00Z");
  const batch = 2000;
  for (let from = 0; from < PARTICIPANTS; from += batch) {
    const byShard = new Map();
    for (let i = from; i < Math.min(from + batch, PARTICIPANTS); i++) {
      const user = `user-${i}`;
      const value = Math.floor(1e6 / (1 + (i * 7919) % PARTICIPANTS) ** 0.5) * 10;
      const args = byShard.get(shardOf(user, SHARDS)) ?? [];
      args.push(value, boardMember(start + i * 37, user));
      byShard.set(shardOf(user, SHARDS), args);
    }
    const pipeline = redis.pipeline();
    for (const [shard, args] of byShard) pipeline.zadd(keys[shard], ...args);
    await pipeline.exec();
  }
  const loaded = await Promise.all(keys.map((k) => redis.zcard(k)));
  const memory = (await redis.info("memory")).match(/used_memory_human:(\S+)/)[1];
  console.log(`loaded ${loaded.reduce((a, b) => a + b, 0)} participants in ${SHARDS} shards in ${((Date.now() - t0) / 1000).toFixed(1)} s; Redis memory ${memory}`);

  const redisCpu = async () => {
    const info = await redis.info("cpu");
    return (Number(/used_cpu_sys:([\d.]+)/.exec(info)[1]) + Number(/used_cpu_user:([\d.]+)/.exec(info)[1])) * 1e6;
  };
  // Redis time from INFO commandstats: the commands' own time, and a script's whole run under
  // fcall (its commands are counted under their names as well, so a read with scripts shows its
  // scripts only there). Redis CPU from INFO cpu: all of Redis's work per read, network included.
  async function measure(label, read) {
    await redis.config("RESETSTAT");
    const cpu0 = await redisCpu();
    const began = process.hrtime.bigint();
    for (let i = 0; i < READS; i++) await read(i);
    const ms = Number(process.hrtime.bigint() - began) / 1e6;
    const cpu = ((await redisCpu()) - cpu0) / READS;
    const stats = await redis.info("commandstats");
    let usec = 0;
    let calls = 0;
    let scriptUsec = 0;
    for (const line of stats.split("\n")) {
      const m = /^cmdstat_(\w+):calls=(\d+),usec=(\d+)/.exec(line);
      if (!m || ["config", "info", "function"].includes(m[1])) continue;
      if (m[1] === "fcall") scriptUsec += Number(m[3]);
      else usec += Number(m[3]);
      calls += Number(m[2]);
    }
    const time = scriptUsec > 0 ? `${(scriptUsec / READS).toFixed(1)} µs in scripts` : `${(usec / READS).toFixed(1)} µs of Redis time`;
    console.log(`${label.padEnd(30)} ${time} per read (${(calls / READS).toFixed(0)} commands), Redis CPU ${cpu.toFixed(1)} µs, ${(ms / READS).toFixed(2)} ms per read end to end`);
    return scriptUsec > 0 ? cpu : usec / READS;
  }

  const top = await measure("top-10 (16 × ZREVRANGE)", () => topEntries(store, keys, 10));
  // Users spread over the board; their scores are looked up before the measured reads.
  const sample = [];
  for (let i = 0; i < 64; i++) {
    const n = (i * 104_729) % PARTICIPANTS;
    const user = `user-${n}`;
    const member = boardMember(start + n * 37, user);
    sample.push({ member, value: Number(await redis.zscore(keys[shardOf(user, SHARDS)], member)) });
  }
  const rankCompetition = await measure("user rank (ZCOUNT a shard)", (i) => rankOf(store, board, keys, sample[i % 64].value, sample[i % 64].member));
  // The user read's rank (competition; on the board only within maxParticipants, which these
  // sampled users mostly are not), and an ordinal rank: it counts the equal values ranked ahead
  // (src/store/leaderboard-store.ts shardPlaces).
  await measure("user read's rank (boardRank)", (i) => boardRank(store, board, keys, sample[i % 64].value, sample[i % 64].member));
  await measure("ordinal rank", (i) => rankOf(store, { ...board, ranking: "ordinal" }, keys, sample[i % 64].value, sample[i % 64].member));
  // An around-me window's read (offset -2, limit 5) once the user is known to be on the board.
  await measure("around me (2 ahead, 3 behind)", (i) => entriesAround(store, keys, sample[i % 64].value, sample[i % 64].member, 2, 3));
  const ties = await Promise.all(sample.map(({ value }) => Promise.all(keys.map((k) => redis.zcount(k, value, value))).then((c) => c.reduce((a, b) => a + b, 0))));
  console.log(`equal values of the sampled users: median ${ties.sort((a, b) => a - b)[32]}, largest ${ties[63]}`);
  const first = (await topEntries(store, keys, 1))[0];
  console.log(`top entry: ${first.member} with ${first.value}`);
  console.log(`target ≤ 1000 µs: top-10 ${top <= 1000 ? "met" : "MISSED"}, user rank ${rankCompetition <= 1000 ? "met" : "MISSED"}`);
} finally {
  await redis.quit();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
