// node bench/alternate.mjs <events|read|missing|streak|achievements|board|rankings|user-board|around|bulk-streaks> <config> <pairs> <A> <B>   (after npm run build)
//
// One phase of bench/run.mjs (or `missing`: metering reads of users that do not exist, each a
// 404; `streak`: GET /v1/users/{id}/streak, the user's script and the rank over every shard;
// `achievements`: GET /v1/users/{id}/achievements, the user's script and the counters of every shard;
// `board`: GET /v1/leaderboards/xp-all-time, the first page of a board every request asks for, with
// a tenant that has it: config/demo.yaml; `rankings`: GET /v1/streaks/rankings, the top 10 active
// streaks every request asks for, then their names; `user-board`: GET /v1/users/{id}/leaderboards/xp-all-time,
// a user's rank on a board, with config/demo.yaml; `around`: GET /v1/leaderboards/xp-all-time?userId={id}&offset=-5&limit=10,
// the page around a user, with config/demo.yaml and BENCH_USERS up to the board's 1000 to have them all on it;
// `bulk-streaks`: GET /v1/streaks?userIds=<20 random users>)
// for the service under two settings, alternated pair by pair on a
// fresh redis-server each time, so that this VM's drift (a third between runs) falls on both
// alike. A and B are environment settings for the service, each "NAME=value[,NAME=value]" or
// "-" for none; "nice=N" starts its redis-server at that niceness instead (as root);
// "entry=<path>" runs another build's dist/main.js (a git worktree of an earlier commit, built);
// "processes=N" runs N service processes sharing the port (LAUREL_REUSE_PORT=1: the kernel spreads
// autocannon's connections among them), their CPU summed.
//   node bench/alternate.mjs read bench/core-tenant.yaml 3 LAUREL_COALESCE=off LAUREL_COALESCE=on
//   node bench/alternate.mjs events bench/core-tenant.yaml 2 - nice=-10
//   node bench/alternate.mjs events bench/core-tenant.yaml 3 entry=/tmp/before/dist/main.js -
//   node bench/alternate.mjs events bench/core-tenant.yaml 3 - processes=2
// Environment: BENCH_USERS (default 20000), BENCH_DURATION (10), BENCH_WARMUP (3), BENCH_CONNECTIONS (100),
// BENCH_SERVICE_NODE_ARGS (extra node flags for the service, e.g. --cpu-prof), BENCH_STATS=1 (each
// command's calls and µs a request, from commandstats).
// Prints req/s, p99, Redis µs per script (or per LRANGE) and the service's CPU µs per request of
// each run. Reports; never gates.
import { execFileSync } from "node:child_process";
import { Redis } from "ioredis";
import { freePort } from "../dist/embedded-redis.js";
import { Children, cpuSeconds, runBench, scratchRedis, serviceNodeArgs } from "./processes.mjs";
import { eventRequests, load, phaseSettings, readRequests, seedUsers, SERVICE_EVENT_PATHS, userId } from "./workload.mjs";

const [phaseName, config, pairsText, ...variants] = process.argv.slice(2);
if (!["events", "read", "missing", "streak", "achievements", "board", "rankings", "user-board", "around", "bulk-streaks"].includes(phaseName) || !config || variants.length !== 2) {
  console.error("usage: node bench/alternate.mjs <events|read|missing|streak|achievements|board|rankings|user-board|around|bulk-streaks> <config> <pairs> <A> <B>");
  process.exit(2);
}
const settings = phaseSettings(20_000);
const children = new Children();
const cleanups = [];
const cleanup = async () => {
  await children.stopAll();
  for (const fn of cleanups.splice(0)) await fn();
};

function parseVariant(text) {
  const env = {};
  let nice = null;
  let entry = "dist/main.js";
  let processes = 1;
  if (text !== "-") {
    for (const pair of text.split(",")) {
      const at = pair.indexOf("=");
      const [name, value] = [pair.slice(0, at), pair.slice(at + 1)]; // a value may hold "=": NODE_OPTIONS=--flag=1
      if (name === "nice") nice = value;
      else if (name === "entry") entry = value;
      else if (name === "processes") processes = Number(value);
      else env[name] = value;
    }
  }
  if (!Number.isInteger(processes) || processes < 1) throw new Error(`processes must be a whole number from 1, not ${text}`);
  return { env, nice, entry, processes };
}

