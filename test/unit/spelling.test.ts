import { describe, expect, it } from "vitest";
import { misspeltAt, misspeltKey } from "../../src/domain/spelling.js";

describe("misspeltKey", () => {
  it("finds a misspelling of a long name, a short name's other case only, and never a valid short sibling", () => {
    expect(misspeltKey(["key", "threshhold", "points"], "threshold")).toBe("threshhold");
    expect(misspeltKey(["pointz"], "points")).toBe("pointz");
    expect(misspeltKey(["Now"], "now")).toBe("Now");
    expect(misspeltKey(["Id"], "id")).toBe("Id");
    // Two letters allow no edit: `tz` beside a missing `id` is a field of its own, not `id` misspelt.
    expect(misspeltKey(["tz", "email"], "id")).toBeNull();
    expect(misspeltKey(["time"], "now")).toBeNull();
    expect(misspeltKey(["now"], "now")).toBeNull();
  });

  it("allows one edit per three letters of the name, two at most", () => {
    // Five letters: one edit, not two.
    expect(misspeltKey(["valeu"], "value")).toBeNull();
    expect(misspeltKey(["valu"], "value")).toBe("valu");
    // Six letters: two edits.
    expect(misspeltKey(["poinzz"], "points")).toBe("poinzz");
    // Nine letters and more: still two, never three.
    expect(misspeltKey(["thrXXXold"], "threshold")).toBeNull();
    expect(misspeltKey(["thrXXhold"], "threshold")).toBe("thrXXhold");
  });

  it("reads typia's paths into the value, quoted keys and indexes included", () => {
    const value = { tenants: [{ points: [{ triggers: [{ threshhold: 1 }] }] }], "odd key": { Name: 1 } };
    expect(misspeltAt(value, "$input.tenants[0].points[0].triggers[0].threshold")).toBe("threshhold");
    expect(misspeltAt(value, '$input["odd key"].name')).toBe("Name");
    expect(misspeltAt(value, "$input.tenants[3].points")).toBeNull();
  });
});
