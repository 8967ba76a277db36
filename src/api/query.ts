import { fail } from "../domain/errors.js";
import { dateToDay, parseDay } from "../domain/periods.js";
import type { Query } from "../http/query.js";
import { clip, isCleanText } from "./body.js";
import { checkUserId, failUnknownAttributes } from "./user-input.js";

/**
 * Integer query parameter with a default and inclusive bounds: not an integer → 400,
 * outside the bounds → 422 (the issue's rule for `awards`, applied to every bounded parameter).
 */
export function intParam(query: Query, name: string, fallback: number, min: number, max: number, range?: string): number {
  const raw = query.get(name);
  if (raw === null || raw === "") return fallback;
  // Any well-formed integer is one, however many digits (leading zeros too): a long one is out of
  // range (422), not malformed (400).
  if (!/^-?\d+$/.test(raw)) fail("INVALID_QUERY", `${name} must be an integer`);
  const value = Number(raw);
  // The bounds' text is made only for the error: as a default parameter it was built on every
  // call, two number-to-text conversions per metering read (~0.6k instructions, bench/read-cost.mjs).
  if (value < min || value > max) fail("OUT_OF_RANGE", `${name} must be between ${range ?? `${min} and ${max}`}`);
  return value;
}

/** `true` or `false`; absent or empty → false; anything else → 400 (includeFinished of the boost and board lists). */
export function boolParam(query: Query, name: string): boolean {
  const raw = query.get(name);
  if (raw === null || raw === "" || raw === "false") return false;
  if (raw === "true") return true;
  return fail("INVALID_QUERY", `${name} must be true or false`);
}

/**
 * An optional user id (`userId` of a board page and of the user boost list): absent or empty →
 * null, as an empty value of every other optional parameter is (`run=`, `awards=`); otherwise a
 * well-formed id or 400. (Until 2026-12-05 `userId=` was 400 here and no filter on the webhook
 * deliveries' list.)
 */
export function userIdParam(query: Query, name: string): string | null {
  const raw = query.get(name);
  if (raw === null || raw === "") return null;
  checkUserId(raw, name);
  return raw;
}

/** 0001-01-01, a Monday: the first day whose ISO week, month and year start in a year YYYY can write. */
const FIRST_DAY = dateToDay(1, 1, 1);

/**
 * A required YYYY-MM-DD parameter, under any of `names` (camelCase first; trophy-compat §2.2 #16
 * also shows snake_case), from 0001-01-01 (422 before): the week of 0000-01-01 began in year -1,
 * and a summary dated it "-000001-12".
 */
export function dayParam(query: Query, names: readonly string[]): number {
  const name = names.find((n) => query.has(n));
  if (name === undefined) fail("INVALID_QUERY", `${names[0]} is required (YYYY-MM-DD)`);
  const day = parseDay(query.get(name)!);
  if (day === null) fail("INVALID_QUERY", `${name} must be a calendar date YYYY-MM-DD`);
  if (day < FIRST_DAY) fail("OUT_OF_RANGE", `${name} must be from 0001-01-01`);
  return day;
}

/**
 * One of `values`; absent or empty → `fallback` (null: required → 400; undefined: optional, no
 * value); anything else → 422.
 */
export function enumParam<T extends string, F extends T | null | undefined>(query: Query, name: string, values: readonly T[], fallback: F): T | Exclude<F, null> {
  const raw = query.get(name);
  if (raw === null || raw === "") {
    if (fallback === null) fail("INVALID_QUERY", `${name} is required: ${values.join(", ")}`);
    return fallback as Exclude<F, null>;
  }
  if (!(values as readonly string[]).includes(raw)) fail("OUT_OF_RANGE", `${name} must be one of ${values.join(", ")}`);
  return raw as T;
}

/**
 * `userAttributes=key:value,key2:value2` (trophy-compat §5.3): all pairs must match. A pair
 * without a key, or a key named twice, is malformed (400); a key the tenant does not declare is refused
 * like an unknown attribute of an event (422, "Invalid attribute keys: ..."). An empty value
 * (`plan:`) is the empty string: a user saved with `plan: ""` has it (lua/includes/user.lua keeps
 * that group as any other), and a user without the attribute does not.
 */
export function attributeFilterParam(query: Query, name: string, declared: ReadonlySet<string>): Map<string, string> | null {
  const raw = query.get(name);
  if (raw === null || raw === "") return null;
  const pairs = new Map<string, string>();
  for (const part of raw.split(",")) {
    const colon = part.indexOf(":");
    if (colon <= 0) fail("INVALID_QUERY", `${name} must be key:value pairs separated by commas`);
    const key = part.slice(0, colon);
    const value = part.slice(colon + 1);
    // No stored attribute value holds a control character (user-input.ts checkAttributes): such a
    // filter is malformed (400, as a leaderboard's group is), not a filter that matches nobody.
    if (!isCleanText(value)) fail("INVALID_QUERY", `${name} values must be without control characters`);
    // A user has one value of an attribute: plan:pro,plan:free kept the last pair and counted its users.
    if (pairs.has(key)) fail("INVALID_QUERY", `${name} names the attribute ${clip(key, 64)} more than once`);
    pairs.set(key, value);
  }
  const unknown = [...pairs.keys()].filter((k) => !declared.has(k));
  if (unknown.length > 0) failUnknownAttributes(unknown);
  return pairs;
}

/**
 * Repeated (`ids=a&ids=b`, the SDK's form for a list) or one comma-separated value (`ids=a,b`, the
 * spec's example, and the SDK's form for a string); empty items ignored, duplicates kept once.
 * Repeated values are taken whole, so an id holding a comma can be asked for beside others.
 */
export function listParam(query: Query, name: string, max: number): string[] {
  const values = query.getAll(name);
  const items = new Set<string>();
  for (const item of values.length === 1 ? values[0]!.split(",") : values) if (item !== "") items.add(item);
  if (items.size > max) fail("OUT_OF_RANGE", `${name} takes at most ${max} values`);
  return [...items];
}
