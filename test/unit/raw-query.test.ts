import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { RawQuery } from "../../src/http/query.js";

// Queries built from the characters that matter to form decoding, plus a few plain ones.
const queryText = fc.string({ unit: fc.constantFrom("a", "b", "w", "=", "&", "%", "+", "2", "0", "é", " "), maxLength: 24 });
const name = fc.constantFrom("a", "b", "ab", "", "a b", "a+b", "w=", "aw");

describe("RawQuery", () => {
  it("answers get, getAll and has exactly as URLSearchParams does, for any query", () => {
    fc.assert(
      fc.property(queryText, name, (raw, key) => {
        const query = new RawQuery(raw);
        const params = new URLSearchParams(raw);
        expect(query.get(key)).toBe(params.get(key));
        expect(query.has(key)).toBe(params.has(key));
        expect(query.getAll(key)).toEqual(params.getAll(key));
      }),
      { numRuns: 5000 },
    );
  });

  it("reads the metering read's query and its edge cases", () => {
    expect(new RawQuery("awards=10").get("awards")).toBe("10");
    expect(new RawQuery("xawards=1&awards=3&awards=4").get("awards")).toBe("3");
    expect(new RawQuery("awards").get("awards")).toBe("");
    expect(new RawQuery("awards=1=2").get("awards")).toBe("1=2");
    expect(new RawQuery("&&awards=5&").get("awards")).toBe("5");
    expect(new RawQuery("").get("awards")).toBeNull();
    expect(new RawQuery("award=1").get("awards")).toBeNull();
    expect(new RawQuery("aw%61rds=7").get("awards")).toBe("7");
    expect(new RawQuery("awards=1+0").get("awards")).toBe("1 0");
  });
});
