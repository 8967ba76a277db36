import type { CompiledLevel } from "../config/compiled.js";

/**
 * The level of a total: the highest level whose threshold the total strictly exceeds
 * (spec, Level: "a user gets the level when their total exceeds it"). Mirrors lua levelIndex.
 * `levels` is ascending by points.
 */
export function levelIndex(levels: readonly { points: number }[], total: number): number {
  let i = 0;
  for (let j = 0; j < levels.length; j++) {
    if (total > levels[j]!.points) i = j + 1;
    else break;
  }
  return i;
}

export function levelOf(levels: readonly CompiledLevel[], total: number): CompiledLevel | null {
  const i = levelIndex(levels, total);
  return i === 0 ? null : levels[i - 1]!;
}
