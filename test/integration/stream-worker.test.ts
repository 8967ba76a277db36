import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inject } from "vitest";
import { pino } from "pino";
import { encodeMonth, type DayBucket } from "../../src/domain/buckets.js";
import { formatDay, periodOfDay } from "../../src/domain/periods.js";
import { shardOf } from "../../src/domain/shards.js";
import { streamLag } from "../../src/jobs/stream-lag.js";
import type { Entry } from "../../src/jobs/stream-group.js";
import { BUCKET_GROUP, StreamWorker } from "../../src/jobs/stream-worker.js";
import { loadLua } from "../../src/store/lua-loader.js";
import { dumpTenant, startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";
import { bucket, day, seriesBuckets, seriesLayout } from "../helpers/buckets.js";
import { lessonsXpTenantYaml } from "../helpers/tenant-yaml.js";
import { waitFor } from "../helpers/service-process.js";
import { bucketWorker } from "../helpers/worker.js";

/**
 * The stream worker (src/jobs/stream-worker.ts): exactly once and in order (the script reads,
 * applies and moves the watermark atomically), trimming what it has processed, with its lag
 * exported; each series' open day kept apart from its month members, and series of the previous
 * layout migrated as they are written to. One shard, so every record of the tenant is in one stream.
 */
const tenantId = uniqueTenantId("wrk");
const YAML = lessonsXpTenantYaml(tenantId);

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ yaml: YAML, manualClock: START });
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
const START = "2026-06-01T12:00:00Z";
const buckets = (user: string, series = "m:lessons") => seriesBuckets(t.redis, tenantId, 1, series, user);
const layout = (user: string, series = "m:lessons") => seriesLayout(t.redis, tenantId, 1, series, user);
/** A daily summary's items from `from` on, one [total, change] per day. */
const items = (from: string, days: [number, number][]) => days.map(([total, change], i) => ({ date: formatDay(day(from) + i), total, change }));
const daily = async (user: string, kind: "metrics/lessons" | "points/xp", from: string, to: string) =>
  (await t.call("GET", `/v1/users/${user}/${kind}/event-summary?aggregation=daily&startDate=${from}&endDate=${to}`)).body;
