import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { RawQuery } from "../../src/http/query.js";

// Queries built from the characters that matter to form decoding, plus a few plain ones.
const queryText = fc.string({ unit: fc.constantFrom("a", "b", "w", "=", "&", "%", "+", "2", "0", "é", " ", "C", "3", "A", "9"), maxLength: 24 });
const name = fc.constantFrom("a", "b", "ab", "", "a b", "a+b", "w=", "aw");

describe("RawQuery", () => {
  it("answers get, getAll and has as URLSearchParams does, for any query, and refuses what is not UTF-8", () => {
    fc.assert(
      fc.property(queryText, name, (raw, key) => {
        // Node's URLSearchParams reads "é%a+a" as "\uFFFD%a a" (the raw non-ASCII text next to a
        // stray "%"); it reads the text right once its non-ASCII characters are percent-encoded.
        const params = new URLSearchParams(raw.replace(/[^\x00-\x7f]/gu, (c) => encodeURIComponent(c)));
        // Bytes that are not UTF-8 (%A0, a continuation byte alone) are refused: URLSearchParams
        // makes them U+FFFD, which these characters cannot spell validly.
        if ([...params].some(([n, v]) => `${n}${v}`.includes("\uFFFD"))) {
          expect(() => new RawQuery(raw)).toThrow(/not valid UTF-8/);
          return;
        }
        const query = new RawQuery(raw);
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
    // A name sent twice is read by its first value, on the path that decodes (a "%" or "+" in the query) too.
    expect(new RawQuery("awards=3&awards=4&x=%20").get("awards")).toBe("3");
    expect(new RawQuery("awards=3&awards=4+1").get("awards")).toBe("3");
  });

  it("refuses names and values that are not UTF-8, sent raw or percent-encoded, and takes the rest", () => {
    for (const raw of ["userIds=a%FF", "userIds=a%fe", "userIds=%C3", "userIds=%C3&x=%A9", "userIds=%ED%A0%80", "userIds=%C0%AF", "a%FF=1", "userIds=a\uFFFD"]) {
      expect(() => new RawQuery(raw), raw).toThrow(/not valid UTF-8/);
    }
    // Valid: a percent-encoded U+FFFD, é both ways, a stray "%" (kept as itself, as URLSearchParams keeps it).
    expect(new RawQuery("userIds=a%EF%BF%BD").get("userIds")).toBe("a\uFFFD");
    expect(new RawQuery("userIds=%C3%A9,\u00e9").get("userIds")).toBe("\u00e9,\u00e9");
    expect(new RawQuery("userIds=50%&b=%zz").getAll("userIds")).toEqual(["50%"]);
    expect(new RawQuery("userIds=50%&b=%zz").get("b")).toBe("%zz");
    // Node's URLSearchParams reads this one as "\uFFFD%a a".
    expect(new RawQuery("\u00e9%a+a").has("\u00e9%a a")).toBe(true);
  });
});
