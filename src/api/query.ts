import { fail } from "../domain/errors.js";

/**
 * Integer query parameter with a default and inclusive bounds: not an integer → 400,
 * outside the bounds → 422 (the rule for `awards`, applied to every bounded parameter).
 */
export function intParam(query: URLSearchParams, name: string, fallback: number, min: number, max: number): number {
  const raw = query.get(name);
  if (raw === null || raw === "") return fallback;
  if (!/^-?\d{1,12}$/.test(raw)) fail("INVALID_QUERY", `${name} must be an integer`);
  const value = Number(raw);
  if (value < min || value > max) fail("OUT_OF_RANGE", `${name} must be between ${min} and ${max}`);
  return value;
}