/** Runs `body` with the manual clock free to move, and sets it back to START after. */
async function onClock(body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } finally {
    await t.setClock(START);
  }
}
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
    // The open days' hash is a hash table from its first field (lua/buckets/open-day.lua): as a
    // listpack every field read or written scans the whole hash.
    expect(await t.redis.call("OBJECT", "ENCODING", `{${tenantId}:0}:bl`)).toBe("hashtable");
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

  it("matches points parts only at the start of a part: a board whose key ends in p (b:top-xp:...) is none", async () => {
    // The outcome as the event script writes it for a user's first change on a points board
    // `top-xp`: the board part (previous value empty) before the points part. The worker read
    // "p:<run>::10" inside the board part as a points change with no amount and failed the batch
    // on every retry, so the shard's summaries stopped.
    expect((await t.call("PUT", "/v1/users/bp", { tz: "UTC" })).status).toBe(200);
    await bucketWorker(t).drain();
    const ms = String(Date.parse(START));
    await t.redis.xadd(streamKey, "*", "k", "ev", "u", "bp", "t", ms, "z", "UTC", "e", "lessons|1000000|00000000-0000-4000-8000-000000000002|1000000", "o", "b:top-xp:20260101::10;p:xp:10:10:0:0");
    expect(await bucketWorker(t).drain()).toBe(1);
    expect(await summary("bp", "lessons", "2026-06-01")).toEqual({ date: "2026-06-01", total: 1, change: 1 });
    expect(await summary("bp", "xp", "2026-06-01")).toEqual({ date: "2026-06-01", total: 10, change: 10 });
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

  it("a record's total is the user's total, the running total serves only without one: a series begun after the user's first changes (a user from before the buckets) reads the total the records carry", async () => {
    for (const user of ["pre", "pre-mix", "pre-old"]) expect((await t.call("PUT", `/v1/users/${user}`, { tz: "UTC" })).status).toBe(200);
    await bucketWorker(t).drain();
    const ms = String(Date.parse("2026-06-01T12:00:00Z"));
    const june1 = day("2026-06-01");
    const june = periodOfDay(june1, "monthly");
    // "pre" held 10 lessons before its series began: its first record carries 11, on a new day.
    await t.redis.xadd(streamKey, "*", "k", "ev", "u", "pre", "t", ms, "z", "UTC", "e", `lessons|1000000|00000000-0000-4000-8000-000000000003|${june1}|${june}|11000000`, "o", "");
    // "pre-mix" also held 10: a record of an earlier version (no day, no total) opens its day at
    // the running total 1, and the next record of that day carries the user's total again (13).
    await t.redis.xadd(streamKey, "*", "k", "ev", "u", "pre-mix", "t", ms, "z", "UTC", "e", "lessons|1000000|00000000-0000-4000-8000-000000000004", "o", "");
    await t.redis.xadd(streamKey, "*", "k", "ev", "u", "pre-mix", "t", ms, "z", "UTC", "e", `lessons|2000000|00000000-0000-4000-8000-000000000005|${june1}|${june}|13000000`, "o", "");
    // "pre-old" held 10 too: its first record is of an earlier version that carried the total but not the day.
    await t.redis.xadd(streamKey, "*", "k", "ev", "u", "pre-old", "t", ms, "z", "UTC", "e", "lessons|1000000|00000000-0000-4000-8000-000000000006|11000000", "o", "");
    expect(await bucketWorker(t).drain()).toBe(4);
    expect(await today("pre")).toEqual({ date: "2026-06-01", total: 11, change: 1 });
    expect(await today("pre-mix")).toEqual({ date: "2026-06-01", total: 13, change: 3 });
    expect(await today("pre-old")).toEqual({ date: "2026-06-01", total: 11, change: 1 });
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
    // This tenant has no webhook endpoints: no webhooks group, so no series for it (README, GET /metrics).
    expect(text).not.toContain(`{tenant="${tenantId}",shard="0",group="webhooks"}`);

    await bucketWorker(t).drain();
    expect(await mine()).toMatchObject({ pending: 0, undelivered: 0, oldestAgeMs: 0 });
  });

  it("exports the age of the oldest entry not yet processed: the oldest pending one, else the first undelivered", async () => {
    // A stream of its own with ids of known instants (1, 2 and 3 s after the epoch), so that
    // each entry's age tells which one was read: a tenant of one shard that no worker reads.
    const lagTenant = { ...t.tenants[0]!, id: uniqueTenantId("lagage"), shards: 1 };
    const key = `{${lagTenant.id}:0}:x`;
    const group = "lag-probe";
    for (const id of ["1000-0", "2000-0", "3000-0"]) await t.redis.xadd(key, id, "k", "v");
    await t.redis.xgroup("CREATE", key, group, "0");
    const redisNow = async () => {
      const [s, us] = (await t.redis.time()) as [string | number, string | number];
      return Number(s) * 1000 + Math.floor(Number(us) / 1000);
    };
    const lagAround = async (entryMs: number) => {
      const before = await redisNow();
      const [lag] = await streamLag(t.redis, [lagTenant], group);
      const after = await redisNow();
      expect(lag!.oldestAgeMs).toBeGreaterThanOrEqual(before - entryMs);
      expect(lag!.oldestAgeMs).toBeLessThanOrEqual(after - entryMs);
      return lag!;
    };
    try {
      // Two delivered and not acknowledged (a worker died holding them), one not delivered.
      await t.redis.xreadgroup("GROUP", group, "c", "COUNT", 2, "STREAMS", key, ">");
      expect(await lagAround(1000)).toMatchObject({ length: 3, pending: 2, undelivered: 1 });
      await t.redis.xack(key, group, "1000-0", "2000-0");
      expect(await lagAround(3000)).toMatchObject({ length: 3, pending: 0, undelivered: 1 });
    } finally {
      await t.redis.del(key);
    }
  });

  it("start() runs the blocking loop; stop() ends it at once, whatever the block timeout", async () => {
    const worker = bucketWorker(t, { blockMs: 60_000 });
    worker.start();
    await lesson("looped");
    // The loop wakes on the new record (XREAD BLOCK) and applies it: wait for the effect, not for a time.
    await waitFor(async () => (await today("looped"))?.total === 1, "the loop to apply the record");
    await worker.stop();
    expect(await today("looped")).toMatchObject({ total: 1, change: 1 });
    expect(await bucketWorker(t).drain()).toBe(0);
  });

  it("trims only below what every group on the stream has finished: another group's unread entries and its pending ones stay", async () => {
    // A second group on the shard stream, as an earlier version's webhook consumer had there: it
    // starts at the end and has read nothing since.
    await bucketWorker(t).drain();
    const other = "earlier-consumer";
    await t.redis.xgroup("CREATE", streamKey, other, "$");
    try {
      for (let i = 0; i < 3; i++) await lesson("trim");
      expect(await bucketWorker(t).drain()).toBe(3);
      const ids = (await t.redis.xrange(streamKey, "-", "+")).map(([id]) => id);
      expect(ids.length).toBeGreaterThanOrEqual(3);
      const unread = ids.slice(-3);

      // It reads the three and holds them pending (it died before acknowledging): its last
      // delivered entry has moved, but its oldest pending entry is still the bound.
      expect(((await t.redis.xreadgroup("GROUP", other, "c", "COUNT", 10, "STREAMS", streamKey, ">")) as [string, Entry[]][])[0]![1]).toHaveLength(3);
      await lesson("trim");
      expect(await bucketWorker(t).drain()).toBe(1);
      expect((await t.redis.xrange(streamKey, "-", "+")).map(([id]) => id).slice(0, 3)).toEqual(unread);
    } finally {
      await t.redis.xgroup("DESTROY", streamKey, other);
      // Trimmed back to the watermark by the next batch, as the tests after this one find it.
      await lesson("trim");
      await bucketWorker(t).drain();
    }
  });
});

