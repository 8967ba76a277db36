/**
 * The ranges of the points summary (trophy-compat §2.2 note #21): after the 0..0 range, ten
 * equal-width ranges from 1 up to the highest total rounded up to a power of ten, at least 10
 * (highest 0..10 → 1-1 ... 10-10; highest 1000 → 1-100 ... 901-1000; 1001 → 1-1000 ...):
 * rangesOfTop(histogramTop(highest)). Bounds are inclusive. Integer arithmetic only: a float
 * log10 misplaces exact powers of ten. Two steps, because a summary asks Redis for the ranges
 * of the top it last found (src/api/points-summary.ts) and compares tops, not ranges.
 */

/** The end of the last range for a highest total: the least power of ten at or above it, at least 10. */
export function histogramTop(highest: number): number {
  let top = 10;
  while (top < highest) top *= 10;
  return top;
}

/** The ten ranges up to `top` (a histogramTop). */
export function rangesOfTop(top: number): [number, number][] {
  const width = top / 10;
  return Array.from({ length: 10 }, (_, i) => [i * width + 1, (i + 1) * width]);
}
