import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { iso, streakText } from "../../src/api/wire.js";
import type { Frequency } from "../../src/domain/periods.js";
import { viewStreak } from "../../src/domain/streak.js";
import { parseAwardRecord } from "../../src/domain/outcome.js";
import { readableExpected } from "../../src/api/body.js";

// Text the hot paths format and parse by hand, held to what the plain versions give.
describe("iso", () => {
  const MAX = 8.64e15; // the largest instant a Date holds

  it("is Date#toISOString for any instant a Date holds, including the first and last millisecond of a day and extended years", () => {
    const edges = [0, -1, 1, 86_399_999, 86_400_000, -86_400_000, -86_400_001, 1764000000123, 253402300799999, 253402300800000, -62167219200001, MAX, -MAX];
    for (const ms of edges) expect(iso(ms), String(ms)).toBe(new Date(ms).toISOString());
    fc.assert(
      fc.property(fc.array(fc.integer({ min: -MAX, max: MAX }), { minLength: 1, maxLength: 5 }), (instants) => {
        // several in a row, so a cached day or instant from the call before is exercised too
        for (const ms of instants) expect(iso(ms)).toBe(new Date(ms).toISOString());
      }),
      { numRuns: 2000 },
    );
  });

  it("within one day, every millisecond field rolls over as Date's does", () => {
    const day = Date.UTC(2026, 10, 24);
    fc.assert(fc.property(fc.integer({ min: 0, max: 86_399_999 }), (offset) => {
      expect(iso(day + offset)).toBe(new Date(day + offset).toISOString());
    }), { numRuns: 2000 });
  });

  it("a fraction truncates and an invalid instant throws, as Date does", () => {
    expect(iso(1764000000123.9)).toBe(new Date(1764000000123.9).toISOString());
    expect(() => iso(Number.NaN)).toThrow(RangeError);
    expect(() => iso(MAX + 1)).toThrow(RangeError);
  });
});

describe("parseAwardRecord", () => {
  it("reads seq|ms|awarded|total|triggerKey, the trigger key whole even when it holds bars", () => {
    expect(parseAwardRecord("7|1764000000123|-2.5|97.5|api-call")).toEqual({ seq: 7, ms: 1764000000123, awarded: -2.5, total: 97.5, triggerKey: "api-call" });
    expect(parseAwardRecord("1|0|10|10|a|b||c")).toEqual({ seq: 1, ms: 0, awarded: 10, total: 10, triggerKey: "a|b||c" });
    expect(parseAwardRecord("2|5|0|0|")).toEqual({ seq: 2, ms: 5, awarded: 0, total: 0, triggerKey: "" });
  });
});

describe("streakText", () => {
  it("is JSON.stringify of {...view, extended} for any view viewStreak gives: every frequency, alive or not, with and without freezes", () => {
    const period = fc.integer({ min: -1000, max: 120_000 });
    const freezes = fc.option(fc.record({ initial: fc.nat(5), max: fc.nat(10), everyDays: fc.nat(30), amount: fc.nat(3) }), { nil: null });
    const rule = fc.option(fc.record({ frequency: fc.constantFrom<Frequency>("daily", "weekly", "monthly"), metrics: fc.constant<{ metric: string; thresholdMicro: number }[]>([]), mode: fc.constant<"all">("all"), freezes }), { nil: null });
    const state = fc.record({
      length: fc.nat(5000),
      startPeriod: fc.option(period, { nil: null }),
      startDay: fc.option(fc.nat(40_000), { nil: null }),
      lastPeriod: fc.option(period, { nil: null }),
      freezes: fc.option(fc.nat(10), { nil: null }),
    });
    fc.assert(
      fc.property(rule, state, period, fc.nat(40_000), fc.boolean(), (rule, state, nowPeriod, nowDay, extended) => {
        const view = viewStreak(rule, state, nowDay, nowPeriod);
        expect(streakText(view, extended)).toBe(JSON.stringify({ ...view, extended }));
      }),
      { numRuns: 2000 },
    );
  });
});

describe("readableExpected", () => {
  it("says typia's tags in words", () => {
    expect(readableExpected("Array<> & MinItems<1> & MaxItems<1000>")).toBe("an array, at least 1 item, at most 1000 items");
    expect(readableExpected('number & Type<"uint32"> & Minimum<1> & Maximum<1000>')).toBe("an integer, at least 1, at most 1000");
    expect(readableExpected("(string & MinLength<1> & MaxLength<200>)")).toBe("string, at least 1 character, at most 200 characters (UTF-16 units: most emoji count 2)");
  });

  it("says a type's shape, not its name, and a union as alternatives", () => {
    expect(readableExpected("EventBody")).toBe("an object");
    expect(readableExpected("__type")).toBe("an object");
    expect(readableExpected("(Record<string, string> | null | undefined)")).toBe("an object of strings or null");
    expect(readableExpected("((Array<string & MinLength<1> & MaxLength<512>> & MaxItems<100>) | null | undefined)")).toBe(
      "(an array of strings (each at least 1 character, at most 512 characters (UTF-16 units: most emoji count 2)), at most 100 items) or null",
    );
    expect(readableExpected("(UserInput | null)")).toBe("an object or null");
    // An array of objects (POST /admin/v1/streaks/freezes' `freezes`), not "Array<an object>".
    expect(readableExpected("(Array<__type> & MinItems<1> & MaxItems<1000>)")).toBe("an array of objects, at least 1 item, at most 1000 items");
    expect(readableExpected("Array<Record<string, string>>")).toBe("an array of objects of strings");
    // Quoted literals are the values to send, left as they are.
    expect(readableExpected('("UTC" | "Europe/Paris" | undefined)')).toBe('"UTC" or "Europe/Paris"');
    // An array of literals (a preference's channels) is an array of strings, each one of them.
    expect(readableExpected('((Array<"push" | "email"> & MaxItems<2>) | null | undefined)')).toBe('(an array of strings (each "email" or "push"), at most 2 items) or null');
    expect(readableExpected("(string | null) | (number | null)")).toBe("(string or null) or (number or null)");
  });
});
