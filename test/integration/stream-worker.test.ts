import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inject } from "vitest";
import { streamLag } from "../../src/jobs/stream-lag.js";
import { BUCKET_GROUP, type Entry } from "../../src/jobs/stream-worker.js";
import { startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";
import { bucketWorker } from "../helpers/worker.js";

/**
 * The stream worker (src/jobs/stream-worker.ts): at least once with idempotent effects, in
 * order, trimming what it has processed, with its lag exported. One shard, so every record of
 * the tenant is in one stream and the tests can hold a batch in a "crashed" consumer's hands.
 */
const tenantId = uniqueTenantId("wrk");
const YAML = tenantYaml(
  tenantId,
  `
    shards: 1
    metrics: [{ key: lessons, name: Lessons }]
    points:
      - key: xp
        name: XP
        triggers: [{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 10 }]
`,
);

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ yaml: YAML, manualClock: "2026-06-01T12:00:00Z" });
});
afterAll(async () => t.close());

const lesson = (user: string, value = 1) => t.call("POST", "/v1/metrics/lessons/event", { user: { id: user, tz: "UTC" }, value });
const today = async (user: string) =>
  (await t.call("GET", `/v1/users/${user}/metrics/lessons/event-summary?aggregation=daily&startDate=2026-06-01&endDate=2026-06-01`)).body[0];
const streamKey = `{${tenantId}:0}:x`;
const pendingCount = async () => ((await t.redis.xpending(streamKey, BUCKET_GROUP)) as [number])[0];

/** Reads new entries as `consumer`, which then holds them pending. */
async function readAs(consumer: string): Promise<Entry[]> {
  const reply = (await t.redis.xreadgroup("GROUP", BUCKET_GROUP, consumer, "COUNT", 100, "STREAMS", streamKey, ">")) as [string, Entry[]][] | null;
  return reply?.[0]?.[1] ?? [];
}

