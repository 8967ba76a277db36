// node bench/events-load.mjs <service url> [seed|noseed] [seconds]   (after npm run build)
//
// The core bench's event traffic (bench/workload.mjs: 20 000 users, 100 connections, 20%
// api-calls) against a service that is already running, for profiling it from outside:
//   strace -c -f -p <service pid>, perf record -p <service pid>, node --cpu-prof on the service.
// "seed" first sends each user one lesson. Prints req/s. Reports; never gates.
import { eventRequests, load, seedUsers, SERVICE_EVENT_PATHS } from "./workload.mjs";

const [url, seed = "seed", seconds = "8"] = process.argv.slice(2);
if (!url) {
  console.error("usage: node bench/events-load.mjs <service url> [seed|noseed] [seconds]");
  process.exit(2);
}
const settings = { users: 20_000, connections: 100 };
if (seed === "seed") await seedUsers(url, settings, "");
const traffic = eventRequests(settings.users, SERVICE_EVENT_PATHS);
const result = await load(url, traffic, { connections: settings.connections, duration: Number(seconds) });
console.log(`${Math.round(result.rps)} req/s, ${result.requests} requests`);
