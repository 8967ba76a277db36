// The traffic: who the users are, what each request carries, and one autocannon run.
// Never pipelining > 1: uWS closes a keep-alive connection that sends a request while an async
// response is pending (STACK.md §2), which turns a benchmark into ~40 req/s of artifacts.
import { setFlagsFromString } from "node:v8";
import autocannon from "autocannon";

// The load generator shares the box with what it measures: V8's allocation-site pretenuring off,
// as in the service (src/v8-tuning.ts says why), took autocannon from ~35.6 to ~24-29 µs of CPU
// per request against the bare baseline (bench/README.md, "The twenty-fourth stop"). Every phase,
// baselines included, runs from this process alike.
setFlagsFromString("--no-allocation-site-pretenuring");

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

/** The service's two event routes, as `eventRequests` takes them (the baseline's are both /event). */
export const SERVICE_EVENT_PATHS = { lessons: "/v1/metrics/lessons/event", apiCalls: "/v1/metrics/api-calls/event" };

/**
 * Events for random users among `users` (user-0 .. user-(users - 1)); `paths` = { lessons, apiCalls }.
 * A traffic: `load` turns its draws into prebuilt requests (see `prebuiltClients`).
 */
export function eventRequests(users, paths) {
  return {
    draw: () => ({
      method: "POST",
      path: Math.random() < API_CALL_SHARE ? paths.apiCalls : paths.lessons,
      body: eventBody(randomUser(users)),
    }),
  };
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

/** GETs of pathOf(userId) for random users among `users`: a traffic, as `eventRequests`. */
export function readRequests(users, pathOf) {
  return { draw: () => ({ method: "GET", path: pathOf(userId(randomUser(users))) }) };
}

/**
 * Why requests are prebuilt: autocannon rebuilds a request with a `setupRequest` on every send
 * (`Object.assign` over its ~40 options, then the text), which cost ~25 of its ~52 µs of CPU per
 * event request on a 2-core box whose other core the service and Redis share (bench/README.md,
 * *The eleventh stop*). Here `PREBUILT_REQUESTS` draws are turned into raw HTTP/1.1 requests once
 * per traffic, in one buffer, by its first run (the warm-up, so never inside a measured window),
 * and every connection walks that list from its own place: connection i of c starts at
 * (r + i·n/c) mod n for a random r per run, so no two connections send the same user at the same
 * time and a measured run does not replay its warm-up.
 */
const PREBUILT_REQUESTS = 1 << 18;

function prebuiltList(host, traffic) {
  const lines = (headers) => Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join("");
  const common = lines(HEADERS);
  const texts = [];
  for (let i = 0; i < PREBUILT_REQUESTS; i++) {
    // `headers`: a draw's own (an Idempotency-Key, another API key), over the common ones: a name
    // sent twice is read by the service as its first (a wrong key behind the right one passed).
    const { method, path, body = "", headers: own } = traffic.draw();
    const headers = own ? lines({ ...HEADERS, ...own }) : common;
    const length = body ? `Content-Length: ${Buffer.byteLength(body)}\r\n` : "";
    texts.push(`${method} ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: keep-alive\r\n${headers}${length}\r\n${body}`);
  }
  const all = Buffer.from(texts.join(""));
  const list = [];
  let at = 0;
  for (const text of texts) {
    const end = at + Buffer.byteLength(text);
    list.push({ requestBuffer: all.subarray(at, end) });
    at = end;
  }
  return list;
}

/** autocannon's `setupClient` for one run of `traffic`: each connection gets its place in the prebuilt list. */
export function prebuiltClients(url, traffic, connections) {
  const host = new URL(url).host;
  if (traffic.prebuilt?.host !== host) traffic.prebuilt = { host, list: prebuiltList(host, traffic) };
  const { list } = traffic.prebuilt;
  const rotation = Math.floor(Math.random() * list.length);
  let next = 0;
  // autocannon 9 (pinned in package.json) has no public way to hand a connection prebuilt
  // buffers; its RequestIterator sends `currentRequest.requestBuffer` and only rebuilds entries
  // that have a setupRequest. Fail loudly if that shape ever changes rather than bench nonsense.
  return (client) => {
    const iterator = client.requestIterator;
    if (!iterator || !Array.isArray(iterator.requests) || typeof iterator.nextRequest !== "function") {
      throw new Error("autocannon's RequestIterator changed: bench/workload.mjs prebuiltClients expects autocannon 9");
    }
    const start = (rotation + Math.floor((next++ * list.length) / connections)) % list.length;
    iterator.requests = list;
    iterator.currentRequestIndex = start;
    iterator.currentRequest = list[start];
  };
}

/** One autocannon run; returns the figures the report uses. */
export async function load(url, traffic, { connections, duration, amount }) {
  // A traffic with `draw` is prebuilt; seeding (an exact sequence, `amount`) keeps autocannon's requests.
  const requests = traffic.draw ? { requests: [{ method: "GET", path: "/" }], setupClient: prebuiltClients(url, traffic, connections) } : { requests: traffic };
  const result = await autocannon({
    url,
    ...requests,
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

/** The phase settings every bench reads from the environment (bench/README.md): BENCH_DURATION, BENCH_WARMUP, BENCH_CONNECTIONS, BENCH_USERS, BENCH_SLICES, BENCH_SLICE. */
export function phaseSettings(defaultUsers) {
  const num = (name, fallback) => {
    const value = Number(process.env[name] ?? fallback);
    if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number`);
    return value;
  };
  return {
    duration: num("BENCH_DURATION", 10),
    warmup: num("BENCH_WARMUP", 3),
    connections: num("BENCH_CONNECTIONS", 100),
    users: num("BENCH_USERS", defaultUsers),
    // bench/run.mjs's alternated read / HGET slices: how many pairs, seconds per slice.
    slices: Math.ceil(num("BENCH_SLICES", 6)),
    slice: num("BENCH_SLICE", 2),
  };
}
