import { createHash } from "node:crypto";
import { setFlagsFromString } from "node:v8";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { floorDiv, fromMicro, toMicro } from "../../src/domain/decimal.js";
import { LaurelError } from "../../src/domain/errors.js";
import { stableId, tenantNamespace, uuidV5 } from "../../src/domain/ids.js";
import { numberIn } from "../../src/domain/outcome.js";
import { levelIndex } from "../../src/domain/levels.js";
import { boardMember, compareCodePoints, compareEntries, firstInBoardOrder, lastInBoardOrder, pageRankNumbers } from "../../src/domain/leaderboards.js";
import { modelRank } from "../../src/domain/model.js";
import type { CompiledLeaderboard } from "../../src/config/compiled.js";
import { shardOf } from "../../src/domain/shards.js";
import { TenantKeys } from "../../src/store/keys.js";
import { dateToDay, formatDay, localDayIndex, parseDay, periodEndDay, periodOfDay, periodStartDay, periodStartInstant, ZoneNumberCache } from "../../src/domain/periods.js";

describe("decimal", () => {
  it("keeps six decimals exactly and rounds half away from zero beyond them", () => {
    expect(toMicro(0.1) + toMicro(0.2)).toBe(toMicro(0.3));
    expect(toMicro(1.0000005)).toBe(1_000_001);
    expect(toMicro(-1.0000005)).toBe(-1_000_001);
    expect(toMicro(1.0000004)).toBe(1_000_000);
    expect(toMicro(1e-7)).toBe(0);
    expect(toMicro(1e9)).toBe(1e15);
    expect(fromMicro(300_000)).toBe(0.3);
  });

  it("rounds the decimal the client wrote, not its double times a million", () => {
    // 1.0000025 * 1e6 is 1000002.4999999999 in doubles; written, it is a half: away from zero.
    expect(1.0000025 * 1e6).toBeLessThan(1_000_002.5);
    expect(toMicro(1.0000025)).toBe(1_000_003);
    expect(toMicro(-1.0000025)).toBe(-1_000_003);
    expect(toMicro(1.0000024)).toBe(1_000_002);
  });

  it("floorDiv is exact where the double quotient rounds", () => {
    expect(floorDiv(7, 2)).toBe(3);
    expect(floorDiv(2 ** 53 - 1, 3)).toBe(Math.floor((2 ** 53 - 1) / 3));
    // (9e15 - 1) / 9e15 is 0.9999999999999999 in doubles, not 1: below 2^53 the rounded quotient
    // never reaches the next integer, so these checks hold with or without the corrections.
    expect(floorDiv(9e15 - 1, 9e15)).toBe(0);
  });
});

describe("errors", () => {
  it("a client error carries its status and message but no stack frames, and other errors keep theirs", () => {
    const before = Error.stackTraceLimit;
    const err = new LaurelError("USER_NOT_FOUND", "User not found: x");
    expect([err.status, err.message, err instanceof Error]).toEqual([404, "User not found: x", true]);
    expect(err.stack).not.toContain("\n    at ");
    // The limit is put back: an unexpected error (logged with its stack) keeps its frames.
    expect(Error.stackTraceLimit).toBe(before);
    expect(new Error("unexpected").stack).toContain("\n    at ");
  });
});

