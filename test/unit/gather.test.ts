import { describe, expect, it } from "vitest";
import { someBatchFull } from "../../src/jobs/stream-loop.js";

/** The stream loops' gather rule (stream-loop.ts): go on at once only behind a full batch. */
describe("someBatchFull", () => {
  it("is true when one stream filled its batch", () => {
    expect(someBatchFull([4], 4)).toBe(true);
    expect(someBatchFull([0, 3, 5], 4)).toBe(true);
  });

  it("is false when the turn's total exceeds a batch but no stream filled one (758a8aa: the webhook consumer spun)", () => {
    expect(someBatchFull([1, 1, 1, 1, 1, 1], 4)).toBe(false);
    expect(someBatchFull([3, 3], 4)).toBe(false);
  });

  it("is false for an empty turn", () => {
    expect(someBatchFull([], 4)).toBe(false);
  });
});
