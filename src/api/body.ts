import type { IValidation } from "typia";
import { fail } from "../domain/errors.js";
import { misspeltAt } from "../domain/spelling.js";

/**
 * JSON body → typed value, or a 400 that names the offending field. Unknown fields are
 * refused (validateEquals): a misspelt `timezone` must not silently drop the user's zone.
 */
export function parseJson(body: string | null): Record<string, unknown> {
  const value = parseJsonValue(body, "a JSON object");
  // Every body of the API but the batch's is an object. Said first, because the validator's
  // message for `[]` named a missing field instead ("body.user must be an object (got nothing)").
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    fail("INVALID_BODY", `body must be a JSON object (got ${Array.isArray(value) ? "an array" : clip(JSON.stringify(value), 60)})`);
  }
  return value as Record<string, unknown>;
}

/** A JSON body that must be an array (POST /admin/v1/metrics/events). */
export function parseJsonArray(body: string | null): unknown[] {
  const value = parseJsonValue(body, "a JSON array");
  if (!Array.isArray(value)) fail("INVALID_BODY", `body must be a JSON array (got ${value !== null && typeof value === "object" ? "an object" : clip(JSON.stringify(value), 60)})`);
  return value;
}

/** The body parsed as JSON, any value; `expected` names what the route takes, for the empty body's message. */
function parseJsonValue(body: string | null, expected: string): unknown {
  if (body === null || body.length === 0) fail("MALFORMED_JSON", `Request body is empty; expected ${expected}`);
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    // A byte order mark before the JSON (some Windows clients write one): RFC 8259 §8.1 lets a
    // parser ignore it, and JSON.parse does not. Looked at only once the parse has failed.
    if (body.charCodeAt(0) !== 0xfeff) return fail("MALFORMED_JSON");
    try {
      value = JSON.parse(body.slice(1));
    } catch {
      return fail("MALFORMED_JSON");
    }
  }
  return value;
}

/**
 * The first `max` UTF-16 units of a text a message quotes, without cutting a character outside
 * the BMP in half: a lone surrogate in a message reached the wire as `\ud83d`, which strict JSON
 * parsers (serde_json) refuse, so the error itself could not be read.
 */
export function clip(text: string, max: number): string {
  if (text.length <= max) return text;
  const last = text.charCodeAt(max - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}

/**
 * A key or id from the request as a 404 quotes it: at most 64 UTF-16 units, a lone surrogate as
 * U+FFFD. The path's keys are not length-checked before the lookup that refuses them (a 20 KB
 * boost id was quoted whole), and a body's string may hold a lone surrogate.
 */
export function quoted(text: string): string {
  return clip(text.toWellFormed(), 64);
}

/** The start of a refused value as the message shows it. */
function preview(value: unknown): string {
  if (value === undefined) return "nothing";
  try {
    const text = JSON.stringify(value);
    return text === undefined ? String(value) : clip(text, 60);
  } catch {
    // A body nested a few thousand deep fits the size limit, and JSON.stringify of it overflows
    // the stack: a 400 that says so, not a 500.
    return Array.isArray(value) ? "a deeply nested array" : "a deeply nested object";
  }
}

const plural = (n: string, noun: string) => `${n} ${noun}${n === "1" ? "" : "s"}`;

/** typia's tags, as a client reads them (a body's message; the config file's keep typia's names). */
const TAG_WORDS: [RegExp, (n: string) => string][] = [
  [/\bArray<>/g, () => "an array"],
  [/\bMinItems<(-?[\d.]+)>/g, (n) => `at least ${plural(n, "item")}`],
  [/\bMaxItems<(-?[\d.]+)>/g, (n) => `at most ${plural(n, "item")}`],
  [/\bMinLength<(-?[\d.]+)>/g, (n) => `at least ${plural(n, "character")}`],
  // JavaScript's length: UTF-16 units, so an emoji outside the BMP counts 2 (user ids alone are
  // counted in code points, by their own check).
  [/\bMaxLength<(-?[\d.]+)>/g, (n) => `at most ${plural(n, "character")} (UTF-16 units: most emoji count 2)`],
  [/\bMinimum<(-?[\d.]+)>/g, (n) => `at least ${n}`],
  [/\bMaximum<(-?[\d.]+)>/g, (n) => `at most ${n}`],
  [/\bnumber & Type<"u?int(32|64)">/g, () => "an integer"],
];

/**
 * A type's own name (UserInput, BatchEvent, typia's `__type` for an inline one) means nothing to
 * a client: "an object". Not a generic's or a tag's name (followed by `<`), nor a quoted literal.
 */
const TYPE_NAME = /"[^"]*"|\b(?:__type|[A-Z][A-Za-z0-9]*)\b(?!<)/g;
/**
 * An array of a plain type, of objects or of string literals, after the tags inside it are words
 * and the type names "an object": "Array<string, at most 512 characters>", "Array<an object>",
 * 'Array<"push" | "email">'.
 */
