import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/app.js";

/**
 * `experiment.controlPercent` (README: Users): `control` is true for that share of users, by a
 * stable hash of tenant and user id, and false for every user of a tenant without an experiment.
 * Four tenants in one file, the same user ids in each: 25%, a second 25% (another tenant id,
 * so another split), 100%, and none.
 */
const USERS = Array.from({ length: 1000 }, (_, i) => `user-${i}`);
// Fixed tenant ids (no other file uses them), so the split is the same draw on every run: the
// bounds below are not a chance to fail.
const ids = { quarter: "xctl-quarter", otherQuarter: "xctl-other-quarter", all: "xctl-all", none: "xctl-none" };
const tenant = (id: string, n: number, experiment: string) => `
  - id: ${id}
    apiKeys: [api-key-${n}-0123]
    adminKeys: [admin-key-${n}-0123]
    shards: 4
    metrics: [{ key: lessons, name: Lessons }]
${experiment}`;
const YAML = `tenants:${tenant(ids.quarter, 1, "    experiment: { controlPercent: 25 }")}${tenant(ids.otherQuarter, 2, "    experiment: { controlPercent: 25 }")}${tenant(ids.all, 3, "    experiment: { controlPercent: 100 }")}${tenant(ids.none, 4, "")}
`;
const KEY = { quarter: "api-key-1-0123", otherQuarter: "api-key-2-0123", all: "api-key-3-0123", none: "api-key-4-0123" } as const;

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ yaml: YAML, manualClock: true, jobs: false });
});
afterAll(async () => t.close());

/** Identifies every user of USERS in the tenant of `key` (PUT: an upsert), 50 at a time; their `control`, in order. */
async function identifyAll(app: TestApp, key: string): Promise<boolean[]> {
  const out: boolean[] = [];
  for (let i = 0; i < USERS.length; i += 50) {
    const batch = await Promise.all(USERS.slice(i, i + 50).map((id) => app.call("PUT", `/v1/users/${id}`, {}, { "x-api-key": key })));
    for (const res of batch) {
      expect(res.status).toBe(200);
      out.push(res.body.control);
    }
  }
  return out;
}

describe("experiment.controlPercent", () => {
  it("puts about that share of users in the control group, each by a hash that other reads and a second app on the same config agree on", async () => {
    const control = await identifyAll(t, KEY.quarter);
    const inControl = control.filter(Boolean).length;
    // A hash split of 1000 users at 25% (250 expected, standard deviation ~14): 180-320 is five
    // deviations either way; a scale or hash gone wrong lands far outside.
    expect(inControl).toBeGreaterThanOrEqual(180);
    expect(inControl).toBeLessThanOrEqual(320);

    // Stable: a read, and an update through a second app on the same config, say the same (the
    // second app runs in this process, so module-level state would be shared with the first).
    const sample = USERS.slice(0, 40);
    for (const [i, id] of sample.entries()) {
      expect((await t.call("GET", `/v1/users/${id}`, undefined, { "x-api-key": KEY.quarter })).body.control, id).toBe(control[i]);
    }
    const other = await startTestApp({ yaml: YAML, manualClock: true, jobs: false });
    try {
      for (const [i, id] of sample.entries()) {
        expect((await other.call("PATCH", `/v1/users/${id}`, { name: "N" }, { "x-api-key": KEY.quarter })).body.control, id).toBe(control[i]);
      }
    } finally {
      await other.close();
    }
  });

  it("splits by tenant and user id: another tenant at the same percent puts other users in its control group", async () => {
    const first = await identifyAll(t, KEY.quarter);
    const second = await identifyAll(t, KEY.otherQuarter);
    expect(second.filter(Boolean).length).toBeGreaterThanOrEqual(180);
    expect(second.filter(Boolean).length).toBeLessThanOrEqual(320);
    expect(second).not.toEqual(first);
  });

  it("is true for every user at 100, and false for every user of a tenant without an experiment", async () => {
    expect(new Set(await identifyAll(t, KEY.all))).toEqual(new Set([true]));
    expect(new Set(await identifyAll(t, KEY.none))).toEqual(new Set([false]));
  });
});