async function run(label, { env, nice, entry, processes }) {
  const { server, stop } = await scratchRedis("laurel-alt-");
  cleanups.push(stop);
  const redis = new Redis(server.url);
  const redisPid = Number((await redis.info("server")).match(/process_id:(\d+)/)[1]);
  if (nice !== null) execFileSync("renice", ["-n", nice, "-p", String(redisPid)]);
  const port = await freePort();
  const shared = processes > 1 ? { LAUREL_REUSE_PORT: "1" } : {};
  const services = [];
  for (let i = 0; i < processes; i++) {
    services.push(await children.start(`service ${label}`, "node", [...serviceNodeArgs(), entry], { REDIS_URL: server.url, PORT: String(port), LAUREL_CONFIG: config, LAUREL_WORKER: "off", LOG_LEVEL: "warn", ...shared, ...env }, `http://127.0.0.1:${port}/healthz`));
  }
  const serviceCpu = () => services.reduce((sum, s) => sum + cpuSeconds(s.pid), 0);
  const url = `http://127.0.0.1:${port}`;
  await seedUsers(url, settings, `${label}: `);
  const requests =
    phaseName === "events"
      ? eventRequests(settings.users, SERVICE_EVENT_PATHS)
      : phaseName === "streak" || phaseName === "achievements"
        ? readRequests(settings.users, (id) => `/v1/users/${id}/${phaseName}`)
        : phaseName === "board"
          ? readRequests(settings.users, () => "/v1/leaderboards/xp-all-time")
          : phaseName === "rankings"
            ? readRequests(settings.users, () => "/v1/streaks/rankings")
            : phaseName === "user-board"
              ? readRequests(settings.users, (id) => `/v1/users/${id}/leaderboards/xp-all-time`)
              : phaseName === "around"
                ? readRequests(settings.users, (id) => `/v1/leaderboards/xp-all-time?userId=${id}&offset=-5&limit=10`)
                : phaseName === "bulk-streaks"
                  ? { draw: () => ({ method: "GET", path: `/v1/streaks?userIds=${Array.from({ length: 20 }, () => userId(Math.floor(Math.random() * settings.users))).join(",")}` }) }
              : readRequests(settings.users, (id) => `/v1/users/${id}${phaseName === "missing" ? "-absent" : ""}/points/energy?awards=10`);
  await load(url, requests, { connections: settings.connections, duration: settings.warmup });
  await redis.config("RESETSTAT");
  const readsBefore = readsProcessed(await redis.info("stats"));
  const cpuBefore = serviceCpu();
  const redisCpuBefore = cpuSeconds(redisPid);
  const result = await load(url, requests, { connections: settings.connections, duration: settings.duration });
  const serviceCpuUs = ((serviceCpu() - cpuBefore) * 1e6) / result.requests;
  const redisCpuUs = ((cpuSeconds(redisPid) - redisCpuBefore) * 1e6) / result.requests;
  const stats = await redis.info("commandstats");
  const reads = readsProcessed(await redis.info("stats")) - readsBefore;
  const command = ["events", "streak", "achievements", "rankings", "user-board", "around", "bulk-streaks"].includes(phaseName) ? "fcall" : phaseName === "board" ? "zrevrange" : "lrange";
  const m = new RegExp(`cmdstat_${command}:calls=(\\d+),usec=(\\d+)`).exec(stats);
  // Every command's time, for reads that send several kinds.
  const redisUs = [...stats.matchAll(/cmdstat_[a-z|]+:calls=\d+,usec=(\d+)/g)].reduce((sum, x) => sum + Number(x[1]), 0) / result.requests;
  if (process.env.BENCH_STATS === "1") {
    // Every command's calls and µs per request (a script's commands are counted in it and under their own names).
    const rows = [...stats.matchAll(/cmdstat_([a-z|]+):calls=(\d+),usec=(\d+)/g)].map((x) => [x[1], Number(x[2]) / result.requests, Number(x[3]) / result.requests]);
    for (const [name, calls, usec] of rows.sort((a, b) => b[2] - a[2])) console.log(`  ${name}: ${calls.toFixed(2)} calls, ${usec.toFixed(1)} µs a request`);
  }
  console.log(`${label}: ${Math.round(result.rps)} req/s, p99 ${result.p99} ms, ${m ? (Number(m[2]) / Number(m[1])).toFixed(1) : "n/a"} µs per ${command}, Redis ${redisUs.toFixed(1)} µs in commands (${redisCpuUs.toFixed(1)} µs of its CPU) and service CPU ${serviceCpuUs.toFixed(1)} µs per request; ${(result.requests / reads).toFixed(1)} requests per Redis read`);
  redis.disconnect();
  await children.stopAll();
  await stop();
  cleanups.splice(cleanups.indexOf(stop), 1);
}

// Redis's count of reads from client sockets: requests per read is the size of the batches it
// takes in (and answers only after the whole batch has run).
function readsProcessed(stats) {
  return Number(/total_reads_processed:(\d+)/.exec(stats)[1]);
}

async function main() {
  for (let pair = 0; pair < Number(pairsText); pair++) {
    for (const variant of variants) await run(variant, parseVariant(variant));
  }
}

await runBench(main, cleanup);