const ARRAY_OF = /\bArray<(string|number|boolean|an object of strings|an object|"[^"]*"(?: \| "[^"]*")*)(?:, ([^<>]*))?>/g;
/** The plural of each type ARRAY_OF takes. */
const PLURAL: Record<string, string> = { "an object of strings": "objects of strings", "an object": "objects" };

/**
 * ARRAY_OF's words: 'Array<"push" | "email">' is an array of strings (each "email" or "push"), the
 * literals sorted (typia's order differs between the build and the test transform).
 */
function arrayOf(type: string, each: string | undefined): string {
  if (type.startsWith('"')) return `an array of strings (each ${type.split(" | ").sort().join(" or ")})`;
  return `an array of ${PLURAL[type] ?? `${type}s`}${each ? ` (each ${each})` : ""}`;
}

/**
 * typia's expected type, as a client reads it: "Array<> & MinItems<1> & MaxItems<1000>" → "an
 * array, at least 1 item, at most 1000 items"; "(Record<string, string> | null | undefined)" →
 * "an object of strings or null"; "UserInput" → "an object". Undefined is left out of a union: a
 * field that may be absent was sent, so it had to be one of the others.
 */
export function readableExpected(expected: string): string {
  let text = expected.replace(TYPE_NAME, (name) => (name.startsWith('"') ? name : "an object")).replace(/\bRecord<string, string>/g, "an object of strings");
  for (const [pattern, words] of TAG_WORDS) text = text.replace(pattern, (_, n: string) => words(n));
  text = text
    .replace(/ & /g, ", ")
    .replace(ARRAY_OF, (_, type: string, each: string | undefined) => arrayOf(type, each))
    .replace(/ \| undefined\b/g, "")
    .replace(/ \| /g, " or ");
  return enclosedWhole(text) ? text.slice(1, -1) : text;
}

/** Whether the text is one parenthesised group, "(a or b)" but not "(a) or (b)". */
function enclosedWhole(text: string): boolean {
  if (!text.startsWith("(") || !text.endsWith(")")) return false;
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === "(") depth++;
    else if (text[i] === ")" && --depth === 0 && i < text.length - 1) return false;
  }
  return true;
}

/** The longest field path a validation message quotes (describeFailure). */
const MAX_PATH_QUOTED = 200;

export function describeFailure(errors: IValidation.IError[], body?: unknown): string {
  const first = errors[0]!;
  // A field's name is quoted in its path, and a body's key may be of any length: a 60 KB unknown
  // key made a 60 KB message. Cut as the other quotes are (200 UTF-16 units, whole characters).
  const fullPath = first.path.replace(/^\$input/, "body");
  const path = fullPath.length > MAX_PATH_QUOTED ? `${clip(fullPath, MAX_PATH_QUOTED)}…` : fullPath;
  if (first.expected === "undefined") return `${path} is not a known field`;
  const message = `${path} must be ${readableExpected(first.expected)} (got ${preview(first.value)})`;
  if (first.value !== undefined) return message;
  // A field missing beside a key spelt almost like it ({"Now": ...}): named (domain/spelling.ts).
  const misspelt = misspeltAt(body, first.path);
  return misspelt === null ? message : `${message}; ${JSON.stringify(misspelt)} beside it is not a known field`;
}

export function validated<T>(value: unknown, validate: (input: unknown) => IValidation<T>): T {
  const result = validate(value);
  if (!result.success) {
    // A number too large for a double (1e400) parses as Infinity: where a number belongs, a
    // semantic error (422), as the event's value is; JSON can hold no other non-finite number.
    const first = result.errors[0]!;
    if (typeof first.value === "number" && !Number.isFinite(first.value) && first.expected.includes("number")) {
      fail("INVALID_VALUE", `${first.path.replace(/^\$input/, "body")} must be a finite number (got ${first.value})`);
    }
    fail("INVALID_BODY", describeFailure(result.errors, value));
  }
  return result.data;
}

/** Control characters (C0, DEL, C1) and lone surrogates are refused in ids and keys. */
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

export function isCleanText(text: string): boolean {
  return !CONTROL.test(text) && text.isWellFormed();
}

/** What an unclean text (isCleanText false) holds, as a message says it. */
export function uncleanPart(text: string): string {
  return CONTROL.test(text) ? "control characters" : "a lone surrogate (not valid Unicode)";
}