describe("shards", () => {
  // The definition: FNV-1a over the id's UTF-8 bytes as Buffer.from writes them (shards.ts walks
  // the UTF-16 code units instead, without a Buffer).
  const reference = (userId: string, shards: number): number => {
    let hash = 0x811c9dc5;
    for (const byte of Buffer.from(userId, "utf8")) hash = Math.imul(hash ^ byte, 0x01000193);
    return (hash >>> 0) % shards;
  };

  it("a user's shard is FNV-1a of its UTF-8 bytes, for any text, lone surrogates included", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: "binary", maxLength: 40 }), fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)), maxLength: 20 })), fc.integer({ min: 1, max: 4096 }), (id, shards) => {
        expect(shardOf(id, shards)).toBe(reference(id, shards));
      }),
      { numRuns: 3000 },
    );
  });

  it("users stay on the shards they were stored on (values computed by the Buffer-based version that shipped)", () => {
    const shipped: [string, number, number][] = [
      ["user-1", 4, 372],
      ["user-99999", 8, 184],
      ["é", 1, 193],
      ["😀x", 0, 592],
      ["\ud800", 10, 74],
      ["a\udc00b", 13, 1005],
      ["日本語ユーザー", 8, 712],
    ];
    for (const [id, of16, of1024] of shipped) {
      expect(shardOf(id, 16)).toBe(of16);
      expect(shardOf(id, 1024)).toBe(of1024);
    }
  });

  it("takes each UTF-8 length's first and last code point as Buffer.from encodes them", () => {
    // Random text rarely hits a boundary exactly: U+0800 written with two bytes went unseen.
    // Lone surrogates (0xd800-0xdfff) are written as U+FFFD.
    const edges = [0x7f, 0x80, 0x7ff, 0x800, 0xd7ff, 0xd800, 0xdbff, 0xdc00, 0xdfff, 0xe000, 0xfffd, 0xffff, 0x10000, 0x10ffff];
    for (const code of edges) {
      const id = `u${String.fromCodePoint(code)}`;
      expect([code, shardOf(id, 4096)]).toEqual([code, reference(id, 4096)]);
    }
  });
});

describe("keys", () => {
  it("every key of a user carries its tenant and shard as the hash tag, whichever shard was asked first", () => {
    const keys = new TenantKeys("demo");
    const other = new TenantKeys("other");
    for (const shard of [7, 0, 15, 7, 0]) {
      expect(keys.user(shard, "u1")).toBe(`{demo:${shard}}:u:u1`);
      expect(keys.awards(shard, "xp", "u1")).toBe(`{demo:${shard}}:aw:xp:u1`);
      expect(other.prefix(shard)).toBe(`{other:${shard}}:`);
    }
  });

  it("names every key as the layout in keys.ts documents it: data stored by earlier versions is found under these names", () => {
    // A renamed key reads as empty on a fresh Redis, so no other test notices; on an upgrade it
    // loses what it held ({t}:slots: the position of every value of every stored user state).
    const k = new TenantKeys("demo");
    expect([
      k.user(3, "u1"),
      k.agg(3),
      k.stream(3),
      k.hookStream(3),
      k.pointsZset(3, "xp"),
      k.awards(3, "xp", "u1"),
      k.streakActive(3),
      k.streakDeadline(3),
      k.streakBest(3),
      k.streakHistory(3, "u1"),
      k.userBoosts(3),
      k.runGroups(3, "weekly", 5),
      k.rankHistory(3, "weekly", 5, "u1"),
      k.idempotency(3, "u1", "lessons", "key-1"),
      k.writer(3, 42),
      k.buckets(3, "m:lessons", "u1"),
      k.openMonths(3),
      k.watermarks(3),
      k.meta(),
      k.runsDeleted(),
      k.fixed(),
      k.timeScheduled(),
      k.boardCounters("weekly", 5),
      k.boardCounters("weekly", ""),
      k.runGroupsFrom(),
      k.slots(),
    ]).toEqual([
      "{demo:3}:u:u1",
      "{demo:3}:agg",
      "{demo:3}:x",
      "{demo:3}:xh",
      "{demo:3}:pz:xp",
      "{demo:3}:aw:xp:u1",
      "{demo:3}:sa",
      "{demo:3}:sd",
      "{demo:3}:sb",
      "{demo:3}:sh:u1",
      "{demo:3}:ub",
      "{demo:3}:lg:weekly:5",
      "{demo:3}:lh:weekly:5:u1",
      "{demo:3}:ik:lessons:u1\x1fkey-1",
      "{demo:3}:wr:42",
      "{demo:3}:b:m:lessons:u1",
      "{demo:3}:bl",
      "{demo:3}:xw",
      "{demo}:meta",
      "{demo}:runs-deleted",
      "{demo}:fixed",
      "{demo}:time-scheduled",
      "{demo}:lbc:weekly:5",
      "{demo}:lbc:weekly:",
      "{demo}:run-groups-from",
      "{demo}:slots",
    ]);
  });
});

