import { describe, expect, it } from "vitest";
import { allBuckets, applyChange, decodeOpenMonth, encodeMonth, encodeOpenMonth, type SeriesStore } from "../../src/domain/buckets.js";
import { periodOfDay } from "../../src/domain/periods.js";
import { bucket, day } from "../helpers/buckets.js";

/**
 * The reference of the stream worker's bucket layout (src/domain/buckets.ts): the open month's
 * packed value and applyChange, which lua/applyStream-2.lua implements
 * (test/integration/open-month.test.ts holds the two together).
 */
const month = (iso: string) => periodOfDay(day(iso), "monthly");
const apply = (s: SeriesStore, iso: string, change: number, total: number | null = null) => applyChange(s, day(iso), month(iso), change, total);

describe("the open month's value", () => {
  it("round-trips: the open day, then the closed days; negative and large amounts exact", () => {
    const o = { month: month("2026-06-01"), closed: [bucket("2026-06-01", 3, -2_500_000, -1), bucket("2026-06-02", 1, 2 ** 52, 2 ** 52 - 1)], open: bucket("2026-06-05", 2, 7, 2 ** 52 + 6) };
    const packed = encodeOpenMonth(o);
    expect(packed.length).toBe(28 + 2 * 24);
    expect(decodeOpenMonth(packed)).toEqual(o);
  });

  it("a value of the open day alone, as the version before the open month wrote it (28 bytes '<i4i4i4dd'), is an open month with no closed days", () => {
    const legacy = Buffer.alloc(28);
    legacy.writeInt32LE(day("2026-06-05"), 0);
    legacy.writeInt32LE(month("2026-06-05"), 4);
    legacy.writeInt32LE(2, 8);
    legacy.writeDoubleLE(3_000_000, 12);
    legacy.writeDoubleLE(9_000_000, 20);
    expect(decodeOpenMonth(legacy)).toEqual({ month: month("2026-06-05"), closed: [], open: bucket("2026-06-05", 2, 3_000_000, 9_000_000) });
    expect(encodeOpenMonth(decodeOpenMonth(legacy))).toEqual(legacy);
  });
});

describe("applyChange", () => {
  it("days of one month stay in the open month; the next month writes the month's member", () => {
    const s: SeriesStore = { months: new Map(), open: null };
    apply(s, "2026-06-29", 1, 1);
    apply(s, "2026-06-29", 2, 3);
    expect(s).toEqual({ months: new Map(), open: { month: month("2026-06-01"), closed: [], open: bucket("2026-06-29", 2, 3, 3) } });
    apply(s, "2026-06-30", 1); // no total in the record: the running total plus the change
    expect(s).toEqual({ months: new Map(), open: { month: month("2026-06-01"), closed: [bucket("2026-06-29", 2, 3, 3)], open: bucket("2026-06-30", 1, 1, 4) } });
    apply(s, "2026-07-02", 5, 9);
    expect(s).toEqual({
      months: new Map([[month("2026-06-01"), encodeMonth([bucket("2026-06-29", 2, 3, 3), bucket("2026-06-30", 1, 1, 4)])]]),
      open: { month: month("2026-07-01"), closed: [], open: bucket("2026-07-02", 1, 5, 9) },
    });
    // A day before the open day (the calendar moved back) counts in the open day.
    apply(s, "2026-07-01", 1, 10);
    expect(s.open!.open).toEqual(bucket("2026-07-02", 2, 6, 10));
  });

  it("the total a record carries wins over the running total (a series begun after the user's first changes); without one, the running total", () => {
    const s: SeriesStore = { months: new Map(), open: null };
    apply(s, "2026-06-29", 1, 11); // 10 before the series began
    expect(s.open!.open).toEqual(bucket("2026-06-29", 1, 1, 11));
    apply(s, "2026-06-30", 2); // a record of an earlier version: no total
    apply(s, "2026-06-30", 1, 20);
    expect(s.open!.open).toEqual(bucket("2026-06-30", 2, 3, 20));
  });

  it("a month whose first days an earlier version closed into its member: closing the month appends to that member", () => {
    const june = month("2026-06-01");
    const s: SeriesStore = { months: new Map([[june, encodeMonth([bucket("2026-06-01", 1, 1, 1)])]]), open: { month: june, closed: [], open: bucket("2026-06-02", 1, 1, 2) } };
    apply(s, "2026-06-03", 1, 3);
    apply(s, "2026-07-01", 1, 4);
    expect([...s.months]).toEqual([[june, encodeMonth([bucket("2026-06-01", 1, 1, 1), bucket("2026-06-02", 1, 1, 2), bucket("2026-06-03", 1, 1, 3)])]]);
    expect(allBuckets(s).map((b) => b.total)).toEqual([1, 2, 3, 4]);
  });

  it("a series with no open month takes its latest day out of its latest member (the layout before the open day); a new series opens its first day", () => {
    const may = month("2026-05-01");
    const s: SeriesStore = { months: new Map([[may, encodeMonth([bucket("2026-05-30", 1, 1, 1), bucket("2026-05-31", 1, 1, 2)])]]), open: null };
    apply(s, "2026-05-31", 1, 3);
    expect(s).toEqual({ months: new Map([[may, encodeMonth([bucket("2026-05-30", 1, 1, 1)])]]), open: { month: may, closed: [], open: bucket("2026-05-31", 2, 2, 3) } });
    const fresh: SeriesStore = { months: new Map(), open: null };
    apply(fresh, "2026-05-31", -2);
    expect(fresh.open).toEqual({ month: may, closed: [], open: bucket("2026-05-31", 1, -2, -2) });
  });
});