describe("the open day and the month members", () => {
  const M = 1_000_000;

  it("a day stays open until a later day opens; a later day of the month closes it beside the open day (no month member); a new month writes the month's member", () =>
    onClock(async () => {
      const june = periodOfDay(day("2026-06-01"), "monthly");
      await t.setClock("2026-06-29T10:00:00Z");
      await lesson("hand", 1);
      await lesson("hand", 2);
      await bucketWorker(t).drain();
      expect(await layout("hand")).toEqual({ open: { month: june, closed: [], open: bucket("2026-06-29", 2, 3 * M, 3 * M) }, months: [] });

      await t.setClock("2026-06-30T10:00:00Z");
      await lesson("hand", 1);
      await bucketWorker(t).drain();
      expect(await layout("hand")).toEqual({ open: { month: june, closed: [bucket("2026-06-29", 2, 3 * M, 3 * M)], open: bucket("2026-06-30", 1, M, 4 * M) }, months: [] });

      // 1 July, then a time trigger's record and an achievement completed by API (neither
      // carries its day: Node computes it) on 2 and 3 July, all applied in one batch.
      await t.setClock("2026-07-01T10:00:00Z");
      await lesson("hand", 1);
      const ms = (iso: string) => String(Date.parse(iso));
      await t.redis.xadd(streamKey, "*", "k", "tt", "u", "hand", "t", ms("2026-07-02T09:00:00Z"), "z", "UTC", "e", "bonus", "o", "p:xp:5:55:1:1");
      await t.redis.xadd(streamKey, "*", "k", "ac", "u", "hand", "t", ms("2026-07-03T09:00:00Z"), "z", "UTC", "e", "profile", "o", "a:profile;p:xp:7:62:1:1");
      expect(await bucketWorker(t).drain()).toBe(3);
      expect(await layout("hand")).toEqual({
        open: { month: june + 1, closed: [], open: bucket("2026-07-01", 1, M, 5 * M) },
        months: [[june, encodeMonth([bucket("2026-06-29", 2, 3 * M, 3 * M), bucket("2026-06-30", 1, M, 4 * M)])]],
      });
      expect(await buckets("hand", "p:xp")).toEqual([bucket("2026-06-29", 2, 30, 30), bucket("2026-06-30", 1, 10, 40), bucket("2026-07-01", 1, 10, 50), bucket("2026-07-02", 1, 5, 55), bucket("2026-07-03", 1, 7, 62)]);
      expect(await layout("hand", "p:xp")).toEqual({
        open: { month: june + 1, closed: [bucket("2026-07-01", 1, 10, 50), bucket("2026-07-02", 1, 5, 55)], open: bucket("2026-07-03", 1, 7, 62) },
        months: [[june, encodeMonth([bucket("2026-06-29", 2, 30, 30), bucket("2026-06-30", 1, 10, 40)])]],
      });

      expect(await daily("hand", "metrics/lessons", "2026-06-28", "2026-07-03")).toEqual(items("2026-06-28", [[0, 0], [3, 3], [4, 1], [5, 1], [5, 0], [5, 0]]));
      expect((await daily("hand", "points/xp", "2026-06-30", "2026-07-04")).map((i: { change: number }) => i.change)).toEqual([10, 10, 5, 7, 0]);
      // A range after the open day reads it as the total before; one inside June reads the members only.
      expect(await daily("hand", "points/xp", "2026-08-01", "2026-08-01")).toEqual([{ date: "2026-08-01", total: 62, change: 0 }]);
      expect(await daily("hand", "metrics/lessons", "2026-06-30", "2026-06-30")).toEqual([{ date: "2026-06-30", total: 4, change: 1 }]);
    }));

  it("a record whose day is before the open day (the calendar moved back) counts in the open day", () =>
    onClock(async () => {
      await t.setClock("2026-06-10T12:00:00Z");
      await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "back", tz: "Asia/Tokyo" }, value: 1 }); // 21:00, 10 June
      await bucketWorker(t).drain();
      await t.setClock("2026-06-10T16:00:00Z");
      await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "back", tz: "Asia/Tokyo" }, value: 1 }); // 01:00, 11 June
      await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "back", tz: "America/Los_Angeles" }, value: 1 }); // 09:00, 10 June there
      await bucketWorker(t).drain();
      expect(await buckets("back")).toEqual([bucket("2026-06-10", 1, M, M), bucket("2026-06-11", 2, 2 * M, 3 * M)]);
    }));

  it("a series written by the previous layout (its latest day in the zset, no open day) moves that day to the open day once: nothing counts twice", () =>
    onClock(async () => {
      const send = async (iso: string, value: number) => {
        await t.setClock(iso);
        await lesson("old", value);
      };
      await send("2026-05-30T10:00:00Z", 1);
      await send("2026-05-31T10:00:00Z", 1);
      await send("2026-05-31T11:00:00Z", 1);
      await send("2026-06-01T10:00:00Z", 1);
      await bucketWorker(t).drain();
      // What a worker of the previous version left for these four records, written by hand.
      const previous = (series: string, unit: number) => {
        const key = `{${tenantId}:0}:b:${series}:old`;
        return [
          key,
          [periodOfDay(day("2026-05-01"), "monthly"), `${day("2026-05-30")}:1:${unit}:${unit};${day("2026-05-31")}:2:${2 * unit}:${3 * unit}`],
          [periodOfDay(day("2026-06-01"), "monthly"), `${day("2026-06-01")}:1:${unit}:${4 * unit}`],
        ] as const;
      };
      for (const [key, may, june] of [previous("m:lessons", M), previous("p:xp", 10)]) {
        await t.redis.del(key);
        await t.redis.zadd(key, may[0], may[1], june[0], june[1]);
      }
      await t.redis.hdel(`{${tenantId}:0}:bl`, "m:lessons:old", "p:xp:old");
      const summary = await daily("old", "metrics/lessons", "2026-05-29", "2026-06-02");
      expect(summary.map((i: { total: number }) => i.total)).toEqual([0, 1, 3, 4, 4]);

      // The same day as the zset's latest, then the next day: one batch each.
      await send("2026-06-01T11:00:00Z", 2);
      await bucketWorker(t).drain();
      expect(await layout("old")).toEqual({
        open: { month: periodOfDay(day("2026-06-01"), "monthly"), closed: [], open: bucket("2026-06-01", 2, 3 * M, 6 * M) },
        months: [[periodOfDay(day("2026-05-01"), "monthly"), encodeMonth([bucket("2026-05-30", 1, M, M), bucket("2026-05-31", 2, 2 * M, 3 * M)])]],
      });
      await send("2026-06-02T11:00:00Z", 1);
      await bucketWorker(t).drain();
      expect(await daily("old", "metrics/lessons", "2026-05-29", "2026-06-03")).toEqual(items("2026-05-29", [[0, 0], [1, 1], [3, 2], [6, 3], [7, 1], [7, 0]]));
      expect(await buckets("old", "p:xp")).toEqual([bucket("2026-05-30", 1, 10, 10), bucket("2026-05-31", 2, 20, 30), bucket("2026-06-01", 2, 30, 60), bucket("2026-06-02", 1, 10, 70)]);
    }));

  it("a batch whose series pass the 1000 items of one command (HMGET and HSET go in chunks) reads and writes every series", async () => {
    // 600 users with a lesson and XP each: 1200 series, more than a tenant with many points
    // systems reaches in the default batch of 100 records, but the same chunking.
    const users = Array.from({ length: 600 }, (_, i) => `chunk-${i}`);
    const june1 = day("2026-06-01");
    const add = async (value: number, total: number) => {
      const p = t.redis.pipeline();
      for (const user of users) {
        p.xadd(streamKey, "*", "k", "ev", "u", user, "t", String(Date.parse(START)), "z", "UTC", "e", `lessons|${value * M}|00000000-0000-4000-8000-000000000007|${june1}|${periodOfDay(june1, "monthly")}|${total * M}`, "o", `p:xp:${value * 10}:${total * 10}:0:0`);
      }
      await p.exec();
    };
    await add(1, 1);
    expect(await bucketWorker(t, { batchSize: 600 }).drain()).toBe(600);
    await add(2, 3);
    expect(await bucketWorker(t, { batchSize: 600 }).drain()).toBe(600);
    for (const user of users) {
      expect(await buckets(user), user).toEqual([bucket("2026-06-01", 2, 3 * M, 3 * M)]);
      expect(await buckets(user, "p:xp"), user).toEqual([bucket("2026-06-01", 2, 30, 30)]);
    }
  });

  it("a batch that fails part-way writes nothing and moves no watermark; applied again, it counts once", async () => {
    for (const user of ["f1", "f2"]) await lesson(user);
    await bucketWorker(t).drain();
    // In one batch: f1, then fx, whose bucket key is not a zset (Redis answers WRONGTYPE when the
    // script reads it, after it has read f1's open day), then f2.
    await lesson("f1");
    await lesson("fx");
    await lesson("f2");
    const fxKey = `{${tenantId}:0}:b:m:lessons:fx`;
    await t.redis.set(fxKey, "not a zset");
    const before = await dumpTenant(t.redis, tenantId);
    await expect(bucketWorker(t).drain()).rejects.toThrow(/WRONGTYPE/);
    expect(await dumpTenant(t.redis, tenantId)).toEqual(before);

    await t.redis.del(fxKey);
    expect(await bucketWorker(t).drain()).toBe(3);
    expect(await bucketWorker(t).drain()).toBe(0);
    for (const [user, count] of [["f1", 2], ["f2", 2], ["fx", 1]] as const) expect(await today(user)).toEqual({ date: "2026-06-01", total: count, change: count });
  });
});

