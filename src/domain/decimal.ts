/**
 * Metric values are decimals. Laurel keeps them as integers in micro-units (1e-6) so that
 * 0.1 + 0.2 is exactly 0.3 in the TypeScript model and in Lua alike, and so that Redis stores
 * them exactly. Doubles hold integers exactly up to 2^53, which bounds a total to about
 * ±9.007e9 units; Laurel enforces a round ±9e9 (MAX_TOTAL_MICRO) and ±1e9 per event.
 */
export const MICRO = 1_000_000;
/** Largest absolute value accepted for one event, in units. */
export const MAX_EVENT_VALUE = 1e9;
/** Largest absolute metric total, in micro-units (9e9 units). */
export const MAX_TOTAL_MICRO = 9e15;
/** Points totals are integers; Laurel caps any total at this value (well inside 2^53). */
export const MAX_POINTS = 1e15;

/** Units → micro-units, rounding half away from zero at the sixth decimal. */
export function toMicro(value: number): number {
  const scaled = value * MICRO;
  const rounded = Math.round(Math.abs(scaled));
  // Math.round on a scaled double can be one off from the decimal the client wrote
  // (e.g. 1.0000025 * 1e6 = 1000002.4999999999); re-derive from the shortest decimal string.
  const fromString = Number.isInteger(scaled) ? Math.abs(scaled) : microFromString(Math.abs(value));
  const micro = fromString ?? rounded;
  return value < 0 ? -micro : micro;
}

function microFromString(abs: number): number | null {
  const text = abs.toString();
  if (text.includes("e")) return null;
  const [intPart, fracPart = ""] = text.split(".");
  const frac = (fracPart + "0000000").slice(0, 7);
  let micro = Number(intPart) * MICRO + Number(frac.slice(0, 6));
  if (Number(frac[6]) >= 5) micro += 1;
  return micro;
}

/** Micro-units → units, as the JSON number a client expects (3000000 → 3, 300000 → 0.3). */
export function fromMicro(micro: number): number {
  return micro / MICRO;
}

/** floor(a / b) for integers a, b > 0, exact even where the double quotient rounds up. Mirrors lua `idiv`. */
export function floorDiv(a: number, b: number): number {
  let q = Math.floor(a / b);
  if (q * b > a) q -= 1;
  else if ((q + 1) * b <= a) q += 1;
  return q;
}
