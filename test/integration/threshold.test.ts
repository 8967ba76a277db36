import fc from "fast-check";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, inject } from "vitest";
import type { CompiledLeaderboard } from "../../src/config/compiled.js";
import { ManualClock, SystemClock } from "../../src/clock.js";
import { loadConfigText } from "../../src/config/load.js";
import { activeRun } from "../../src/domain/leaderboards.js";
import { participants, threshold } from "../../src/store/leaderboard-store.js";
import { TenantStore } from "../../src/store/tenant-store.js";
import { demoConfig } from "../helpers/app.js";
import { propertyParameters } from "../helpers/property.js";

/**
 * The threshold of a full board (the value at position maxParticipants over every shard) is read
 * from a page of each shard's top, and further pages only where a shard may hide a higher value
 * (src/store/leaderboard-store.ts kthFromTops). Compared with the k-th value of all entries
 * merged, on boards whose entries crowd into a few shards, tie, or barely fill the board.
 */
describe("leaderboard threshold", () => {
  let redis: Redis;
  let store: TenantStore;
  beforeAll(async () => {
    redis = new Redis(inject("redisUrl"));
    const [tenant] = loadConfigText(demoConfig().yaml, "test.yaml", {});
    store = await TenantStore.open(redis, tenant!);
  });
  afterAll(() => redis.quit());

  it("equals the k-th value of every shard's entries merged", async () => {
    let board = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 60 }),
        // Entries: (shard weight bucket, value); few distinct values make ties, skewed shards make pages run out.
        // size "max": at fast-check's default size the array stops at 10 entries, and most boards (k up to 60) were not full.
        fc.array(fc.tuple(fc.integer({ min: 0, max: 15 }), fc.integer({ min: 0, max: 40 })), { maxLength: 200, size: "max" }),
        fc.boolean(),
        async (k, entries, crowd) => {
          board += 1;
          const keys = Array.from({ length: store.tenant.shards }, (_, s) => `{${store.tenant.id}:${s}}:lb:thr${board}:1`);
          const pipeline = redis.pipeline();
          entries.forEach(([shard, value], i) => pipeline.zadd(keys[crowd ? shard % 2 : shard]!, value, `m${i}`));
          await pipeline.exec();
          const sorted = entries.map(([, v]) => v).sort((a, b) => b - a);
          const expected = sorted.length < k ? null : sorted[k - 1]!;
          expect(await threshold(store, { maxParticipants: k } as CompiledLeaderboard, keys, await participants(store, keys))).toBe(expected);
          await redis.del(...keys);
        },
      ),
      propertyParameters(150),
    );
  });

  it("stamps each read with the clock's latest time, taken after the board's reads", async () => {
    // A value equal to the threshold is left off the board only when reached after the read
    // (lua/includes/leaderboards.lua updateBoards): the stamp must not precede an entry this
    // process wrote, neither when the clock was set back nor while the reads ran.
    const board = store.tenant.leaderboards[0]!;
    const now = Date.parse("2026-06-01T00:00:00Z");
    const run = activeRun(board, now)!;
    // The order of the reads (the counters' HMGET, the participants' counts: every command goes
    // through sendCommand, a method or a script call) and the stamp.
    const order: string[] = [];
    const redis = store.redis as unknown as Record<"sendCommand", (...args: unknown[]) => unknown>;
    const { sendCommand } = redis;
    redis.sendCommand = (...args) => (order.push("read"), sendCommand.apply(store.redis, args));
    try {
      await store.thresholds.refresh(now, () => (order.push("stamp"), now + 500));
    } finally {
      Object.assign(redis, { sendCommand });
    }
    // Each board's stamp comes after that board's two reads.
    const segments = order.join(" ").split("stamp").slice(0, -1).map((part) => part.trim().split(" ").filter(Boolean).length);
    expect(order.slice(-1)).toEqual(["stamp"]);
    expect(segments.length).toBeGreaterThan(0);
    for (const reads of segments) expect(reads).toBeGreaterThanOrEqual(2);
    const numbers: number[] = [];
    store.thresholds.pushNumbers(numbers, board, run);
    expect(numbers[4]).toBe(now + 500);
    const manual = new ManualClock(now);
    await manual.set(now + 10_000);
    await manual.set(now);
    expect([manual.now(), manual.highest()]).toEqual([now, now + 10_000]);
    const system = new SystemClock();
    const seen = system.now();
    expect(system.highest()).toBeGreaterThanOrEqual(seen);
  });
});
