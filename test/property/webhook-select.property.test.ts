import fc from "fast-check";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { WebhookEventType } from "../../src/config/types.js";
import { wantedParts, WEBHOOK_EVENT_TYPES } from "../../src/jobs/webhooks/kinds.js";
import { eventTypesOf, keptForPointsChanged, selectedEach } from "../helpers/webhook-select.js";
import { propertyParameters } from "../helpers/property.js";

/**
 * The webhook selection made when a record is written (lua/includes/hooks.lua hookWanted, given
 * the parts kinds.ts wantedParts names for the subscribed types) against recordEvents
 * (src/jobs/webhooks/kinds.ts), on random records of the outcome grammar (src/domain/stream-record.ts,
 * as the Lua writers format the parts) and random sets of subscribed types: a record is selected
 * exactly when it stands for an event of a subscribed type, save the one documented exception, a
 * points part with nothing added, kept when points.changed is subscribed
 * (test/integration/webhook-select.test.ts holds hand-picked cases). Many cases per EVAL.
 * The seed is printed; rerun one with FC_SEED=<seed>.
 */
let redis: Redis;
beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
});
afterAll(() => redis.disconnect());

/** Mostly absent: a record usually has a few parts, so that one part is often the only reason to select it. */
const sometimes = <T>(arb: fc.Arbitrary<T>) => fc.oneof({ weight: 3, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: arb });
const fewOf = <T>(arb: fc.Arbitrary<T>) => fc.oneof({ weight: 2, arbitrary: fc.constant([] as T[]) }, { weight: 1, arbitrary: fc.array(arb, { minLength: 1, maxLength: 2 }) });

/** A config key (src/config/types.ts Key): achievements, systems, boards. Never ":" or ";". */
const keyArb = fc.oneof(
  fc.constantFrom("xp", "first-lesson", "s", "p", "1", "b.2", "a_b"),
  fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/),
);
/**
 * A length or count: at least 1 where the writers write one (streak.lua streakOutcome,
 * streakAdmin-9.lua); 1 and the numbers that begin with it often ("s:1" alone is streak.started).
 */
const countArb = fc.oneof(fc.constantFrom(1, 10, 11, 12, 100, 101), fc.integer({ min: 1, max: 9 }), fc.integer({ min: 10, max: 99 }), fc.integer({ min: 100, max: 100_000 }));
/** A level index (0 = none): one digit usually, several sometimes (hooks.lua reads both). */
const levelArb = fc.oneof({ weight: 3, arbitrary: fc.nat(9) }, { weight: 1, arbitrary: fc.integer({ min: 10, max: 250 }) });
/** A %d integer: points added or a total, a board value (may be negative). */
const intArb = fc.oneof(fc.constant(0), fc.integer({ min: -1_000, max: 1_000 }), fc.integer({ min: -(2 ** 53) + 1, max: 2 ** 53 - 1 }));

/**
 * p:<sys>:<added>:<total>:<lvBefore>:<lvAfter>:<lastAward> (points.lua flushPoints, '%d' each);
 * the levels often equal; now and then without the award number, as earlier builds wrote it
 * (lua/hookUpgrade-3.lua selects such records).
 */
const pointsPart = fc
  .tuple(keyArb, fc.oneof(fc.constant(0), intArb), intArb, levelArb, fc.option(levelArb, { freq: 2 }), fc.option(fc.oneof(countArb, fc.nat(9)), { freq: 4 }))
  .map(([sys, added, total, before, after, lastAward]) => `p:${sys}:${added}:${total}:${before}:${after ?? before}${lastAward === null ? "" : `:${lastAward}`}`);
/** b:<board>:<run>:<old>:<new>:<previous rank>:<rank>, b:<board>:<run>::<new>:... without an old value, ranks empty for none (leaderboards.lua updateBoards); without the ranks as earlier builds wrote it. */
const rankText = fc.option(countArb, { freq: 3 }).map((rank) => (rank === null ? "" : String(rank)));
const boardPart = fc
  .tuple(keyArb, fc.oneof(fc.nat(9), fc.nat(100_000)), fc.option(intArb, { freq: 3 }), intArb, fc.option(fc.tuple(rankText, rankText), { freq: 4 }))
  .map(([board, run, old, value, ranks]) => `b:${board}:${run}:${old ?? ""}:${value}${ranks === null ? "" : `:${ranks[0]}:${ranks[1]}`}`);

/** A record's outcome parts, in any order (the writers' orders differ; the selection must not care). */
const outcomeArb = fc
  .record({
    created: sometimes(fc.constant("c")),
    achievements: fewOf(keyArb.map((k) => `a:${k}`)),
    points: fewOf(pointsPart),
    boards: fewOf(boardPart),
    extended: sometimes(countArb.map((n) => `s:${n}`)),
    lost: sometimes(countArb.map((n) => `sl:${n}`)),
    consumed: sometimes(countArb.map((n) => `fc:${n}`)),
    earned: sometimes(countArb.map((n) => `fe:${n}`)),
    granted: sometimes(countArb.map((n) => `fa:${n}`)),
    restored: sometimes(countArb.map((n) => `sr:${n}`)),
  })
  .map((r) => [r.created, ...r.achievements, ...r.points, ...r.boards, r.extended, r.lost, r.consumed, r.earned, r.granted, r.restored].filter((p): p is string => p !== null))
  .chain((parts) => fc.shuffledSubarray(parts, { minLength: parts.length, maxLength: parts.length }))
  .map((parts) => parts.join(";"));

/** The types one tenant's endpoints subscribe to, together (any subset, timeline types included; often one or two). */
const subscribedArb = fc.oneof(fc.subarray([...WEBHOOK_EVENT_TYPES]), fc.subarray([...WEBHOOK_EVENT_TYPES], { maxLength: 2 }));

const caseArb = fc.tuple(outcomeArb, subscribedArb);

/** What the selection must answer: an event of a subscribed type, or the points part kept for points.changed. */
function expected(outcome: string, subscribed: readonly WebhookEventType[]): boolean {
  const types = eventTypesOf(outcome);
  return subscribed.some((type) => types.has(type)) || (subscribed.includes("points.changed") && keptForPointsChanged(outcome));
}

describe("the webhook selection (lua/includes/hooks.lua) against recordEvents, on random records", () => {
  it("selects a record exactly when it stands for an event of a subscribed type (a points part with nothing added is kept for points.changed)", async () => {
    await fc.assert(
      // size "max": at fast-check's default size the array stops at about 12 cases whatever its maxLength.
      fc.asyncProperty(fc.array(caseArb, { minLength: 1, maxLength: 50, size: "max" }), async (cases) => {
        const got = await selectedEach(redis, cases.map(([outcome, subscribed]) => [outcome, wantedParts(subscribed)] as const));
        const mismatches = cases
          .map(([outcome, subscribed], i) => ({ outcome, subscribed, selected: got[i], expected: expected(outcome, subscribed) }))
          .filter((c) => c.selected !== c.expected);
        expect(mismatches).toEqual([]);
      }),
      propertyParameters(200),
    );
  });
});
