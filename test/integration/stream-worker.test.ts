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
 * The stream worker (src/jobs/stream-worker.ts): exactly once and in order (the script reads,
 * applies and moves the watermark atomically), trimming what it has processed, with its lag
 * exported. One shard, so every record of the tenant is in one stream.
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
const summary = async (user: string, metric: "lessons" | "xp", date: string) => {
  const path = metric === "xp" ? `/v1/users/${user}/points/xp/event-summary` : `/v1/users/${user}/metrics/lessons/event-summary`;
  return (await t.call("GET", `${path}?aggregation=daily&startDate=${date}&endDate=${date}`)).body[0];
};
const streamKey = `{${tenantId}:0}:x`;
const pendingCount = async () => ((await t.redis.xpending(streamKey, BUCKET_GROUP)) as [number])[0];
const watermark = async () => t.redis.hget(`{${tenantId}:0}:xw`, BUCKET_GROUP);

/** Reads new entries as `consumer` of the buckets group, which then holds them pending: what a worker of an earlier version did. */
async function readAs(consumer: string): Promise<Entry[]> {
  const reply = (await t.redis.xreadgroup("GROUP", BUCKET_GROUP, consumer, "COUNT", 100, "STREAMS", streamKey, ">")) as [string, Entry[]][] | null;
  return reply?.[0]?.[1] ?? [];
}

