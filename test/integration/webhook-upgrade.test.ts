import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inject } from "vitest";
import { streamEventId } from "../../src/jobs/webhooks/kinds.js";
import { HOOK_CUTOVER_FIELD } from "../../src/jobs/webhooks/upgrade.js";
import { loadLua } from "../../src/store/lua-loader.js";
import { runScript } from "../../src/store/redis-script.js";
import { startTestApp, uniqueTenantId } from "../helpers/app.js";
import { lessonsTenantYaml, MILESTONES } from "../helpers/tenant-yaml.js";
import { startReceiver } from "../helpers/webhook-receiver.js";

/**
 * Upgrade from the version whose webhook consumer group (`webhooks`) read the shard streams
 * themselves (README: Operations): at start, the records that group had not finished (pending
 * in an old consumer, or not read yet) are moved to the hook streams, selected for what the
 * endpoints want, up to the cutover (the shard stream's last id when this version first ran the
 * move), and the group is removed. Each is then delivered once, with the event ids the old
 * consumer would have derived (from the shard stream's entry id).
 */
const upgrade = loadLua("hookUpgrade-3");
let redis: Redis;
beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
});
afterAll(() => redis.disconnect());

const groupsOf = async (key: string) => ((await redis.xinfo("GROUPS", key)) as string[][]).map((g) => g[1]);

