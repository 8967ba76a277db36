import { DateTime, IANAZone } from "luxon";
import { IANA_ZONE_NAMES } from "./zone-names.js";

/**
 * Calendar arithmetic for streaks and daily buckets. Everything is on the user's local
 * calendar (spec: "streaks follow this local clock, including when the user changes zone").
 *
 * A local calendar date is represented by its day index: days since 1970-01-01 of that date,
 * independent of any zone. Periods are integers too:
 *   daily   → the day index;
 *   weekly  → ISO weeks (Monday to Sunday): floor((day + 3) / 7), week 0 starts Mon 1969-12-29;
 *   monthly → (year - 1970) * 12 + (month - 1).
 * Integers compare and subtract cheaply in Lua, and no DST rule can make a day 23 or 25 hours
 * long here: a DST change moves the offset, and the offset only decides which date "now" is.
 */
export type Frequency = "daily" | "weekly" | "monthly";

const DAY_MS = 86_400_000;
const zoneCache = new Map<string, IANAZone | null>();

/**
 * The IANA zone for a name, or null when the name is unknown. Cached: zone construction is slow.
 * Names are matched in any letter case (as Intl does); the zone is named in IANA's spelling
 * (zoneSpelling), which is what Laurel stores and shows.
 */
export function zoneFor(name: string): IANAZone | null {
  let zone = zoneCache.get(name);
  if (zone === undefined) {
    zone = name.length <= 64 && IANAZone.isValidZone(name) ? IANAZone.create(zoneSpelling(name)) : null;
    if (zoneCache.size > 10_000) zoneCache.clear();
    zoneCache.set(name, zone);
  }
  return zone;
}

let namesByLowerCase: Map<string, string> | null = null;

/** IANA_ZONE_NAMES by lower case, built at first use. */
const ianaNamesByLowerCase = (): Map<string, string> => (namesByLowerCase ??= new Map(IANA_ZONE_NAMES.map((n) => [n.toLowerCase(), n])));

/**
 * IANA's spelling of a valid zone name sent in any letter case: "utc" → "UTC", "asia/kolkata" →
 * "Asia/Kolkata", "us/eastern" → "US/Eastern" (a link keeps its own name: the user chose it, and
 * it means the same zone). A name the list does not hold keeps ICU's spelling when ICU resolves
 * it to the same name, else the name as sent.
 */
function zoneSpelling(name: string): string {
  const listed = ianaNamesByLowerCase().get(name.toLowerCase());
  if (listed !== undefined) return listed;
  const resolved = new Intl.DateTimeFormat("en-US", { timeZone: name }).resolvedOptions().timeZone;
  return resolved.toLowerCase() === name.toLowerCase() ? resolved : name;
}

/** IANA_ZONE_NAMES as spelled there. */
const IANA_NAMES = new Set(IANA_ZONE_NAMES);

/**
 * IANA's areas: every zone IANA adds is named Area/Location in one of them (tzdata's
 * theory.html), so a name newer than IANA_ZONE_NAMES has this form too.
 */
const IANA_AREAS = new Set(["africa", "america", "antarctica", "arctic", "asia", "atlantic", "australia", "europe", "indian", "pacific", "etc"]);

/**
 * The name to store and show for a zone sent by a client (zoneFor), or null when it is not an
 * IANA name. ICU knows more names than IANA: its legacy three-letter ids, each one place for an
 * abbreviation that is several or another ("BST" is Asia/Dhaka to it, not London's summer time;
 * "IST" Asia/Kolkata, not Ireland or Israel; "CST" America/Chicago, not China; "ART" Africa/Cairo),
 * SystemV/* and links IANA has dropped (US/Pacific-New). Taken, they ran a user's streak on
 * another place's calendar without a word, so a name the list does not hold is taken only in an
 * IANA area. zoneFor stays lenient: zones stored before this check still read as they did.
 */
export function zoneName(name: string): string | null {
  const zone = zoneFor(name);
  if (zone === null) return null;
  // zoneFor's cached zone is named in the list's spelling when the list holds the name: one Set
  // lookup an event, no case folding. The area check runs for the rare names it does not hold.
  const spelled = zone.name;
  if (IANA_NAMES.has(spelled)) return spelled;
  const slash = spelled.indexOf("/");
  return slash > 0 && IANA_AREAS.has(spelled.slice(0, slash).toLowerCase()) ? spelled : null;
}

const QUARTER_HOUR_MS = 900_000;

/**
 * A cache keyed by a zone name and an integer: a map per zone of maps by number, so that a
 * lookup builds no key string. A `${zone}|${n}` key cost a concatenation, a number's text and
 * the new string's hash on every call, three calls per event (bench/README.md, "The sixteenth
 * stop"). Cleared whole past `max` entries, as the string-keyed caches were.
 */
export class ZoneNumberCache {
  private readonly byZone = new Map<string, Map<number, number>>();
  private size = 0;
  constructor(private readonly max: number) {}

  get(zoneName: string, n: number): number | undefined {
    return this.byZone.get(zoneName)?.get(n);
  }

  set(zoneName: string, n: number, value: number): void {
    if (this.size >= this.max) {
      this.byZone.clear();
      this.size = 0;
    }
    let byNumber = this.byZone.get(zoneName);
    if (byNumber === undefined) this.byZone.set(zoneName, (byNumber = new Map()));
    byNumber.set(n, value);
    this.size++;
  }
}

const offsetCache = new ZoneNumberCache(100_000);

