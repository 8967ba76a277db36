import type { IValidation } from "typia";
import { fail } from "../domain/errors.js";

/**
 * JSON body → typed value, or a 400 that names the offending field. Unknown fields are
 * refused (validateEquals): a misspelt `timezone` must not silently drop the user's zone.
 */
export function parseJson(body: string | null): Record<string, unknown> {
  if (body === null || body.length === 0) fail("MALFORMED_JSON", "Request body is empty; expected a JSON object");
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return fail("MALFORMED_JSON");
  }
  // Every body of the API is an object. Said first, because the validator's message for `[]`
  // named a missing field instead ("body.user must be UserInput (got nothing)").
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    fail("INVALID_BODY", `body must be a JSON object (got ${Array.isArray(value) ? "an array" : JSON.stringify(value).slice(0, 60)})`);
  }
  return value as Record<string, unknown>;
}

/** The start of a refused value as the message shows it. */
function preview(value: unknown): string {
  if (value === undefined) return "nothing";
  try {
    return JSON.stringify(value)?.slice(0, 60) ?? String(value);
  } catch {
    // A body nested a few thousand deep fits the size limit, and JSON.stringify of it overflows
    // the stack: a 400 that says so, not a 500.
    return Array.isArray(value) ? "a deeply nested array" : "a deeply nested object";
  }
}

export function describeFailure(errors: IValidation.IError[]): string {
  const first = errors[0]!;
  const path = first.path.replace(/^\$input/, "body");
  if (first.expected === "undefined") return `${path} is not a known field`;
  return `${path} must be ${first.expected.replace(/ & /g, ", ")} (got ${preview(first.value)})`;
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
    fail("INVALID_BODY", describeFailure(result.errors));
  }
  return result.data;
}

/** Control characters (C0, DEL, C1) and lone surrogates are refused in ids and keys. */
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

export function isCleanText(text: string): boolean {
  return !CONTROL.test(text) && text.isWellFormed();
}
