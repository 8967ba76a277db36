import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { applyAwardIdSlots } from "../../src/boot.js";
import { AwardIdTable, awardIdTableStats, DEFAULT_AWARD_ID_SLOTS, isAwardIdSlots, rememberedAwardId, setAwardIdSlots } from "../../src/domain/award-ids.js";
import { awardId, tenantNamespace, uuidV5 } from "../../src/domain/ids.js";

const computed = (namespace: string, systemKey: string, userId: string, seq: number): string => uuidV5(`award:${systemKey}:${seq}:${userId}`, namespace);

/** A table, its look, and how many ids it had to compute (did not remember). */
function counted(slots: number) {
  const table = new AwardIdTable(slots);
  const get = (namespace: string, systemKey: string, userId: string, seq: number): string => table.get(namespace, systemKey, userId, seq);
  return { table, get, computations: () => table.misses };
}

describe("award id table", () => {
  const demo = tenantNamespace("demo");
  const other = tenantNamespace("other");

  it("remembers an id: the second read of a key computes nothing and returns the same text", () => {
    const { get, computations } = counted(1024);
    const first = get(demo, "xp", "user-1", 7);
    expect(first).toBe(computed(demo, "xp", "user-1", 7));
    expect(get(demo, "xp", "user-1", 7)).toBe(first);
    expect(computations()).toBe(1);
  });

  it("never answers one key with another's id: every key shares one slot in a table of one", () => {
    // In a one-slot table each key evicts the one before; a key differing in any part must miss.
    const { get, computations } = counted(1);
    const keys: [string, string, string, number][] = [
      [demo, "xp", "user-1", 1],
      [demo, "xp", "user-1", 2],
      [demo, "xp", "user-2", 1],
      [demo, "energy", "user-1", 1],
      [other, "xp", "user-1", 1],
      [demo, "xp", "user-10", 1],
      [demo, "xp", "é😀", 1],
    ];
    for (const key of keys) expect(get(...key)).toBe(computed(...key));
    expect(computations()).toBe(keys.length);
    const last = keys[keys.length - 1]!;
    expect(get(...last)).toBe(computed(...last));
    expect(computations()).toBe(keys.length);
  });

  it("equals the computed id for any sequence of keys, in a table small enough to collide", () => {
    const key = fc.tuple(fc.constantFrom(demo, other), fc.constantFrom("xp", "energy", "coins"), fc.string({ unit: "grapheme", minLength: 1, maxLength: 12 }), fc.nat(2 ** 31 - 1));
    fc.assert(
      // size "max": at fast-check's default size the array stops at 12 keys whatever its maxLength.
      fc.property(fc.array(key, { minLength: 1, maxLength: 60, size: "max" }), (keys) => {
        const { get } = counted(8);
        // Each key twice, interleaved, so that hits, misses and evictions all happen.
        for (const k of [...keys, ...keys.slice().reverse()]) expect(get(...k)).toBe(computed(...k));
      }),
      { numRuns: 300 },
    );
  });

  it("holds as many keys as a set has ways, whatever their slots would have been, and then replaces the oldest", () => {
    // A table of eight slots is one set of eight ways: every key lands in it.
    const { get, computations } = counted(8);
    const key = (n: number): [string, string, string, number] => [demo, "xp", `user-${n}`, n % 3];
    for (let n = 0; n < 8; n++) get(...key(n));
    for (let n = 0; n < 8; n++) expect(get(...key(n))).toBe(computed(...key(n)));
    expect(computations()).toBe(8); // all eight remembered: none evicted another
    get(...key(8)); // a ninth key takes the oldest slot, key 0's
    expect(computations()).toBe(9);
    for (let n = 1; n <= 8; n++) expect(get(...key(n))).toBe(computed(...key(n)));
    expect(computations()).toBe(9);
    expect(get(...key(0))).toBe(computed(...key(0))); // key 0 was the one dropped: computed again
    expect(computations()).toBe(10);
  });

  it("with 0 slots remembers nothing", () => {
    const { get, computations } = counted(0);
    get(demo, "xp", "user-1", 1);
    get(demo, "xp", "user-1", 1);
    expect(computations()).toBe(2);
  });

  it("takes 0 or a power of two up to 2^24, and refuses anything else", () => {
    for (const ok of [0, 1, 2, 1024, 2 ** 24]) expect(isAwardIdSlots(ok)).toBe(true);
    for (const bad of [3, 1000, -2, 0.5, 2 ** 25, NaN, Infinity]) {
      expect(isAwardIdSlots(bad)).toBe(false);
      expect(() => new AwardIdTable(bad)).toThrow("power of two");
    }
    // Per slot a 16-byte key and the id's 36 characters; per set of eight, its next way.
    expect(new AwardIdTable(1024).bytes).toBe(1024 * 52 + 1024 / 8);
  });

  it("rememberedAwardId is awardId, the UUIDv5 of the award's name, whether the process remembers ids or not", () => {
    for (const slots of [0, 4, 1 << 18]) {
      setAwardIdSlots(slots);
      for (let seq = 0; seq < 20; seq++) {
        expect(awardId(demo, "user-1", "xp", seq)).toBe(computed(demo, "xp", "user-1", seq));
        expect(rememberedAwardId(demo, "user-1", "xp", seq)).toBe(computed(demo, "xp", "user-1", seq));
        expect(rememberedAwardId(demo, "user-1", "xp", seq)).toBe(computed(demo, "xp", "user-1", seq));
      }
    }
  });

  it("LAUREL_AWARD_IDS sets the process's table (0: none); unset, the default stays", () => {
    try {
      applyAwardIdSlots({ LAUREL_AWARD_IDS: "4" });
      expect(awardIdTableStats().slots).toBe(4);
      applyAwardIdSlots({ LAUREL_AWARD_IDS: "0" });
      expect(awardIdTableStats().slots).toBe(0);
      expect(rememberedAwardId(demo, "user-1", "xp", 3)).toBe(computed(demo, "xp", "user-1", 3));
      setAwardIdSlots(DEFAULT_AWARD_ID_SLOTS);
      applyAwardIdSlots({});
      // README's default: 262144 slots (13 MB).
      expect(awardIdTableStats().slots).toBe(262_144);
    } finally {
      setAwardIdSlots(DEFAULT_AWARD_ID_SLOTS);
    }
  });
});