describe("ids", () => {
  it("implements UUIDv5 (RFC 9562 test vector)", () => {
    // uuid v5 of "www.example.com" in the DNS namespace.
    expect(uuidV5("www.example.com", "6ba7b810-9dad-11d1-80b4-00c04fd430c8")).toBe("2ed6657d-e927-568b-95e1-2665a8aea6a2");
  });

  it("UUIDv5 is the RFC's construction for any name and namespace: SHA-1 of both, version 5, variant 10", () => {
    const reference = (name: string, namespace: string): string => {
      const digest = createHash("sha1").update(Buffer.from(namespace.replace(/-/g, ""), "hex")).update(name, "utf8").digest();
      digest[6] = (digest[6]! & 0x0f) | 0x50;
      digest[8] = (digest[8]! & 0x3f) | 0x80;
      const h = digest.subarray(0, 16).toString("hex");
      return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
    };
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 80 }), fc.uuid(), (name, namespace) => {
        expect(uuidV5(name, namespace)).toBe(reference(name, namespace));
      }),
      { numRuns: 2000 },
    );
    // Names longer than the reused input buffer (ids.ts) grow it; a short name after a long one
    // hashes only its own bytes.
    const ns = "6ba7b810-9dad-11d1-80b4-00c04fd430c8";
    // "€" is three bytes: 400 of them outgrow the first buffer (1024 bytes) by less than twice.
    for (const name of ["€".repeat(400), "x".repeat(5000), "é😀".repeat(900), "short", ""]) expect(uuidV5(name, ns)).toBe(reference(name, ns));
  });

  it("ids that have shipped stay the same (the core tenant's lessons metric, XP and energy systems)", () => {
    const ns = tenantNamespace("demo");
    expect(stableId(ns, "metric", "lessons")).toBe("e673ce80-9ed7-5efd-9513-f33fc403f160");
    expect(stableId(ns, "points", "xp")).toBe("e207b8f5-4a18-5dd8-9839-f85d6a748e02");
    expect(stableId(ns, "points", "energy")).toBe("55311e08-25c8-5788-ba33-36b98b51a7fd");
  });

  it("gives a configured object's id as the string table's own copy, which V8 never makes a ThinString of", () => {
    // A ThinString id made a whole event reply two-byte once TurboFan optimised its
    // concatenation, and uWS converted each reply the slow way (ids.ts stableId). V8's own
    // check, through its natives syntax (allowed here for this test's one function).
    setFlagsFromString("--allow-natives-syntax");
    const isInternalized = new Function("s", "return %IsInternalizedString(s)") as (s: string) => boolean;
    const ns = tenantNamespace(`t${Date.now()}`); // ids no earlier test made (and so internalized)
    expect(isInternalized(uuidV5("metric:fresh", ns))).toBe(false); // what stableId computes: a new string
    for (const kind of ["metric", "points", "achievement", "leaderboard"]) expect(isInternalized(stableId(ns, kind, "fresh"))).toBe(true);
  });

  it("derives stable, tenant-scoped ids", () => {
    expect(stableId(tenantNamespace("a"), "metric", "lessons")).toBe(stableId(tenantNamespace("a"), "metric", "lessons"));
    expect(stableId(tenantNamespace("a"), "metric", "lessons")).not.toBe(stableId(tenantNamespace("b"), "metric", "lessons"));
    expect(stableId(tenantNamespace("a"), "metric", "lessons")).not.toBe(stableId(tenantNamespace("a"), "achievement", "lessons"));
  });
});

describe("award records", () => {
  it("numberIn reads a number as Number reads the same text", () => {
    const texts = fc.oneof(
      fc.stringMatching(/^-?[0-9]{0,20}(\.[0-9]{0,8})?(e[+-]?[0-9]{1,3})?$/),
      fc.string({ maxLength: 20, unit: fc.constantFrom(..."0123456789-+.e x") }),
      fc.integer({ min: -(2 ** 53), max: 2 ** 53 }).map(String),
      fc.double().map(String),
    );
    fc.assert(
      fc.property(texts, fc.string({ maxLength: 3 }), fc.string({ maxLength: 3 }), (text, before, after) => {
        expect(Object.is(numberIn(before + text + after, before.length, before.length + text.length), Number(text))).toBe(true);
      }),
      { numRuns: 5000 },
    );
    for (const text of ["", "-", "-0", "007", "999999999999999", "9999999999999999", "1795544704599", "0.1", "+5", " 5"]) {
      expect(Object.is(numberIn(text, 0, text.length), Number(text))).toBe(true);
    }
  });
});

