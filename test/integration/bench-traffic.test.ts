import { afterAll, beforeAll, describe, expect, it } from "vitest";
// The bench's own traffic (bench/workload.mjs): its figures are only as good as the requests it sends.
// @ts-expect-error bench/ is plain JavaScript, without declarations
import { eventRequests, load, prebuiltClients, SERVICE_EVENT_PATHS } from "../../bench/workload.mjs";
import { startTestApp, type TestApp } from "../helpers/app.js";

/**
 * bench/workload.mjs prebuilds each phase's requests and hands them to autocannon's connections
 * through its RequestIterator (autocannon has no public way to). These tests send that traffic
 * to a real service with autocannon and count what arrived, so a change in autocannon's
 * internals, a wrong Content-Length or a traffic that stops drawing users shows here.
 */
const USERS = 40;

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ jobs: false });
});
afterAll(async () => t.close());

async function totals(): Promise<{ lessons: number; apiCalls: number; users: number }> {
  let lessons = 0;
  let apiCalls = 0;
  let users = 0;
  for (let n = 0; n < USERS; n++) {
    const res = await t.call("GET", `/v1/users/user-${n}/metrics`);
    if (res.status === 404) continue;
    expect(res.status).toBe(200);
    users++;
    for (const metric of res.body as { key: string; current: number }[]) {
      if (metric.key === "lessons") lessons += metric.current;
      if (metric.key === "api-calls") apiCalls += metric.current;
    }
  }
  return { lessons, apiCalls, users };
}

describe("the bench's prebuilt event traffic", () => {
  const traffic = eventRequests(USERS, SERVICE_EVENT_PATHS);

  it("sends valid events, every one counted, for random users and both metrics", async () => {
    const result = await load(t.url, traffic, { connections: 4, amount: 400 });
    expect(result).toMatchObject({ requests: 400, non2xx: 0, errors: 0, timeouts: 0 });
    const after = await totals();
    expect(after.lessons + after.apiCalls).toBe(400);
    // 20% api-calls: 80 expected of 400 (binomial sd ~8), so these bounds hold by ~5 sd.
    expect(after.apiCalls).toBeGreaterThan(40);
    expect(after.apiCalls).toBeLessThan(140);
    // 400 draws among 40 users: a user is missed with probability (39/40)^400 ≈ 4e-5.
    expect(after.users).toBeGreaterThanOrEqual(35);
  });

  it("a second run of the same traffic reuses its list (built by the first, outside the measured run) and still counts each event once", async () => {
    const list = (traffic as { prebuilt: { list: unknown[] } }).prebuilt.list;
    const before = await totals();
    const result = await load(t.url, traffic, { connections: 4, amount: 100 });
    expect(result).toMatchObject({ requests: 100, non2xx: 0, errors: 0 });
    const after = await totals();
    expect(after.lessons + after.apiCalls - (before.lessons + before.apiCalls)).toBe(100);
    expect((traffic as { prebuilt: { list: unknown[] } }).prebuilt.list).toBe(list);
  });
  it("sends a draw's own headers over the common ones (bench/soak.mjs's Idempotency-Keys and wrong keys)", async () => {
    let n = 0;
    // Five keys in turn for one user: whatever the run's starting place, 50 requests send each key
    // ten times, so the first of each counts and the rest are replays.
    const keyed = { draw: () => ({ method: "POST", path: "/v1/metrics/lessons/event", body: JSON.stringify({ user: { id: "keyed-user" }, value: 1 }), headers: { "idempotency-key": `k-${n++ % 5}` } }) };
    const result = await load(t.url, keyed, { connections: 1, amount: 50 });
    expect(result.statusCodes).toEqual({ 201: 5, 202: 45 });
    expect(((await t.call("GET", "/v1/users/keyed-user/metrics/lessons")).body as { current: number }).current).toBe(5);
    // A draw's header of a common name replaces it: sent beside it, the service read the first (the right key).
    const wrongKey = { draw: () => ({ method: "GET", path: "/v1/users/keyed-user/points/xp", headers: { "x-api-key": "not-a-key" } }) };
    const refused = await load(t.url, wrongKey, { connections: 1, amount: 10 });
    expect(refused.statusCodes).toEqual({ 401: 10 });
  });
});

describe("where each connection starts in the prebuilt list", () => {
  const fakeClient = () => ({ requestIterator: { requests: [] as unknown[], currentRequestIndex: 0, currentRequest: null as unknown, nextRequest() {} } });

  it("connection i of c starts n/c after connection i-1, at the request it will send first, so no two send the same user together", () => {
    const traffic = eventRequests(USERS, SERVICE_EVENT_PATHS);
    const setup = prebuiltClients("http://127.0.0.1:1", traffic, 4);
    const clients = Array.from({ length: 4 }, fakeClient);
    clients.forEach(setup);
    const list = (traffic as unknown as { prebuilt: { list: unknown[] } }).prebuilt.list;
    const n = list.length;
    const starts = clients.map((c) => c.requestIterator.currentRequestIndex);
    for (let i = 1; i < starts.length; i++) expect((starts[i]! - starts[i - 1]! + n) % n).toBe(n / 4);
    for (const c of clients) {
      expect(c.requestIterator.requests).toBe(list);
      expect(c.requestIterator.currentRequest).toBe(list[c.requestIterator.currentRequestIndex]);
    }
  });

  it("refuses a client whose iterator is not autocannon 9's shape", () => {
    const setup = prebuiltClients("http://127.0.0.1:1", eventRequests(USERS, SERVICE_EVENT_PATHS), 1);
    expect(() => setup({ requestIterator: undefined })).toThrow(/autocannon's RequestIterator changed/);
  });
});