describe("stream worker", () => {
  it("applies every record once, keeps its group at the watermark and trims the stream", async () => {
    for (const user of ["w1", "w1", "w2"]) await lesson(user);
    const worker = bucketWorker(t);
    expect(await worker.drain()).toBe(3);
    expect(await today("w1")).toEqual({ date: "2026-06-01", total: 2, change: 2 });
    expect(await pendingCount()).toBe(0);
    const last = (await t.redis.xrevrange(streamKey, "+", "-", "COUNT", 1))[0]![0];
    expect(await watermark()).toBe(last);
    const group = ((await t.redis.xinfo("GROUPS", streamKey)) as unknown[][]).map((g) => Object.fromEntries(Array.from({ length: g.length / 2 }, (_, i) => [g[2 * i], g[2 * i + 1]])));
    expect(group.find((g) => g.name === BUCKET_GROUP)).toMatchObject({ "last-delivered-id": last, pending: 0, lag: 0 });
    // Trimmed up to the watermark, which stays as the bound: memory stays bounded.
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
  });

  it("a record whose writer had no zone data (a time trigger's, an event record of an earlier version) is filed on the day Node computes for its zone", async () => {
    await lesson("kiri", 2);
    await bucketWorker(t).drain();
    // 12:00 UTC is 02:00 the next day in Kiritimati (UTC+14): neither record carries its day.
    const ms = String(Date.parse("2026-06-01T12:00:00Z"));
    await t.redis.xadd(streamKey, "*", "k", "ev", "u", "kiri", "t", ms, "z", "Pacific/Kiritimati", "e", "lessons|3000000|00000000-0000-4000-8000-000000000001|5000000", "o", "p:xp:30:50:0:0");
    await t.redis.xadd(streamKey, "*", "k", "tt", "u", "kiri", "t", ms, "z", "Pacific/Kiritimati", "e", "bonus", "o", "p:xp:5:55:0:0");
    expect(await bucketWorker(t).drain()).toBe(2);
    expect(await summary("kiri", "lessons", "2026-06-02")).toEqual({ date: "2026-06-02", total: 5, change: 3 });
    expect(await summary("kiri", "xp", "2026-06-02")).toEqual({ date: "2026-06-02", total: 55, change: 35 });
    expect(await summary("kiri", "xp", "2026-06-01")).toEqual({ date: "2026-06-01", total: 20, change: 20 });
  });

  it("a record without the metric total (written before records carried it) adds its change to the running total", async () => {
    await lesson("legacy", 2);
    await bucketWorker(t).drain();
    // The event script's record as older versions wrote it: "metric|value|eventId", no day, no total.
    const ms = Date.parse("2026-06-01T12:00:00Z");
    await t.redis.xadd(streamKey, "*", "k", "ev", "u", "legacy", "t", String(ms), "z", "UTC", "e", "lessons|3000000|00000000-0000-4000-8000-000000000000", "o", "");
    expect(await bucketWorker(t).drain()).toBe(1);
    expect(await today("legacy")).toEqual({ date: "2026-06-01", total: 5, change: 5 });
  });

  it("reads a record's fields by name when they are not in the writers' order", async () => {
    await lesson("order-free", 1);
    await bucketWorker(t).drain();
    const ms = String(Date.parse("2026-06-01T12:00:00Z"));
    const day = String(Math.floor(Date.parse("2026-06-01T00:00:00Z") / 86_400_000));
    await t.redis.xadd(streamKey, "*", "o", "p:xp:10:20:0:0", "u", "order-free", "e", `lessons|1000000|00000000-0000-4000-8000-000000000002|${day}|${(2026 - 1970) * 12 + 5}|2000000`, "k", "ev", "z", "UTC", "t", ms);
    expect(await bucketWorker(t).drain()).toBe(1);
    expect(await today("order-free")).toEqual({ date: "2026-06-01", total: 2, change: 2 });
    expect(await summary("order-free", "xp", "2026-06-01")).toEqual({ date: "2026-06-01", total: 20, change: 20 });
  });

  it("entries an earlier version's worker left pending in the group (it died holding them) are applied once and acknowledged", async () => {
    for (let i = 0; i < 3; i++) await lesson("crash");
    expect(await readAs("dead-worker")).toHaveLength(3);
    expect(await pendingCount()).toBe(3);
    expect(await bucketWorker(t).drain()).toBe(3);
    expect(await today("crash")).toEqual({ date: "2026-06-01", total: 3, change: 3 });
    expect(await pendingCount()).toBe(0);
    expect(await bucketWorker(t).drain()).toBe(0);
  });

  it("several workers at once count each record exactly once, in order", async () => {
    const users = ["p1", "p2", "p3", "p4", "p5"];
    for (let i = 0; i < 60; i++) await lesson(users[i % users.length]!, 1 + (i % 3));
    const workers = [1, 2, 3].map(() => bucketWorker(t, { batchSize: 7 }));
    const applied = await Promise.all(workers.map((w) => w.drain()));
    expect(applied.reduce((a, b) => a + b, 0)).toBe(60);
    for (const [i, user] of users.entries()) {
      let expected = 0;
      for (let k = i; k < 60; k += users.length) expected += 1 + (k % 3);
      expect(await today(user)).toEqual({ date: "2026-06-01", total: expected, change: expected });
    }
  });

  it("a group lost with its stream (a Redis restarted without its data) is created again at the watermark", async () => {
    const worker = bucketWorker(t);
    await worker.drain();
    await t.redis.xgroup("DESTROY", streamKey, BUCKET_GROUP);
    await lesson("regroup");
    expect(await worker.drain()).toBe(1);
    const groups = ((await t.redis.xinfo("GROUPS", streamKey)) as unknown[][]).map((g) => Object.fromEntries(Array.from({ length: g.length / 2 }, (_, i) => [g[2 * i], g[2 * i + 1]])));
    expect(groups.find((g) => g.name === BUCKET_GROUP)).toMatchObject({ "last-delivered-id": await watermark(), pending: 0 });
    expect(await today("regroup")).toEqual({ date: "2026-06-01", total: 1, change: 1 });
  });

  it("exports its lag: undelivered, pending and the oldest entry's age, per shard", async () => {
    await lesson("lag");
    await lesson("lag");
    const mine = async () => (await streamLag(t.redis, t.tenants)).find((l) => l.tenantId === tenantId)!;
    const behind = await mine();
    expect(behind).toMatchObject({ pending: 0, undelivered: 2 });
    expect(behind.oldestAgeMs).toBeGreaterThanOrEqual(0);

    const text = (await t.call("GET", "/metrics")).body as string;
    expect(text).toContain("# TYPE laurel_stream_undelivered_entries gauge");
    expect(text).toContain(`laurel_stream_undelivered_entries{tenant="${tenantId}",shard="0",group="buckets"} 2`);
    expect(text).toMatch(new RegExp(`laurel_stream_oldest_unprocessed_age_seconds\\{tenant="${tenantId}",shard="0",group="buckets"\\} [0-9.]+`));

    await bucketWorker(t).drain();
    expect(await mine()).toMatchObject({ pending: 0, undelivered: 0, oldestAgeMs: 0 });
  });

  it("start() runs the blocking loop; stop() ends it at once, whatever the block timeout", async () => {
    const worker = bucketWorker(t, { blockMs: 60_000 });
    worker.start();
    await lesson("looped");
    // The loop wakes on the new record (XREAD BLOCK) and applies it: wait for the effect (bounded), not for a time.
    for (let i = 0; i < 200 && (await today("looped"))?.total !== 1; i++) await new Promise((r) => setTimeout(r, 25));
    await worker.stop();
    expect(await today("looped")).toMatchObject({ total: 1, change: 1 });
    expect(await bucketWorker(t).drain()).toBe(0);
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