describe("levels", () => {
  it("a total must strictly exceed a threshold", () => {
    const levels = [{ points: 50 }, { points: 200 }, { points: 1000 }];
    expect([0, 50, 51, 200, 201, 1000, 1001].map((t) => levelIndex(levels, t))).toEqual([0, 0, 1, 1, 2, 2, 3]);
  });
});

describe("periods", () => {
  it("the zone caches hold at most their maximum: past it they start again empty (a memory bound)", () => {
    const cache = new ZoneNumberCache(3);
    cache.set("UTC", 1, 10);
    cache.set("UTC", 2, 20);
    cache.set("Asia/Tokyo", 1, 30);
    expect([cache.get("UTC", 1), cache.get("UTC", 2), cache.get("Asia/Tokyo", 1)]).toEqual([10, 20, 30]);
    cache.set("Europe/Paris", 7, 40);
    expect([cache.get("UTC", 1), cache.get("UTC", 2), cache.get("Asia/Tokyo", 1), cache.get("Europe/Paris", 7)]).toEqual([undefined, undefined, undefined, 40]);
  });

  it("parses only real calendar dates", () => {
    expect(parseDay("2024-02-29")).toBe(dateToDay(2024, 2, 29));
    expect(parseDay("2026-02-29")).toBeNull();
    expect(parseDay("2026-1-1")).toBeNull();
    expect(formatDay(parseDay("1999-12-31")!)).toBe("1999-12-31");
  });

  it("uses ISO weeks, Monday to Sunday", () => {
    const monday = parseDay("2026-03-02")!;
    const sunday = parseDay("2026-03-08")!;
    expect(periodOfDay(monday, "weekly")).toBe(periodOfDay(sunday, "weekly"));
    expect(periodOfDay(sunday + 1, "weekly")).toBe(periodOfDay(sunday, "weekly") + 1);
    expect(formatDay(periodStartDay(periodOfDay(sunday, "weekly"), "weekly"))).toBe("2026-03-02");
    expect(formatDay(periodEndDay(periodOfDay(monday, "weekly"), "weekly"))).toBe("2026-03-08");
  });

  it("uses calendar months, leap years included", () => {
    const p = periodOfDay(parseDay("2024-02-15")!, "monthly");
    expect(formatDay(periodStartDay(p, "monthly"))).toBe("2024-02-01");
    expect(formatDay(periodEndDay(p, "monthly"))).toBe("2024-02-29");
    expect(periodOfDay(parseDay("1969-12-31")!, "monthly")).toBe(-1);
    expect(formatDay(periodStartDay(-1, "monthly"))).toBe("1969-12-01");
  });

  it("takes the local date from the zone's offset at that instant, DST included", () => {
    // 2026-03-29 01:30Z: London has just moved to BST (02:30 local), Sydney is on 12:30 AEDT.
    const ms = Date.parse("2026-03-29T01:30:00Z");
    expect(formatDay(localDayIndex(ms, "Europe/London"))).toBe("2026-03-29");
    expect(formatDay(localDayIndex(Date.parse("2026-03-28T23:30:00Z"), "Europe/London"))).toBe("2026-03-28");
    expect(formatDay(localDayIndex(Date.parse("2026-03-28T23:30:00Z"), "Asia/Tokyo"))).toBe("2026-03-29");
    expect(formatDay(localDayIndex(Date.parse("2026-03-29T10:30:00Z"), "Pacific/Kiritimati"))).toBe("2026-03-30");
    expect(formatDay(localDayIndex(Date.parse("2026-03-29T10:30:00Z"), "Pacific/Pago_Pago"))).toBe("2026-03-28");
  });

  it("takes a zone's offset change at its instant, on the half hour too", () => {
    // Tehran left summer time (+04:30 to +03:30) at local midnight 2022-09-22, 2022-09-21T19:30Z:
    // 19:45Z is 23:15 on the 21st, an offset from 19:00Z would make it 00:15 on the 22nd.
    expect(formatDay(localDayIndex(Date.parse("2022-09-21T19:29:00Z"), "Asia/Tehran"))).toBe("2022-09-21");
    expect(formatDay(localDayIndex(Date.parse("2022-09-21T19:45:00Z"), "Asia/Tehran"))).toBe("2022-09-21");
    expect(formatDay(localDayIndex(Date.parse("2022-09-21T20:31:00Z"), "Asia/Tehran"))).toBe("2022-09-22");
  });

  it("takes an offset change inside a quarter hour at its instant (Newfoundland's changes at 00:01, 1987-2011)", () => {
    // St. John's set its clock back from 00:01 NDT to 23:01 NST on 2010-11-07, at 02:31Z: 02:35Z
    // is 23:05 on the 6th, where the offset at the quarter hour's start (02:30Z, NDT) made it
    // 00:05 on the 7th. Each side of the change, in the same quarter hour, asked in either order.
    const zone = "America/St_Johns";
    expect(formatDay(localDayIndex(Date.parse("2010-11-07T02:35:00Z"), zone))).toBe("2010-11-06");
    expect(formatDay(localDayIndex(Date.parse("2010-11-07T02:30:59Z"), zone))).toBe("2010-11-07");
    expect(formatDay(localDayIndex(Date.parse("2010-11-07T02:44:59Z"), zone))).toBe("2010-11-06");
    // Forward from 00:01 NST to 01:01 NDT on 2010-03-14 (03:31Z): the day is the 14th both sides.
    expect(formatDay(localDayIndex(Date.parse("2010-03-14T03:30:30Z"), zone))).toBe("2010-03-14");
    expect(formatDay(localDayIndex(Date.parse("2010-03-14T03:40:00Z"), zone))).toBe("2010-03-14");
    // The quarter hours either side are whole and cached as before: the 6th's last second under
    // NDT, then under NST (the hour it had twice), then the 7th again.
    expect(formatDay(localDayIndex(Date.parse("2010-11-07T02:29:59Z"), zone))).toBe("2010-11-06");
    expect(formatDay(localDayIndex(Date.parse("2010-11-07T03:29:59Z"), zone))).toBe("2010-11-06");
    expect(formatDay(localDayIndex(Date.parse("2010-11-07T03:31:00Z"), zone))).toBe("2010-11-07");
  });

  it("a period's first instant is its own frequency's, whichever frequency was asked first for the same number", () => {
    // Period 675: daily 1971-11-07, weekly from Monday 1982-12-06, monthly 2026-04 (Paris: +1, +1, +2).
    const zone = "Europe/Paris";
    expect(new Date(periodStartInstant(675, "daily", zone)).toISOString()).toBe("1971-11-06T23:00:00.000Z");
    expect(new Date(periodStartInstant(675, "weekly", zone)).toISOString()).toBe("1982-12-05T23:00:00.000Z");
    expect(new Date(periodStartInstant(675, "monthly", zone)).toISOString()).toBe("2026-03-31T22:00:00.000Z");
    expect(new Date(periodStartInstant(675, "daily", zone)).toISOString()).toBe("1971-11-06T23:00:00.000Z");
  });

  it("a period begins at the first of two local midnights (the clock set back across midnight), where localDayIndex dates it", () => {
    const cases: [string, string, string][] = [
      ["America/Havana", "2026-11-01", "2026-11-01T04:00:00.000Z"],
      ["Atlantic/Azores", "2026-10-25", "2026-10-25T00:00:00.000Z"],
      ["Antarctica/Casey", "2023-03-09", "2023-03-08T13:00:00.000Z"],
      ["Asia/Gaza", "2021-10-29", "2021-10-28T21:00:00.000Z"],
      // A midnight the clock skips (Santiago enters DST at 00:00): the day's first instant, 01:00 local.
      ["America/Santiago", "2026-09-06", "2026-09-06T04:00:00.000Z"],
      ["Europe/London", "2026-10-25", "2026-10-24T23:00:00.000Z"],
    ];
    for (const [zone, date, first] of cases) {
      const start = periodStartInstant(parseDay(date)!, "daily", zone);
      expect(new Date(start).toISOString(), zone).toBe(first);
      expect([localDayIndex(start - 1, zone), localDayIndex(start, zone)], zone).toEqual([parseDay(date)! - 1, parseDay(date)!]);
    }
    // The monthly period of Havana's November 2026 begins there too.
    expect(new Date(periodStartInstant(periodOfDay(parseDay("2026-11-01")!, "monthly"), "monthly", "America/Havana")).toISOString()).toBe("2026-11-01T04:00:00.000Z");
  });
});