describe("the loop over many shards", () => {
  const shards = 8;
  const manyId = uniqueTenantId("wrs");
  let m: TestApp;
  beforeAll(async () => {
    m = await startTestApp({ yaml: lessonsXpTenantYaml(manyId, shards), manualClock: START });
  });
  afterAll(async () => m.close());

  // A call holds Redis for its whole batch; calls for every moved shard sent together held it
  // for milliseconds and every event waited behind them (bench/README.md, "The eighth stop").
  // So the loop catches shards up one after another: never two apply calls in flight.
  it("catches the moved shards up one after another: one apply call in flight at a time", async () => {
    const users = Array.from({ length: 64 }, (_, i) => `many-${i}`);
    const moved = new Set(users.map((user) => shardOf(user, shards)));
    expect(moved.size).toBe(shards);
    for (const user of users) expect((await m.call("POST", "/v1/metrics/lessons/event", { user: { id: user, tz: "UTC" }, value: 1 })).status).toBe(201);

    const apply = loadLua("applyStream-2");
    const counting = m.redis.duplicate();
    let inFlight = 0;
    let most = 0;
    let calls = 0;
    const send = counting.sendCommand.bind(counting);
    counting.sendCommand = ((command, stream) => {
      const target = String(command.args[0]);
      if ((command.name === "fcall" && target === apply.functionName) || (command.name === "evalsha" && target === apply.sha)) {
        calls++;
        most = Math.max(most, ++inFlight);
        void command.promise.then(
          () => inFlight--,
          () => inFlight--,
        );
      }
      return send(command, stream);
    }) as typeof counting.sendCommand;

    const worker = new StreamWorker({ redis: counting, tenants: m.tenants, logger: pino({ level: "silent" }) });
    worker.start();
    const lastIds = await Promise.all(Array.from({ length: shards }, async (_, s) => ((await m.redis.xrevrange(`{${manyId}:${s}}:x`, "+", "-", "COUNT", 1)) as [string, string[]][])[0]![0]));
    const caughtUp = async () => {
      for (let s = 0; s < shards; s++) if ((await m.redis.hget(`{${manyId}:${s}}:xw`, BUCKET_GROUP)) !== lastIds[s]) return false;
      return true;
    };
    // Wait for the effect, not for a time.
    await waitFor(caughtUp, "the worker to catch up on every shard");
    await worker.stop();
    counting.disconnect();

    expect(await caughtUp()).toBe(true);
    expect(calls).toBeGreaterThanOrEqual(shards);
    expect(most).toBe(1);
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
    // Another process does the work: wait for its effect, not for a fixed time.
    await waitFor(async () => (await today("standalone")).total === 5, "the worker process to apply the record", exited);
    expect(await today("standalone")).toMatchObject({ total: 5, change: 5 });
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  });

  it("killed (SIGKILL) mid-backlog: another worker finishes, and every record counts exactly once", async () => {
    await bucketWorker(t).drain();
    // A backlog of 3 000 event records: 30 users, 100 records each over 10 days crossing a month
    // end, each record with the day and the total a real one carries; and the buckets they make.
    const first = day("2026-06-26");
    const expected = new Map<string, DayBucket[]>();
    const pipeline = t.redis.pipeline();
    for (let r = 0; r < 100; r++) {
      for (let u = 0; u < 30; u++) {
        const user = `kill-${u}`;
        const d = first + Math.floor(r / 10);
        const value = 1 + ((r + u) % 4);
        const days = expected.get(user) ?? [];
        const total = (days.at(-1)?.total ?? 0) + value;
        if (days.at(-1)?.day === d) Object.assign(days.at(-1)!, { count: days.at(-1)!.count + 1, change: days.at(-1)!.change + value, total });
        else days.push({ day: d, count: 1, change: value, total });
        expected.set(user, days);
        const detail = `lessons|${value}|00000000-0000-4000-8000-${String(r * 100 + u).padStart(12, "0")}|${d}|${periodOfDay(d, "monthly")}|${total}`;
        pipeline.xadd(streamKey, "*", "k", "ev", "u", user, "t", String(Date.parse(START)), "z", "UTC", "e", detail, "o", "");
      }
    }
    await pipeline.exec();
    const last = (await t.redis.xrevrange(streamKey, "+", "-", "COUNT", 1))[0]![0];
    const startMark = await watermark();

    const config = join(dir, "kill.yaml");
    writeFileSync(config, YAML);
    const child = spawn(process.execPath, [new URL("../../dist/worker.js", import.meta.url).pathname], {
      env: { ...process.env, REDIS_URL: inject("redisUrl"), LAUREL_CONFIG: config, LOG_LEVEL: "warn" },
      stdio: "ignore",
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once("exit", (_code, signal) => resolve(signal)));
    // Killed as soon as it has applied something (wherever it then is: between two calls, or
    // with a call in flight, which Redis runs whole or not at all). Whenever the kill lands, the
    // assertions below hold.
    // Polled every 10 ms: killed soon after its first call, not after the whole backlog.
    await waitFor(async () => (await watermark()) !== startMark, "the worker process to apply a first call", exited, undefined, 10);
    child.kill("SIGKILL");
    expect(await exited).toBe("SIGKILL");
    // The killed worker applied part of the backlog (the wait above; here 700-900 of the 3 000
    // records): what follows checks a takeover, not a drain that did it all.

    await bucketWorker(t).drain();
    expect(await watermark()).toBe(last);
    for (const [user, days] of expected) expect(await buckets(user), user).toEqual(days);
  });
});