describe("stream worker", () => {
  it("applies every record once, acknowledges it and trims the stream", async () => {
    for (const user of ["w1", "w1", "w2"]) await lesson(user);
    const worker = bucketWorker(t);
    expect(await worker.drain()).toBe(3);
    expect(await today("w1")).toEqual({ date: "2026-06-01", total: 2, change: 2 });
    expect(await pendingCount()).toBe(0);
    // Trimmed up to the last delivered entry, which stays as the bound: memory stays bounded.
    expect(await t.redis.xlen(streamKey)).toBeLessThanOrEqual(1);
    expect(await worker.drain()).toBe(0);
  });

  it("passes over a user boost's record (kind ub): no bucket changes, the watermark moves on", async () => {
    const res = await t.call("POST", "/admin/v1/points/xp/boosts", { userId: "w2", name: "Boost", multiplier: 2, start: "2026-06-01T13:00:00Z" }, { "x-api-key": "demo-admin-key" });
    expect(res.status).toBe(201);
    await lesson("w2");
    const worker = bucketWorker(t);
    expect(await worker.drain()).toBe(2);
    expect(await today("w2")).toEqual({ date: "2026-06-01", total: 2, change: 2 });
    expect(await pendingCount()).toBe(0);
  });

  it("a worker killed after applying a batch but before acknowledging it: nothing counts twice", async () => {
    for (let i = 0; i < 3; i++) await lesson("crash-after");
    const dead = bucketWorker(t, { consumer: "dead-after-apply" });
    await dead.ensureGroups();
    const stream = dead.streamOf(tenantId, 0);
    const batch = await readAs("dead-after-apply");
    expect(batch).toHaveLength(3);
    // The batch's script ran (effects and watermark), then the process died: no XACK.
    expect((await dead.apply(stream, batch)).applied).toBe(3);
    expect(await pendingCount()).toBe(3);
    await lesson("crash-after");

    // A new worker takes the dead consumer's pending entries over (XAUTOCLAIM) and the new one.
    const next = bucketWorker(t);
    expect(await next.drain()).toBe(1);
    expect(await today("crash-after")).toEqual({ date: "2026-06-01", total: 4, change: 4 });
    expect(await pendingCount()).toBe(0);
    const xp = await t.call("GET", "/v1/users/crash-after/points/xp/event-summary?aggregation=daily&startDate=2026-06-01&endDate=2026-06-01");
    expect(xp.body).toEqual([{ date: "2026-06-01", total: 40, change: 40 }]);
  });

  it("a batch redelivered to a live worker is a no-op", async () => {
    await lesson("again");
    const worker = bucketWorker(t, { consumer: "redelivery" });
    const stream = worker.streamOf(tenantId, 0);
    const batch = await readAs("redelivery");
    expect((await worker.apply(stream, batch)).applied).toBe(1);
    expect((await worker.apply(stream, batch)).applied).toBe(0);
    expect(await worker.acknowledge(stream, batch, (await worker.apply(stream, batch)).watermark)).toBe(1);
    expect(await today("again")).toMatchObject({ total: 1, change: 1 });
  });

  it("a record without the metric total (written before records carried it) adds its change to the running total", async () => {
    await lesson("legacy", 2);
    await bucketWorker(t).drain();
    // The event script's record as older versions wrote it: "metric|value|eventId", no "|total".
    // The worker sends the missing total as NaN, and the script counts previous total + change.
    const ms = Date.parse("2026-06-01T12:00:00Z");
    await t.redis.xadd(streamKey, "*", "k", "ev", "u", "legacy", "t", String(ms), "z", "UTC", "e", "lessons|3000000|00000000-0000-4000-8000-000000000000", "o", "");
    expect(await bucketWorker(t).drain()).toBe(1);
    expect(await today("legacy")).toEqual({ date: "2026-06-01", total: 5, change: 5 });
  });

  it("a worker killed before applying: the next batch fills the gap from the stream, in order, and the held entries count once", async () => {
    await lesson("order", 1);
    await lesson("order", 2);
    expect(await readAs("dead-before-apply")).toHaveLength(2);
    await lesson("order", 3);
    // A live worker gets only the newer entry. Applying it alone would put the running total out
    // of order: the script stops at the gap, and the worker applies the stream from the
    // watermark instead (the held entries included), then acknowledges only its own entry.
    const other = bucketWorker(t, { consumer: "other" });
    const newer = await readAs("other");
    expect(await other.process(other.streamOf(tenantId, 0), newer)).toEqual({ applied: 3, acked: 1 });
    expect(await today("order")).toEqual({ date: "2026-06-01", total: 6, change: 6 });
    expect(await pendingCount()).toBe(2);

    // The dead consumer's entries are taken over, skipped (at or below the watermark) and acknowledged.
    expect(await bucketWorker(t).drain()).toBe(0);
    expect(await today("order")).toEqual({ date: "2026-06-01", total: 6, change: 6 });
    expect(await pendingCount()).toBe(0);
  });

  it("several workers at once split the entries and count each exactly once", async () => {
    const users = ["p1", "p2", "p3", "p4", "p5"];
    for (let i = 0; i < 60; i++) await lesson(users[i % users.length]!, 1 + (i % 3));
    const workers = [1, 2, 3].map(() => bucketWorker(t, { batchSize: 7 }));
    await Promise.all(workers.map((w) => w.drain()));
    await bucketWorker(t).drain();
    for (const [i, user] of users.entries()) {
      let expected = 0;
      for (let k = i; k < 60; k += users.length) expected += 1 + (k % 3);
      expect(await today(user)).toEqual({ date: "2026-06-01", total: expected, change: expected });
    }
    expect(await pendingCount()).toBe(0);
  });

  it("exports its lag: undelivered, pending and the oldest entry's age, per shard", async () => {
    await lesson("lag");
    await lesson("lag");
    const mine = async () => (await streamLag(t.redis, t.tenants)).find((l) => l.tenantId === tenantId)!;
    expect(await mine()).toMatchObject({ pending: 0, undelivered: 2 });
    await readAs("slow");
    const held = await mine();
    expect(held).toMatchObject({ pending: 2, undelivered: 0 });
    expect(held.oldestAgeMs).toBeGreaterThanOrEqual(0);

    const text = (await t.call("GET", "/metrics")).body as string;
    expect(text).toContain("# TYPE laurel_stream_pending_entries gauge");
    expect(text).toContain(`laurel_stream_pending_entries{tenant="${tenantId}",shard="0",group="buckets"} 2`);
    expect(text).toMatch(new RegExp(`laurel_stream_oldest_unprocessed_age_seconds\\{tenant="${tenantId}",shard="0",group="buckets"\\} [0-9.]+`));

    await bucketWorker(t).drain();
    expect(await mine()).toMatchObject({ pending: 0, undelivered: 0, oldestAgeMs: 0 });
  });

  it("start() runs the blocking loop; stop() ends it at once, whatever the block timeout", async () => {
    const worker = bucketWorker(t, { blockMs: 60_000 });
    worker.start();
    await lesson("looped");
    await worker.stop();
    // Whatever the loop managed before it stopped, a drain finishes the rest exactly once.
    await bucketWorker(t).drain();
    expect(await today("looped")).toMatchObject({ total: 1, change: 1 });
  });
});

describe("node dist/worker.js", () => {
  const dir = mkdtempSync(join(tmpdir(), "laurel-worker-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("processes the streams as its own process and stops cleanly on SIGTERM", async () => {
    await lesson("standalone", 5);
    const config = join(dir, "tenant.yaml");
    writeFileSync(config, YAML);
    const child = spawn(process.execPath, [new URL("../../dist/worker.js", import.meta.url).pathname], {
      env: { ...process.env, REDIS_URL: inject("redisUrl"), LAUREL_CONFIG: config, LOG_LEVEL: "warn" },
      stdio: "ignore",
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    // Another process does the work: wait for its effect (bounded), not for a fixed time.
    for (let i = 0; i < 200 && (await today("standalone")).total !== 5; i++) await new Promise((r) => setTimeout(r, 50));
    expect(await today("standalone")).toMatchObject({ total: 5, change: 5 });
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  });
});