/**
 * A zone's UTC offset (minutes) at an instant. luxon's lookup formats a date through Intl
 * (several µs, the largest Node cost per event in the first bench); offsets change on the quarter
 * hour nearly always (DST and zone changes happen at such instants), so they are cached per
 * quarter hour. Not always: Newfoundland changed at 00:01 local from 1987 to 2011, so the quarter
 * hour holding such a change has two offsets (its first minute one, the rest the other, and the
 * local date differs across a change that sets the clock back over midnight). A quarter hour whose
 * first and last millisecond disagree is cached as NaN: its instants are each looked up.
 */
function offsetMinutes(zoneName: string, ms: number): number {
  const bucket = Math.floor(ms / QUARTER_HOUR_MS);
  let offset = offsetCache.get(zoneName, bucket);
  if (offset === undefined) {
    const zone = zoneFor(zoneName);
    if (zone === null) offset = 0;
    else {
      const first = zone.offset(bucket * QUARTER_HOUR_MS);
      offset = zone.offset((bucket + 1) * QUARTER_HOUR_MS - 1) === first ? first : NaN;
    }
    offsetCache.set(zoneName, bucket, offset);
  }
  // NaN only for a quarter hour with a change inside it (rare, historical): the exact offset.
  return offset === offset ? offset : zoneFor(zoneName)!.offset(ms);
}

/** Day index of the local date of instant `ms` in `zone` (defaults to UTC for unknown zones). */
export function localDayIndex(ms: number, zoneName: string): number {
  return Math.floor((ms + offsetMinutes(zoneName, ms) * 60_000) / DAY_MS);
}

/** Civil date of a day index: proleptic Gregorian, via the UTC calendar (no zone involved). */
export function dayToDate(day: number): { y: number; m: number; d: number } {
  const date = new Date(day * DAY_MS);
  return { y: date.getUTCFullYear(), m: date.getUTCMonth() + 1, d: date.getUTCDate() };
}

export function dateToDay(y: number, m: number, d: number): number {
  // setUTCFullYear, not Date.UTC: Date.UTC reads years 0-99 as 1900-1999 (wrapped accepts year 1).
  const date = new Date(0);
  date.setUTCFullYear(y, m - 1, d);
  return Math.floor(date.getTime() / DAY_MS);
}

const dayTexts = new Map<number, string>();

/** YYYY-MM-DD of a day index; cached (every event response formats three or four days). */
export function formatDay(day: number): string {
  let text = dayTexts.get(day);
  if (text === undefined) {
    text = new Date(day * DAY_MS).toISOString().slice(0, 10);
    if (dayTexts.size > 100_000) dayTexts.clear();
    dayTexts.set(day, text);
  }
  return text;
}

/** Parses YYYY-MM-DD strictly (a real calendar date) to a day index, or null. */
export function parseDay(text: string): number | null {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  if (!match) return null;
  const [y, m, d] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const day = dateToDay(y, m, d);
  const back = dayToDate(day);
  return back.y === y && back.m === m && back.d === d ? day : null;
}

export function periodOfDay(day: number, frequency: Frequency): number {
  switch (frequency) {
    case "daily":
      return day;
    case "weekly":
      return Math.floor((day + 3) / 7);
    case "monthly": {
      const { y, m } = dayToDate(day);
      return (y - 1970) * 12 + (m - 1);
    }
  }
}

/** First day index of a period. */
export function periodStartDay(period: number, frequency: Frequency): number {
  switch (frequency) {
    case "daily":
      return period;
    case "weekly":
      return period * 7 - 3;
    case "monthly":
      return dateToDay(1970 + Math.floor(period / 12), (((period % 12) + 12) % 12) + 1, 1);
  }
}

/** Last day index of a period (inclusive). */
export function periodEndDay(period: number, frequency: Frequency): number {
  return periodStartDay(period + 1, frequency) - 1;
}

const instantCache = new ZoneNumberCache(50_000);
const FREQUENCY_INDEX: Record<Frequency, number> = { daily: 0, weekly: 1, monthly: 2 };

/**
 * The instant (ms) a period begins in a zone: local midnight of its first day. Where a DST
 * change skips midnight, the first instant of that local day. Cached: luxon is slow per call
 * and the same (zone, period) repeats for every user in that zone.
 */
export function periodStartInstant(period: number, frequency: Frequency, zoneName: string): number {
  const key = 4 * period + FREQUENCY_INDEX[frequency];
  let ms = instantCache.get(zoneName, key);
  if (ms === undefined) {
    const day = periodStartDay(period, frequency);
    const { y, m, d } = dayToDate(day);
    const zone = zoneFor(zoneName);
    ms = DateTime.fromObject({ year: y, month: m, day: d }, { zone: zone ?? "UTC" }).toMillis();
    // Where a change sets the clock back across midnight (Havana and the Azores at the end of DST,
    // 01:00 to 00:00; Casey, Vostok: offsets lowered), local midnight happens twice and luxon
    // gives the second; the day began at the first, under the offset before the change (an event
    // then is dated that day: localDayIndex). Stepped back while the offset just before the
    // instant also puts midnight earlier (was: a deadline on such a day an hour late, or three).
    if (zone !== null) {
      for (let guard = 0; guard < 4; guard++) {
        const before = zone.offset(ms - 1);
        const earlier = day * DAY_MS - before * 60_000;
        if (!(earlier < ms) || zone.offset(earlier) !== before) break;
        ms = earlier;
      }
    }
    instantCache.set(zoneName, key, ms);
  }
  return ms;
}

/** When a streak last extended in `lastPeriod` is lost: the start of period lastPeriod + 2. */
export function streakDeadline(lastPeriod: number, frequency: Frequency, zoneName: string): number {
  return periodStartInstant(lastPeriod + 2, frequency, zoneName);
}
