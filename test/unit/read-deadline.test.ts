import { describe, expect, it } from "vitest";
import { ReadDeadline } from "../../src/http/read-deadline.js";
import { LaurelError } from "../../src/domain/errors.js";

describe("ReadDeadline.sweep", () => {
  it("answers, oldest first, the reads that have waited the bound, once each, and counts them per sweep", () => {
    const counts: number[] = [];
    const deadline = new ReadDeadline(100, (count) => counts.push(count));
    try {
      const answered: Array<[string, unknown]> = [];
      const read = (name: string) => (err: unknown) => answered.push([name, err]);
      const [a, b, c, d] = [read("a"), read("b"), read("c"), read("d")];
      deadline.track(a, 1000);
      const waitingB = deadline.track(b, 1050);
      deadline.track(c, 1100);
      const waitingD = deadline.track(d, 1150);
      deadline.untrack(waitingB); // answered by its handler first
      deadline.untrack(waitingB); // and again: nothing more
      deadline.sweep(1099.9); // a has waited 99.9 ms: not yet
      expect(answered).toEqual([]);
      deadline.sweep(1200); // a (200 ms) and c (100 ms: the bound itself); d (50 ms) waits on
      expect(answered.map(([name]) => name)).toEqual(["a", "c"]);
      const err = answered[0]![1] as LaurelError;
      expect(err).toBeInstanceOf(LaurelError);
      expect(err.status).toBe(503);
      expect(err.message).toBe("Redis did not answer within 100 ms; retry later");
      deadline.sweep(1200); // answered ones are not answered again
      deadline.sweep(1250);
      expect(answered.map(([name]) => name)).toEqual(["a", "c", "d"]);
      expect(counts).toEqual([2, 1]);
      // Untracking an expired read (the router does, as it answers it) changes nothing; the list goes on.
      deadline.untrack(waitingD);
      const e = read("e");
      deadline.track(e, 2000);
      deadline.sweep(2100);
      expect(answered.map(([name]) => name)).toEqual(["a", "c", "d", "e"]);
      expect(counts).toEqual([2, 1, 1]);
    } finally {
      deadline.stop();
    }
  });

  it("once reads have waited the bound, answers every waiting read at the next sweep until a read is answered, or for one bound more", () => {
    const counts: number[] = [];
    const deadline = new ReadDeadline(100, (count) => counts.push(count));
    try {
      const answered: string[] = [];
      const read = (name: string) => () => answered.push(name);
      deadline.track(read("a"), 1000);
      deadline.sweep(1100); // a waited the bound: Redis is stalled
      deadline.track(read("b"), 1110);
      deadline.sweep(1125); // b is 15 ms old, but Redis is known stalled: answered now
      expect(answered).toEqual(["a", "b"]);
      // A read its handler answers says Redis answers again: the bound holds once more.
      const c = deadline.track(read("c"), 1130);
      deadline.untrack(c, true);
      deadline.track(read("d"), 1140);
      deadline.sweep(1150);
      expect(answered).toEqual(["a", "b"]);
      deadline.sweep(1240); // d waited the bound
      expect(answered).toEqual(["a", "b", "d"]);
      // A client that went away says nothing of Redis: still stalled.
      const e = deadline.track(read("e"), 1245);
      deadline.untrack(e, false);
      deadline.track(read("f"), 1250);
      deadline.sweep(1260);
      expect(answered).toEqual(["a", "b", "d", "f"]);
      // No read answered for a bound after the last sweep that answered one (1260): no longer taken for stalled.
      deadline.track(read("g"), 1370);
      deadline.sweep(1380);
      expect(answered).toEqual(["a", "b", "d", "f"]);
      expect(counts).toEqual([1, 1, 1, 1]);
    } finally {
      deadline.stop();
    }
  });
});
