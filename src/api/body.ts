import type { IValidation } from "typia";
import { fail } from "../domain/errors.js";

/**
 * JSON body → typed value, or a 400 that names the offending field. Unknown fields are
 * refused (validateEquals): a misspelt `timezone` must not silently drop the user's zone.
 */
export function parseJson(body: Buffer | null): unknown {
  if (body === null || body.length === 0) fail("MALFORMED_JSON", "Request body is empty; expected a JSON object");
  try {
    return JSON.parse(body.toString("utf8"));
  } catch {
    return fail("MALFORMED_JSON");
  }
}

export function describeFailure(errors: IValidation.IError[]): string {
  const first = errors[0]!;
  const path = first.path.replace(/^\$input/, "body");
  if (first.expected === "undefined") return `${path} is not a known field`;
  const got = first.value === undefined ? "nothing" : JSON.stringify(first.value)?.slice(0, 60);
  return `${path} must be ${first.expected.replace(/ & /g, ", ")} (got ${got})`;
}

export function validated<T>(value: unknown, validate: (input: unknown) => IValidation<T>): T {
  const result = validate(value);
  if (!result.success) fail("INVALID_BODY", describeFailure(result.errors));
  return result.data;
}

/** Control characters (C0, DEL, C1) and lone surrogates are refused in ids and keys. */
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

export function isCleanText(text: string): boolean {
  return !CONTROL.test(text) && text.isWellFormed();
}
