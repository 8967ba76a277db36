import { describe, expect, it } from "vitest";
import { attributeFilterParam, listParam } from "../../src/api/query.js";
import { bucketsIn, decodeMonth, encodeMonth, summarise, type DayBucket } from "../../src/domain/buckets.js";
import { LaurelError } from "../../src/domain/errors.js";
import { histogramTop, rangesOfTop } from "../../src/domain/histogram.js";
import { dateToDay, formatDay, parseDay } from "../../src/domain/periods.js";
import { longestStreakIn, percentChange, wrappedPeriods } from "../../src/domain/wrapped.js";
import { compareStreamIds, recordDayArgs } from "../../src/jobs/stream-ops.js";
import { decodeStreamRecord, eventDetail } from "../../src/domain/stream-record.js";
import { topStreaks } from "../../src/store/read-store.js";

const day = (iso: string) => parseDay(iso)!;
const bucket = (iso: string, change: number, total: number, count = 1): DayBucket => ({ day: day(iso), count, change, total });

describe("daily buckets and summaries", () => {
  it("a month member round-trips, negative amounts included", () => {
    const days = [
      { day: 20500, count: 3, change: -2500000, total: -1 },
      { day: 20502, count: 1, change: 7, total: 6 },
    ];
    expect(decodeMonth(encodeMonth(days))).toEqual(days);
  });

  it("bucketsIn: the last bucket before the range may be in the previous month's member or in the first month's", () => {
    const feb = encodeMonth([bucket("2026-02-03", 1, 1), bucket("2026-02-20", 2, 3)]);
    const mar = encodeMonth([bucket("2026-03-01", 1, 4), bucket("2026-03-10", 5, 9), bucket("2026-03-31", 1, 10)]);
    expect(bucketsIn(feb, [mar], [], day("2026-03-05"), day("2026-03-30"))).toEqual({ before: bucket("2026-03-01", 1, 4), inRange: [bucket("2026-03-10", 5, 9)] });
    expect(bucketsIn(feb, [mar], [], day("2026-03-01"), day("2026-03-01")).before).toEqual(bucket("2026-02-20", 2, 3));
    expect(bucketsIn(null, [], [], day("2026-03-01"), day("2026-03-02"))).toEqual({ before: null, inRange: [] });
  });

  it("bucketsIn: the open month's days (its closed days, then the open day) are the latest buckets, after every month member's days", () => {
    const feb = encodeMonth([bucket("2026-02-03", 1, 1), bucket("2026-02-20", 2, 3)]);
    const mar = encodeMonth([bucket("2026-03-01", 1, 4)]);
    const closed = bucket("2026-03-05", 1, 5);
    const open = bucket("2026-03-12", 2, 6, 3);
    // In the range: last of the range's buckets.
    expect(bucketsIn(feb, [mar], [closed, open], day("2026-03-01"), day("2026-03-31"))).toEqual({ before: bucket("2026-02-20", 2, 3), inRange: [bucket("2026-03-01", 1, 4), closed, open] });
    // Before the range (even a range of months with no member): the bucket before it.
    expect(bucketsIn(null, [], [closed, open], day("2026-04-01"), day("2026-04-30"))).toEqual({ before: open, inRange: [] });
    expect(bucketsIn(feb, [mar], [closed, open], day("2026-03-13"), day("2026-03-20"))).toEqual({ before: open, inRange: [] });
    expect(bucketsIn(feb, [mar], [closed, open], day("2026-03-06"), day("2026-03-12"))).toEqual({ before: closed, inRange: [open] });
    // After the range: not seen.
    expect(bucketsIn(feb, [], [closed, open], day("2026-03-01"), day("2026-03-04"))).toEqual({ before: bucket("2026-02-20", 2, 3), inRange: [] });
    expect(bucketsIn(feb, [mar], [closed, open], day("2026-03-05"), day("2026-03-11"))).toEqual({ before: bucket("2026-03-01", 1, 4), inRange: [closed] });
    // A series with only its open day.
    expect(bucketsIn(null, [], [open], day("2026-03-12"), day("2026-03-12"))).toEqual({ before: null, inRange: [open] });
  });

  it("summarise: running totals carry over empty periods; changes add up to the range's net change", () => {
    const before = bucket("2026-02-20", 5, 10);
    const inRange = [bucket("2026-03-02", 3, 13), bucket("2026-03-09", -1, 12), bucket("2026-04-01", 2, 14)];
    const weekly = summarise(before, inRange, day("2026-03-04"), day("2026-04-02"), "weekly");
    expect(weekly[0]).toEqual({ date: "2026-03-02", total: 13, change: 3 });
    expect(weekly.at(-1)).toEqual({ date: "2026-03-30", total: 14, change: 2 });
    expect(weekly.reduce((n, i) => n + i.change, 0)).toBe(14 - 10);
    // A range with no bucket of its own carries the total from before it.
    expect(summarise(before, [], day("2026-02-27"), day("2026-02-28"), "daily")).toEqual([
      { date: "2026-02-27", total: 10, change: 0 },
      { date: "2026-02-28", total: 10, change: 0 },
    ]);
    expect(summarise(null, [], day("2026-01-31"), day("2026-03-01"), "monthly")).toEqual([
      { date: "2026-01-01", total: 0, change: 0 },
      { date: "2026-02-01", total: 0, change: 0 },
      { date: "2026-03-01", total: 0, change: 0 },
    ]);
  });

  it("the histogram goes up to the highest total rounded up to a power of ten, at least 10", () => {
    expect(rangesOfTop(histogramTop(0))[9]).toEqual([10, 10]);
    expect(rangesOfTop(histogramTop(1000))).toEqual(Array.from({ length: 10 }, (_, i) => [i * 100 + 1, (i + 1) * 100]));
    expect(rangesOfTop(histogramTop(1001))[0]).toEqual([1, 1000]);
    expect(rangesOfTop(histogramTop(1e15))[9]).toEqual([9e14 + 1, 1e15]);
    expect([0, 10, 11, 100, 101, 999_999].map(histogramTop)).toEqual([10, 10, 100, 100, 1000, 1_000_000]);
  });
});

