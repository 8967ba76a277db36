// node bench/cross-shard-cost.mjs [reads] [rounds]   (after npm run build)
//
// Redis's CPU for one cross-shard read of 16 shards, sent as plain commands (one a shard, in one
// pipeline: what every cross-shard read was before the forty-sixth stop) against one script call
// over every shard (src/store/cross-shard.ts), on a scratch redis-server it starts and stops:
//   - the streak's rank of one length: 2 ZCOUNTs a shard, against lua/streakRanks-2.lua;
//   - a count (ZCOUNT, ZCARD), against lua/countEachShard-1.lua;
//   - strings: HMGET of 3 counters, ZREVRANGE of 10 with scores, sent through
//     lua/countEachShard-1.lua (it runs any command it is given) to show why the service keeps
//     those plain: a script makes each string a Lua string and converts it back.
// 16 sets of 6 250 members (100 000 users' streaks or board entries) and 16 counter hashes. Each
// read is measured with 100 in flight (Redis busy, as where it bounds a deployment), as Redis's
// CPU (user + sys, INFO cpu) over `reads` reads; `rounds` alternations. Then the streak ranks of
// one batch of reads, gathered into one call. Reports; never gates.
import { Redis } from "ioredis";
import { loadLua } from "../dist/store/lua-loader.js";
import { scratchRedis } from "./processes.mjs";

const [reads = "5000", rounds = "2"] = process.argv.slice(2);
const SHARDS = 16;
const MEMBERS = 6250;
const { server, stop } = await scratchRedis("laurel-cross-shard-");
const redis = new Redis(server.url);
try {
  const now = Date.now();
  for (let s = 0; s < SHARDS; s++) {
    const p = redis.pipeline();
    for (let i = 0; i < MEMBERS; i++) {
      p.zadd(`{t:${s}}:sa`, 1 + (i % 100), `u${s}-${i}`);
      p.zadd(`{t:${s}}:sd`, now + 86_400_000 + i, `u${s}-${i}`);
    }
    p.hset(`{t:${s}}:agg`, "users", MEMBERS, "ac:first-lesson", 6000, "ac:ten-lessons", 3000);
    await p.exec();
  }
  const rank = loadLua("streakRanks-2");
  const each = loadLua("countEachShard-1");
  for (const script of [rank, each]) await redis.function("LOAD", "REPLACE", script.library);
  const shards = Array.from({ length: SHARDS }, (_, s) => s);
  const pairs = shards.flatMap((s) => [`{t:${s}}:sa`, `{t:${s}}:sd`]);
  const sets = shards.map((s) => `{t:${s}}:sa`);
  const hashes = shards.map((s) => `{t:${s}}:agg`);
  const plain = (build) => () => {
    const p = redis.pipeline();
    build(p);
    return p.exec();
  };
  const eachCall = (keys, args) => () => redis.fcall(each.functionName, keys.length, ...keys, ...args);
  const cases = [
    ["streak rank", plain((p) => shards.forEach((s) => p.zcount(`{t:${s}}:sa`, "(50", "+inf").zcount(`{t:${s}}:sd`, "-inf", now))), () => redis.fcall(rank.functionName, pairs.length, ...pairs, now, 1000, 50)],
    ["ZCOUNT", plain((p) => sets.forEach((k) => p.zcount(k, "(50", "+inf"))), eachCall(sets, ["ZCOUNT", "(50", "+inf"])],
    ["ZCARD", plain((p) => sets.forEach((k) => p.zcard(k))), eachCall(sets, ["ZCARD"])],
    ["HMGET of 3", plain((p) => hashes.forEach((k) => p.hmget(k, "users", "ac:first-lesson", "ac:ten-lessons"))), eachCall(hashes, ["HMGET", "users", "ac:first-lesson", "ac:ten-lessons"])],
    ["ZREVRANGE 10 WITHSCORES", plain((p) => sets.forEach((k) => p.zrevrange(k, 0, 9, "WITHSCORES"))), eachCall(sets, ["ZREVRANGE", 0, 9, "WITHSCORES"])],
  ];
  const cpu = async () => {
    const info = await redis.info("cpu");
    return Number(/used_cpu_sys:([\d.]+)/.exec(info)[1]) + Number(/used_cpu_user:([\d.]+)/.exec(info)[1]);
  };
  const measure = async (read) => {
    const before = await cpu();
    for (let i = 0; i < Number(reads); i += 100) await Promise.all(Array.from({ length: 100 }, read));
    return (((await cpu()) - before) * 1e6) / Number(reads);
  };
  console.log(`Redis CPU µs per read of ${SHARDS} shards (${MEMBERS} members a set), ${reads} reads, 100 in flight`);
  console.log(`${"read".padEnd(26)} ${"plain, one a shard".padStart(20)} ${"one call".padStart(10)}`);
  for (const [name, plainRead, oneCall] of cases) {
    for (let round = 0; round < Number(rounds); round++) {
      const a = await measure(plainRead);
      const b = await measure(oneCall);
      console.log(`${name.padEnd(26)} ${a.toFixed(1).padStart(20)} ${b.toFixed(1).padStart(10)}`);
    }
  }
  // The streak reads of one batch gather their ranks into one call (ReadStore.streakRank):
  // Redis's CPU per rank for a batch of 40 reads, sent each alone (before the forty-ninth stop),
  // in one call with 40 distinct lengths (the worst case), and with 5 distinct lengths.
  const BATCH = 40;
  const rankCall = (lengths) => () => redis.fcall(rank.functionName, pairs.length, ...pairs, now, 1000, ...lengths);
  const distinct = Array.from({ length: BATCH }, (_, i) => 1 + ((i * 37) % 100));
  const five = [...new Set(distinct.map((l) => 1 + (l % 5) * 20))];
  const gathered = [
    ["40 calls, one length each", () => Promise.all(distinct.map((l) => rankCall([l])()))],
    ["1 call, 40 distinct lengths", rankCall(distinct)],
    ["1 call, 5 distinct lengths", rankCall(five)],
  ];
  console.log(`\nRedis CPU µs per streak rank, a batch of ${BATCH} ranks (${reads} batches, 100 in flight)`);
  for (let round = 0; round < Number(rounds); round++) {
    const row = [];
    for (const [name, batch] of gathered) row.push(`${name} ${((await measure(batch)) / BATCH).toFixed(1)}`);
    console.log(row.join(" · "));
  }
} finally {
  redis.disconnect();
  await stop();
}
