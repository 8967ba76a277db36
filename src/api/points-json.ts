import type { CompiledTenant } from "../config/compiled.js";
import { levelIndex } from "../domain/levels.js";
import type { PointsChange } from "../domain/outcome.js";
import { awardJson, levelJson, systemHeadJson } from "./wire.js";

/**
 * The `points` map of an event or completion response (MetricEventPointsResponse per system):
 * only systems the request changed; `level` only when the level changed, null when the change
 * left the user below every level (spec: Points summary; trophy-compat §5.5).
 */
export function pointsMapJson(tenant: CompiledTenant, userId: string, changes: PointsChange[]) {
  const out: Record<string, unknown> = {};
  for (const change of changes) {
    const system = tenant.systemByKey.get(change.systemKey)!;
    const entry: Record<string, unknown> = {
      ...systemHeadJson(system),
      total: change.total,
      added: change.added,
      awards: change.awards.map((a) => awardJson(tenant, system, userId, a)),
    };
    const before = levelIndex(system.levels, change.before);
    const after = levelIndex(system.levels, change.total);
    if (before !== after) entry.level = after === 0 ? null : levelJson(system.levels[after - 1]!);
    out[change.systemKey] = entry;
  }
  return out;
}