describe("wrapped", () => {
  it("percentChange: against the total before, truncated to one decimal; 100 from nothing", () => {
    expect(percentChange(12500, 2500)).toBe(20);
    expect(percentChange(3800, 1200)).toBe(31.5);
    expect(percentChange(0, 150000)).toBe(100);
    expect(percentChange(0, 0)).toBe(0);
    expect(percentChange(-10, 5)).toBe(50);
  });

  it("the most active day, week and month: most events, ties to the earliest; weeks clipped to the year", () => {
    const p = wrappedPeriods(2026, [[bucket("2025-12-31", 1, 1, 9), bucket("2026-01-01", 1, 2, 2), bucket("2026-01-02", 1, 3, 2), bucket("2026-03-03", 1, 4, 3)]]);
    expect(p).toMatchObject({ daysActive: 3, weeksActive: 2, monthsActive: 2 });
    expect(formatDay(p.mostActiveDay.from)).toBe("2026-03-03");
    // 1-2 January (Thursday, Friday): the ISO week began on 29 December, clipped to 1 January.
    expect([formatDay(p.mostActiveWeek.from), formatDay(p.mostActiveWeek.to)]).toEqual(["2026-01-01", "2026-01-04"]);
    expect(p.mostActiveMonth.month).toBe(0);
    expect(formatDay(wrappedPeriods(2026, [[bucket("2026-02-01", 1, 1), bucket("2026-01-01", 1, 1)]]).mostActiveDay.from)).toBe("2026-01-01");
  });

  it("longestStreakIn walks back through frozen periods to where the streak began, even before the year", () => {
    const history = ["9:1", "10:2", "11:2:f", "12:3", "20:1", "21:2", "22:3"];
    expect(longestStreakIn(history, 11, 30)).toEqual({ length: 3, startPeriod: 9, endPeriod: 12 });
    expect(longestStreakIn(history, 13, 30)).toEqual({ length: 3, startPeriod: 20, endPeriod: 22 });
    expect(longestStreakIn(history, 40, 50)).toEqual({ length: 0, startPeriod: null, endPeriod: null });
    // A frozen period reaches no length: a year whose only period of the streak was frozen has none.
    expect(longestStreakIn(history, 11, 11)).toEqual({ length: 0, startPeriod: null, endPeriod: null });
    // A period frozen at length 1 is walked through too: the streak began at the 1 extended before it.
    expect(longestStreakIn(["5:1", "6:1:f", "7:2"], 7, 7)).toEqual({ length: 2, startPeriod: 5, endPeriod: 7 });
  });

  it("longestStreakIn counts back from a history that begins inside a streak (trimmed: it ended long ago)", () => {
    // 50 extended periods up to 100: the streak began at 51 (taken without freezes before it).
    expect(longestStreakIn(["100:50", "101:51", "102:52"], 100, 200)).toEqual({ length: 52, startPeriod: 51, endPeriod: 102 });
    // A frozen first entry: its 50 extended periods all came before it.
    expect(longestStreakIn(["100:50:f", "101:51"], 100, 200)).toEqual({ length: 51, startPeriod: 50, endPeriod: 101 });
    expect(longestStreakIn(["100:1", "101:2"], 100, 200)).toEqual({ length: 2, startPeriod: 100, endPeriod: 101 });
  });

  it("years before 100 are real years (Date.UTC would read them as 19xx)", () => {
    expect(formatDay(dateToDay(1, 1, 1))).toBe("0001-01-01");
    expect(parseDay("0099-12-31")).toBe(dateToDay(99, 12, 31));
  });
});

