import { describe, expect, it } from "vitest";
import { ManualClock, SystemClock } from "../../src/clock.js";

// clock.ts: highest() is the latest time the clock has shown, whatever it shows now; the
// leaderboard thresholds stamp their reads with it (store/thresholds.ts).
describe("Clock.highest", () => {
  it("a system clock stepped back keeps the latest time it showed, and follows the wall clock past it", () => {
    let wall = 10_000;
    const clock = new SystemClock(() => wall);
    expect(clock.now()).toBe(10_000);
    wall = 4_000; // stepped back (an NTP correction)
    expect(clock.now()).toBe(4_000);
    expect(clock.highest()).toBe(10_000);
    wall = 12_000; // not read by now() yet: highest() reads the wall clock too
    expect(clock.highest()).toBe(12_000);
  });

  it("a manual clock set back keeps the latest time it was set to", async () => {
    const clock = new ManualClock(5_000);
    await clock.set(9_000);
    await clock.set(2_000);
    expect([clock.now(), clock.highest()]).toEqual([2_000, 9_000]);
    await clock.set(9_500);
    expect(clock.highest()).toBe(9_500);
  });
});
