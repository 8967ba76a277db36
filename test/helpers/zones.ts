import fc from "fast-check";

/**
 * Other names of the property tests' zones, all in tzdata's list (src/domain/zone-names.ts): the
 * handler stores a link as sent (zoneSpelling, src/domain/periods.ts), so "US/Eastern" after
 * "America/New_York" is a change of the zone's name with the same calendar.
 */
const LINKS: Record<string, readonly string[]> = {
  UTC: ["Etc/UTC", "Zulu", "Universal"],
  "Asia/Kolkata": ["Asia/Calcutta"],
  "Asia/Tokyo": ["Japan"],
  "America/New_York": ["US/Eastern"],
  "America/Denver": ["US/Mountain", "Navajo"],
  "America/St_Johns": ["Canada/Newfoundland"],
  "Europe/London": ["GB"],
  "Australia/Lord_Howe": ["Australia/LHI"],
  "Pacific/Pago_Pago": ["US/Samoa", "Pacific/Samoa"],
};

/** A zone's other spellings a client may send: all lower case, all upper case, its link names. */
export function otherSpellings(zone: string): string[] {
  return [...new Set([zone.toLowerCase(), zone.toUpperCase(), ...(LINKS[zone] ?? [])])].filter((s) => s !== zone);
}

/**
 * The zones of `zones`, one in five sent in another spelling (otherSpellings), so that the path
 * from the zone sent to the one stored (userProfileFields, profileZone) is exercised. Shrinks
 * towards the name as listed.
 */
export function spelled<T extends string | null>(zones: fc.Arbitrary<T>): fc.Arbitrary<T | string> {
  const pick = fc.oneof({ withCrossShrink: true }, { weight: 4, arbitrary: fc.constant(-1) }, { weight: 1, arbitrary: fc.nat(15) });
  return fc.tuple(zones, pick).map(([zone, n]) => {
    if (zone === null || n < 0) return zone;
    const others = otherSpellings(zone);
    return others[n % others.length]!;
  });
}
