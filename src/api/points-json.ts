import type { CompiledLevel, CompiledSystem, CompiledTenant } from "../config/compiled.js";
import { awardId } from "../domain/ids.js";
import { levelIndex } from "../domain/levels.js";
import type { AwardRecord, PointsChange } from "../domain/outcome.js";
import { openObject, RawJson, renderedOnce } from "../http/raw-json.js";
import { awardTriggerJson, iso, levelJson, systemHeadJson } from "./wire.js";

// The static parts, rendered once per compiled object (src/http/raw-json.ts says why).
export const systemHeadText = renderedOnce((system: CompiledSystem) => openObject(systemHeadJson(system)));
/** `"key":` and the system's head: a points map entry's static opening. */
const systemEntryText = renderedOnce((system: CompiledSystem) => `${JSON.stringify(system.key)}:${systemHeadText(system)}`);
export const levelText = renderedOnce((level: CompiledLevel) => JSON.stringify(levelJson(level)));
const triggerTexts = new WeakMap<CompiledSystem, Map<string, string>>();

function triggerText(tenant: CompiledTenant, system: CompiledSystem, triggerKey: string): string {
  let texts = triggerTexts.get(system);
  if (!texts) triggerTexts.set(system, (texts = new Map()));
  let text = texts.get(triggerKey);
  if (text === undefined) texts.set(triggerKey, (text = JSON.stringify(awardTriggerJson(tenant, system, triggerKey))));
  return text;
}

/** wire.ts awardJson, as text; `id` is the award's (ids.ts awardId, or award-ids.ts rememberedAwardId for a read). */
export function awardText(tenant: CompiledTenant, system: CompiledSystem, a: AwardRecord, id: string): string {
  return `{"id":"${id}","awarded":${a.awarded},"date":"${iso(a.ms)}","total":${a.total},"trigger":${triggerText(tenant, system, a.triggerKey)}}`;
}

/**
 * The `points` map of an event or completion response (MetricEventPointsResponse per system):
 * only systems the request changed; `level` only when the level changed, null when the change
 * left the user below every level (spec: Points summary; trophy-compat §5.5).
 */
export function pointsMapJson(tenant: CompiledTenant, userId: string, changes: PointsChange[]): RawJson {
  const entries: string[] = [];
  for (const change of changes) {
    const system = tenant.systemByKey.get(change.systemKey)!;
    const awards = change.awards.map((a) => awardText(tenant, system, a, awardId(tenant.ns, userId, system.key, a.seq))).join(",");
    let entry = `${systemEntryText(system)},"total":${change.total},"added":${change.added},"awards":[${awards}]`;
    const before = levelIndex(system.levels, change.before);
    const after = levelIndex(system.levels, change.total);
    if (before !== after) entry += `,"level":${after === 0 ? "null" : levelText(system.levels[after - 1]!)}`;
    entries.push(`${entry}}`);
  }
  return new RawJson(`{${entries.join(",")}}`);
}