describe("board members' order", () => {
  it("compareCodePoints orders strings as Redis orders equal scores' members: UTF-8 bytes", () => {
    // JavaScript's < puts U+1F600 (a surrogate pair) before U+FFFD; UTF-8 bytes do not.
    expect("\u{1F600}" < "\uFFFD").toBe(true);
    expect(compareCodePoints("\u{1F600}", "\uFFFD")).toBeGreaterThan(0);
    const units = fc.constantFrom("a", "|", "0", "\u00e9", "\ud7ff", "\ue000", "\uffff", "\u{10000}", "\u{1F600}", "\u{10FFFF}");
    const text = fc.array(units, { maxLength: 6 }).map((parts) => parts.join(""));
    fc.assert(
      fc.property(text, text, (a, b) => {
        expect(Math.sign(compareCodePoints(a, b))).toBe(Math.sign(Buffer.compare(Buffer.from(a), Buffer.from(b))));
      }),
    );
  });
});

describe("merging the shards' lists", () => {
  it("firstInBoardOrder and lastInBoardOrder take what sorting every list's entries together and slicing takes", () => {
    // Few values and instants, so that equal values meet across lists.
    const entry = fc.record({ user: fc.stringMatching(/^[a-z]{1,3}$/), value: fc.integer({ min: -2, max: 3 }), reachedAt: fc.integer({ min: 0, max: 3 }) });
    const lists = fc.array(fc.uniqueArray(entry, { selector: (u) => u.user, maxLength: 8 }), { maxLength: 5 });
    fc.assert(
      fc.property(lists, fc.nat(30), (raw, count) => {
        // Each user on one list (a user is on one shard), each list in board order, as ZREVRANGE WITHSCORES gives it.
        const seen = new Set<string>();
        const shards = raw.map((list) =>
          list
            .filter((u) => !seen.has(u.user) && seen.add(u.user))
            .map((u) => ({ member: boardMember(u.reachedAt, u.user), value: u.value }))
            .sort(compareEntries),
        );
        const wire = shards.map((list) => list.flatMap((e) => [e.member, String(e.value)]));
        const all = shards.flat().sort(compareEntries);
        expect(firstInBoardOrder(wire, count)).toEqual(all.slice(0, count));
        expect(lastInBoardOrder(wire, count)).toEqual(count === 0 ? [] : all.slice(-count));
      }),
    );
  });
});

