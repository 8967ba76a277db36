// The traffic: who the users are, what each request carries, and one autocannon run.
// Never pipelining > 1: uWS closes a keep-alive connection that sends a request while an async
// response is pending (STACK.md §2), which turns a benchmark into ~40 req/s of artifacts.
import autocannon from "autocannon";

const HEADERS = { "x-api-key": "demo-key", "content-type": "application/json" };
const ZONES = ["UTC", "Europe/London", "Europe/Paris", "America/New_York", "America/Los_Angeles", "Asia/Tokyo", "Asia/Kolkata", "Australia/Sydney"];
/** Share of ingest events that are api-calls (energy -1); the rest are lessons (xp, achievements, streak). */
const API_CALL_SHARE = 0.2;

export const userId = (n) => `user-${n}`;
const randomUser = (users) => Math.floor(Math.random() * users);

/** A realistic event body; a user's zone is fixed (derived from n), as in real traffic. */
export function eventBody(n) {
  const id = userId(n);
  return JSON.stringify({ user: { id, email: `${id}@example.com`, tz: ZONES[n % ZONES.length] }, value: 1 });
}

/** Events for random users among `users` (user-0 .. user-(users - 1)); `paths` = { lessons, apiCalls }. */
export function eventRequests(users, paths) {
  return [{
    method: "POST",
    headers: HEADERS,
    // The request is autocannon's fresh copy of its ~40 options: set on it, not spread again
    // (~4 µs of the load generator's CPU a request on this box, which the service then lacks).
    setupRequest: (req) => {
      req.path = Math.random() < API_CALL_SHARE ? paths.apiCalls : paths.lessons;
      req.body = eventBody(randomUser(users));
      return req;
    },
  }];
}

/** One lessons event for each of users 0 .. users-1, in order: use with `amount: users`. */
export function seedRequests(path) {
  let next = 0;
  return [{ method: "POST", headers: HEADERS, setupRequest: (req) => Object.assign(req, { path, body: eventBody(next++) }) }];
}

/**
 * Seeds users 0 .. users-1 with one lessons event each (so every user a phase asks for exists),
 * printing "<label>seed: N users ... R req/s"; throws when any request fails.
 */
export async function seedUsers(url, { users, connections }, label = "") {
  process.stdout.write(`${label}seed: ${users} users ... `);
  const seed = await load(url, seedRequests("/v1/metrics/lessons/event"), { connections: Math.min(connections, users), amount: users });
  console.log(`${Math.round(seed.rps)} req/s`);
  if (seed.non2xx > 0 || seed.errors > 0) throw new Error(`${label}seeding failed: ${JSON.stringify(seed.statusCodes)}, ${seed.errors} errors`);
  return seed;
}

/** GETs of pathOf(userId) for random users among `users`. */
export function readRequests(users, pathOf) {
  return [{ method: "GET", headers: HEADERS, setupRequest: (req) => Object.assign(req, { path: pathOf(userId(randomUser(users))) }) }];
}

/** One autocannon run; returns the figures the report uses. */
export async function load(url, requests, { connections, duration, amount }) {
  const result = await autocannon({
    url,
    requests,
    connections,
    pipelining: 1,
    ...(amount ? { amount } : { duration }),
  });
  return {
    requests: result.requests.total,
    rps: result.requests.total / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes: Object.fromEntries(Object.entries(result.statusCodeStats).map(([code, s]) => [code, s.count])),
  };
}

/** The phase settings every bench reads from the environment (bench/README.md): BENCH_DURATION, BENCH_WARMUP, BENCH_CONNECTIONS, BENCH_USERS. */
export function phaseSettings(defaultUsers) {
  const num = (name, fallback) => {
    const value = Number(process.env[name] ?? fallback);
    if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number`);
    return value;
  };
  return { duration: num("BENCH_DURATION", 10), warmup: num("BENCH_WARMUP", 3), connections: num("BENCH_CONNECTIONS", 100), users: num("BENCH_USERS", defaultUsers) };
}
