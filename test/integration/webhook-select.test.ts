import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inject } from "vitest";
import type { WebhookEventType } from "../../src/config/types.js";
import { decodeStreamRecord } from "../../src/domain/stream-record.js";
import { boardParts, recordEvents, WANTED_PARTS, WEBHOOK_EVENT_TYPES } from "../../src/jobs/webhooks/kinds.js";
import { loadLua } from "../../src/store/lua-loader.js";
import { runScript } from "../../src/store/redis-script.js";

/**
 * The webhook consumer's filter in Redis (lua/hookSelect-1.lua) against recordEvents (kinds.ts),
 * the one place that decides which events a record stands for: a record that stands for an
 * event of a type is kept whenever that type is subscribed; records that stand for none of the
 * subscribed types are acknowledged in Redis and never reach Node.
 */
const select = loadLua("hookSelect-1");
let redis: Redis;
beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
});
afterAll(() => redis.disconnect());

/** One outcome per type that stands for an event of it (checked against recordEvents below). */
const CASES: [WebhookEventType, string][] = [
  ["achievement.completed", "a:first-lesson"],
  ["points.changed", "p:xp:10:10:0:0"],
  ["points.level_changed", "c;p:xp:0:60:0:1"],
  ["streak.extended", "s:3"],
  ["streak.started", "p:xp:10:10:0:0;s:1"],
  ["streak.lost", "sl:4;s:1"],
  ["streak.freeze_consumed", "fc:1;s:5"],
  ["streak.freeze_earned", "fe:1"],
  ["streak.freeze_earned", "fa:2"],
  ["leaderboard.rank_changed", "p:xp:10:70:1:1;b:xp-board:0:60:70"],
];

const fieldsOf = (kind: string, outcome: string) => ["k", kind, "u", "ada", "t", "1780000000000", "z", "UTC", "e", "detail", "o", outcome];

/** XADDs the records to a fresh stream with a webhooks group and selects with `wanted`: the kept outcomes. */
async function kept(outcomes: [kind: string, outcome: string][], wanted: string[]): Promise<{ read: number; kept: string[]; pending: number }> {
  const key = `{sel-${Math.random().toString(36).slice(2)}:0}:x`;
  await redis.xgroup("CREATE", key, "webhooks", "$", "MKSTREAM");
  for (const [kind, outcome] of outcomes) await redis.xadd(key, "*", ...fieldsOf(kind, outcome));
  const reply = (await runScript(redis, select, [key], ["webhooks", "c1", 100, ...wanted])) as [number, string, ...(string | string[])[]];
  const keptOutcomes: string[] = [];
  for (let i = 2; i < reply.length; i += 2) keptOutcomes.push((reply[i + 1] as string[]).at(-1)!);
  // Where the consumer waits from next: the last record read (none read: null, and it keeps the record that woke it).
  const lastAdded = (await redis.xrevrange(key, "+", "-", "COUNT", 1))[0]![0];
  expect(reply[1]).toBe(lastAdded);
  const again = (await runScript(redis, select, [key], ["webhooks", "c1", 100, ...wanted])) as [number, string | null];
  expect(again.slice(0, 2)).toEqual([0, null]);
  const pending = ((await redis.xpending(key, "webhooks")) as [number])[0];
  await redis.del(key);
  return { read: reply[0], kept: keptOutcomes, pending };
}

describe("webhook consumer's filter in Redis", () => {
  it("each case stands for its type (recordEvents)", () => {
    for (const [type, outcome] of CASES) {
      const fields = fieldsOf("ev", outcome);
      expect(recordEvents(decodeStreamRecord("1-0", fields), boardParts(fields)).map((e) => e.type)).toContain(type);
    }
  });

  it("keeps every record that stands for a subscribed type, and only those records reach Node (held pending for it)", async () => {
    for (const [type, outcome] of CASES) {
      const wanted = [WANTED_PARTS[type]!];
      // The other cases that do not stand for this type, and a record with no parts at all.
      const others = CASES.filter(([, o]) => !recordEvents(decodeStreamRecord("1-0", fieldsOf("ev", o)), boardParts(fieldsOf("ev", o))).some((e) => e.type === type)).map(([, o]) => o);
      const result = await kept([["us", ""], ["ev", outcome], ...others.map((o): [string, string] => ["ev", o])], wanted);
      expect(result.read, type).toBe(2 + others.length);
      expect(result.kept, type).toContain(outcome);
      expect(result.pending, type).toBe(result.kept.length);
      expect(result.kept, type).not.toContain("");
    }
  });

  it("is exact where the rule is cheap to state: a level change only when the levels differ, a start only at length 1", async () => {
    expect((await kept([["ev", "p:xp:10:70:1:1"], ["ev", "p:xp:10:60:0:1"]], ["L"])).kept).toEqual(["p:xp:10:60:0:1"]);
    expect((await kept([["ev", "s:2"], ["ev", "s:12"], ["ev", "s:1"]], ["S"])).kept).toEqual(["s:1"]);
    expect((await kept([["ev", "p:xp:10:10:0:0"], ["ev", "a:x"]], ["a"])).kept).toEqual(["a:x"]);
  });

  it("reads a record's kind and parts by name when its fields are not in the writers' order", async () => {
    const key = `{sel-${Math.random().toString(36).slice(2)}:0}:x`;
    await redis.xgroup("CREATE", key, "webhooks", "$", "MKSTREAM");
    await redis.xadd(key, "*", "o", "a:first-lesson", "k", "ev", "u", "ada", "t", "1780000000000", "z", "UTC", "e", "detail");
    await redis.xadd(key, "*", "o", "p:xp:10:10:0:0", "k", "ev", "u", "ada", "t", "1780000000000", "z", "UTC", "e", "detail");
    const reply = (await runScript(redis, select, [key], ["webhooks", "c1", 100, "a"])) as [number, string, ...(string | string[])[]];
    await redis.del(key);
    expect(reply[0]).toBe(2);
    expect(reply.length).toBe(4);
    expect(reply[3]).toContain("a:first-lesson");
  });

  it("always keeps a user boost's record (its boundaries go on the timeline), whatever is subscribed", async () => {
    expect((await kept([["ub", ""], ["ev", "p:xp:10:10:0:0"]], [])).kept).toEqual([""]);
  });

  it("every type has its wanted parts or comes from the timeline", () => {
    for (const type of WEBHOOK_EVENT_TYPES) expect(WANTED_PARTS[type] === null || typeof WANTED_PARTS[type] === "string").toBe(true);
    expect(WEBHOOK_EVENT_TYPES.filter((t) => WANTED_PARTS[t] === null)).toEqual(["points.boost_started", "points.boost_finished", "leaderboard.started", "leaderboard.finished"]);
  });
});