describe("a page's rank numbers", () => {
  it("pageRankNumbers, from the page's first rank, gives every entry the rank the model gives it on the whole board, in every style", () => {
    // Few values, so that pages start and end among equal ones.
    const users = fc.uniqueArray(fc.record({ user: fc.stringMatching(/^[a-z]{1,3}$/), value: fc.integer({ min: 0, max: 4 }), reachedAt: fc.integer({ min: 0, max: 3 }) }), { selector: (u) => u.user, maxLength: 12 });
    const style = fc.constantFrom("competition" as const, "dense" as const, "ordinal" as const);
    fc.assert(
      fc.property(users, style, fc.nat(12), fc.integer({ min: 1, max: 12 }), (list, ranking, start, limit) => {
        const board = { ranking } as CompiledLeaderboard;
        const stored = new Map(list.map((u) => [u.user, { value: u.value, reachedAt: u.reachedAt }]));
        const entries = list.map((u) => ({ member: boardMember(u.reachedAt, u.user), value: u.value })).sort(compareEntries);
        const page = entries.slice(start, start + limit);
        if (page.length === 0) return;
        const first = modelRank(board, stored, page[0]!.value, page[0]!.member);
        expect(pageRankNumbers(ranking, page, start, first)).toEqual(page.map((e) => modelRank(board, stored, e.value, e.member)));
      }),
    );
  });
});