describe("the records an earlier version's webhooks group had not finished", () => {
  it("are moved to the hook stream at start, selected, and delivered once with the ids of their shard stream entries", async () => {
    const tenantId = uniqueTenantId("upg");
    const shardKey = `{${tenantId}:0}:x`;
    const hookKey = `{${tenantId}:0}:xh`;
    // The earlier version: its writers put every record in the shard stream only, and its group read there.
    const old = await startTestApp({ yaml: lessonsTenantYaml(tenantId), manualClock: "2026-06-01T12:00:00Z", jobs: false });
    await redis.xgroup("CREATE", shardKey, "webhooks", "$", "MKSTREAM");
    for (const user of ["ada", "ada", "ada", "cy", "dee"]) expect((await old.call("POST", "/v1/metrics/lessons/event", { user: { id: user, tz: "UTC" }, value: 1 })).status).toBe(201);
    await old.close();
    const ids = ((await redis.xrange(shardKey, "-", "+")) as [string, string[]][]).map(([id]) => id);
    expect(ids).toHaveLength(5);
    // Its consumer read the first two, finished the first, and died before acknowledging the second.
    await redis.xreadgroup("GROUP", "webhooks", "old-consumer", "COUNT", 2, "STREAMS", shardKey, ">");
    await redis.xack(shardKey, "webhooks", ids[0]!);

    const receiver = await startReceiver();
    const config = lessonsTenantYaml(tenantId, { url: receiver.url, events: MILESTONES });
    let t = await startTestApp({ yaml: config, manualClock: "2026-06-01T12:00:00Z" });
    try {
      expect(await groupsOf(shardKey)).not.toContain("webhooks");
      expect(await redis.hexists(`{${tenantId}:0}:xw`, HOOK_CUTOVER_FIELD)).toBe(0);
      // ada's second lesson (a level: pending in the dead consumer), cy's and dee's first (never read).
      // ada's third lesson stands for no milestone; her first was finished by the old consumer.
      const hooked = (await redis.xrange(hookKey, "-", "+")) as [string, string[]][];
      expect(hooked.map(([, f]) => f.at(-1))).toEqual([ids[1], ids[3], ids[4]]);

      expect(await t.app.webhooks!.drain()).toBe(3);
      const got = await receiver.waitFor(5);
      await t.app.webhooks!.settled(tenantId);
      const ns = t.tenants[0]!.ns;
      expect(got.map((r) => r.body.id).sort()).toEqual(
        [
          streamEventId(ns, tenantId, 0, ids[1]!, "points.level_changed", "xp"),
          streamEventId(ns, tenantId, 0, ids[3]!, "achievement.completed", "first-lesson"),
          streamEventId(ns, tenantId, 0, ids[3]!, "streak.started", "streak"),
          streamEventId(ns, tenantId, 0, ids[4]!, "achievement.completed", "first-lesson"),
          streamEventId(ns, tenantId, 0, ids[4]!, "streak.started", "streak"),
        ].sort(),
      );
      expect(got.filter((r) => r.body.type === "points.level_changed")[0]!.body.user.id).toBe("ada");

      // A restart moves nothing again (the old group is gone, so the upgrade has nothing to do) and
      // delivers nothing twice.
      await t.close();
      t = await startTestApp({ yaml: config, manualClock: "2026-06-01T12:00:00Z" });
      expect(await redis.xlen(hookKey)).toBeLessThanOrEqual(1); // trimmed to the last acknowledged entry
      expect(await t.app.webhooks!.drain()).toBe(0);
      await t.app.webhooks!.settled(tenantId);
      expect(receiver.received).toHaveLength(5);
    } finally {
      await t.close();
      await receiver.close();
    }
  });

  it("moves in batches, each atomic, and never moves what this version's writers wrote after the cutover", async () => {
    const key = `{${uniqueTenantId("upg")}:0}:x`;
    const marks = `${key}w`;
    const fields = (outcome: string) => ["k", "ev", "u", "ada", "t", "1780000000000", "z", "UTC", "e", "detail", "o", outcome];
    await redis.xgroup("CREATE", key, "webhooks", "$", "MKSTREAM");
    const before: string[] = [];
    for (const outcome of ["a:x", "p:xp:10:10:0:0", "a:y", "s:1", "p:xp:10:20:0:1"]) before.push((await redis.xadd(key, "*", ...fields(outcome)))!);
    // An old consumer's pending entry whose record was deleted since: acknowledged, nothing to move.
    await redis.xreadgroup("GROUP", "webhooks", "old", "COUNT", 1, "STREAMS", key, ">");
    await redis.xdel(key, before[0]!);
    const step = async () => (await runScript(redis, upgrade, [key, `${key}h`, marks], ["webhooks", 2, "a", "S"])) as [number, number, number];

    expect(await step()).toEqual([1, 0, 0]); // the deleted pending entry
    const cutover = await redis.hget(marks, "webhooks:cutover");
    expect(cutover).toBe(before[4]);
    // This version's writer appends after the cutover (to both streams itself): not moved.
    const later = (await redis.xadd(key, "*", ...fields("a:z")))!;
    await redis.xadd(`${key}h`, "*", ...fields("a:z"), "x", later);
    expect(await step()).toEqual([2, 1, 0]); // "p:..." not wanted, "a:y" moved
    expect(await step()).toEqual([2, 1, 0]); // "s:1" moved, the level change not wanted (L not asked)
    expect(await step()).toEqual([0, 0, 1]); // nothing left up to the cutover: the group is removed
    expect(await groupsOf(key)).not.toContain("webhooks");
    expect(await redis.hexists(marks, "webhooks:cutover")).toBe(0);
    expect(await step()).toEqual([0, 0, 1]);
    const hooked = (await redis.xrange(`${key}h`, "-", "+")) as [string, string[]][];
    expect(hooked.map(([, f]) => [f[11], f.at(-1)])).toEqual([
      ["a:z", later],
      ["a:y", before[2]],
      ["s:1", before[3]],
    ]);
    await redis.del(key, `${key}h`, marks);
  });
});

describe("an earlier version's webhooks group on the shard streams of a tenant without endpoints now", () => {
  it("is removed at start, with the cutover, so the shard streams trim as if it never existed", async () => {
    const tenantId = uniqueTenantId("upg");
    const shardKey = `{${tenantId}:0}:x`;
    await redis.xgroup("CREATE", shardKey, "webhooks", "$", "MKSTREAM");
    await redis.hset(`{${tenantId}:0}:xw`, HOOK_CUTOVER_FIELD, "1-0");
    const t = await startTestApp({ yaml: lessonsTenantYaml(tenantId), manualClock: "2026-06-01T12:00:00Z" });
    try {
      expect(t.app.webhooks!.consumer).toBeNull();
      expect(await groupsOf(shardKey)).not.toContain("webhooks");
      expect(await redis.hexists(`{${tenantId}:0}:xw`, HOOK_CUTOVER_FIELD)).toBe(0);
    } finally {
      await t.close();
    }
  });
});
