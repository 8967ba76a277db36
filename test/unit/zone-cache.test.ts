import { describe, expect, it } from "vitest";
import { ZoneCache } from "../../src/store/tenant-store.js";

// The zone an event was judged in, kept for the user's next event that sends none (the event
// call's first guess; a wrong guess costs a retry, never a wrong answer: lua/event-2.lua status -1).
describe("ZoneCache.remember", () => {
  it("does not store UTC, the default, for a user it does not know", () => {
    const zones = new ZoneCache();
    zones.remember("u1", "UTC");
    expect(zones.get("u1")).toBeUndefined();
  });

  it("stores any other zone, and a known user's move to UTC", () => {
    const zones = new ZoneCache();
    zones.remember("u1", "Europe/Paris");
    expect(zones.get("u1")).toBe("Europe/Paris");
    zones.remember("u1", "Europe/Paris");
    expect(zones.get("u1")).toBe("Europe/Paris");
    zones.remember("u1", "Asia/Tokyo");
    expect(zones.get("u1")).toBe("Asia/Tokyo");
    zones.remember("u1", "UTC");
    expect(zones.get("u1")).toBe("UTC");
  });

  it("starts over when full, rather than growing past its bound", () => {
    const zones = new ZoneCache(2);
    zones.remember("a", "Europe/Paris");
    zones.remember("b", "Europe/London");
    zones.remember("c", "Asia/Tokyo");
    expect([zones.get("a"), zones.get("b"), zones.get("c")]).toEqual([undefined, undefined, "Asia/Tokyo"]);
    zones.remember("d", "Europe/Berlin");
    // Full again: an unchanged zone is not written again, so it does not clear the cache.
    zones.remember("c", "Asia/Tokyo");
    expect([zones.get("c"), zones.get("d")]).toEqual(["Asia/Tokyo", "Europe/Berlin"]);
  });
});