describe("stream worker pieces", () => {
  it("stream ids compare by time, then sequence", () => {
    expect(compareStreamIds("1700000000000-10", "1700000000000-9")).toBe(1);
    expect(compareStreamIds("999-0", "1000-0")).toBe(-1);
    expect(compareStreamIds("5-5", "5-5")).toBe(0);
  });

  it("a record's local day for the worker: the zone's calendar at the record's instant, with its month", () => {
    // 23:30 UTC on the day British Summer Time starts is 00:30 on the 30th in London.
    const at = String(Date.parse("2026-03-29T23:30:00Z"));
    expect(recordDayArgs(["1-0", at, "Europe/London", "2-0", at, "UTC"])).toEqual([
      "1-0",
      String(day("2026-03-30")),
      String((2026 - 1970) * 12 + 2),
      "2-0",
      String(day("2026-03-29")),
      String((2026 - 1970) * 12 + 2),
    ]);
  });

  it("an event record's detail: with day and month, and as earlier versions wrote it", () => {
    const at = String(Date.parse("2026-03-29T23:30:00Z"));
    const record = (detail: string) => decodeStreamRecord("1-0", ["k", "ev", "u", "ada", "t", at, "z", "Europe/London", "e", detail, "o", ""]);
    expect(eventDetail(record("lessons|3000000|id|20542|674|8000000"))).toEqual({ metricKey: "lessons", valueMicro: 3000000, eventId: "id", totalMicro: 8000000 });
    expect(eventDetail(record("lessons|3000000|id|8000000"))).toEqual({ metricKey: "lessons", valueMicro: 3000000, eventId: "id", totalMicro: 8000000 });
    expect(eventDetail(record("lessons|3000000|id"))).toEqual({ metricKey: "lessons", valueMicro: 3000000, eventId: "id", totalMicro: null });
  });

  it("merged tops: longest first, ties by user id descending in bytes", () => {
    expect(topStreaks([{ userId: "a", length: 2 }, { userId: "é", length: 2 }, { userId: "z", length: 2 }, { userId: "b", length: 3 }], 3).map((s) => s.userId)).toEqual(["b", "é", "z"]);
  });
});

describe("query parameters", () => {
  const q = (s: string) => new URLSearchParams(s);
  const status = (f: () => unknown) => {
    try {
      f();
      return 200;
    } catch (err) {
      return (err as LaurelError).status;
    }
  };

  it("userAttributes: key:value pairs, values may hold colons or be empty; malformed 400, undeclared 422", () => {
    const declared = new Set(["plan", "region"]);
    expect(attributeFilterParam(q("userAttributes=plan:pro,region:us:east"), "userAttributes", declared)).toEqual(new Map([["plan", "pro"], ["region", "us:east"]]));
    expect(attributeFilterParam(q(""), "userAttributes", declared)).toBeNull();
    // An empty value is the empty string, a value a user can be saved with.
    expect(attributeFilterParam(q("userAttributes=plan:,region:eu"), "userAttributes", declared)).toEqual(new Map([["plan", ""], ["region", "eu"]]));
    for (const bad of ["plan", ":pro", ":", "plan:pro,,region:x"]) expect(status(() => attributeFilterParam(q(`userAttributes=${bad}`), "userAttributes", declared))).toBe(400);
    expect(status(() => attributeFilterParam(q("userAttributes=tier:1"), "userAttributes", declared))).toBe(422);
  });

  it("lists: repeated values whole, one value split on commas, duplicates once, a bound", () => {
    expect(listParam(q("ids=a&ids=b&ids=c&ids=a&ids="), "ids", 3)).toEqual(["a", "b", "c"]);
    expect(listParam(q("ids=a,b,,c,a"), "ids", 3)).toEqual(["a", "b", "c"]);
    expect(listParam(q("ids=a,b&ids=c"), "ids", 3)).toEqual(["a,b", "c"]);
    expect(status(() => listParam(q("ids=a,b,c,d"), "ids", 3))).toBe(422);
    expect(status(() => listParam(q("ids=a&ids=b&ids=c&ids=d"), "ids", 3))).toBe(422);
  });
});
