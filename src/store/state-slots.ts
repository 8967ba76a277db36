import type { Redis } from "ioredis";
import type { CompiledTenant } from "../config/compiled.js";
import { loadLua } from "./lua-loader.js";
import { runScript } from "./redis-script.js";
import { highWaterField, isFiltered, streakValueField, triggerCountField, userBoostField } from "./rules.js";
import type { TenantKeys } from "./keys.js";
import { boardStateNames } from "./fields.js";

/**
 * The user's hot state `s` is a msgpack ARRAY: each name (lua/includes/state.lua) has a fixed
 * position. cmsgpack decodes and encodes an array of numbers in about half the instructions of
 * a map keyed by names (no key strings to intern, no hash part to grow: bench/README.md), and `s`
 * is decoded and encoded on every event.
 *
 * Positions come from a per-tenant registry in Redis ({t}:slots, lua/registerSlots-1.lua): every
 * process registers the names its config uses at start; a name keeps its index forever, and
 * indexes are never reused. So a config change, a rollback or two versions side by side never
 * move a value: a name only the newer config knows is a position the older process keeps as it
 * found it. A state written before this layout (a map keyed by names) is read as such and written
 * back as an array by the next script that changes it (state.lua); names it holds that no config
 * registered stay in the `_x` slot.
 *
 * Do not delete {t}:slots: without it the positions of every stored state are lost. A running
 * process keeps its map for its whole life, so when Redis loses its data under it, it writes the
 * map back (restoreStateSlots, run by slots-guard.ts) or, when another process registered other
 * positions first, exits.
 */
export const FIXED_STATE_NAMES = ["ct", "up", "cd", "sl", "ss", "sp", "sq", "sb", "sxt", "fz", "fg", "pd", "_x", "sm", "smp", "sqa", "sqk"] as const;

/** State name of the local day a weekly or monthly streak began (lua I_SSD), registered only for those tenants. */
export const STREAK_START_DAY = "ssd";
/** State name of the local day of the last auto-earned freeze (lua I_FGD), registered only for tenants with autoEarn. */
export const LAST_FREEZE_GRANT_DAY = "fgd";

/** Every state name a tenant's rules use, fixed ones first. */
export function stateNames(tenant: CompiledTenant): string[] {
  const names: string[] = [...FIXED_STATE_NAMES];
  // The local day a weekly or monthly streak began (`started`); a daily streak's is its first period.
  if (tenant.streak && tenant.streak.frequency !== "daily") names.push(STREAK_START_DAY);
  if ((tenant.streak?.freezes?.everyDays ?? 0) > 0) names.push(LAST_FREEZE_GRANT_DAY);
  for (const m of tenant.metrics) names.push(`m:${m.key}`, streakValueField(m.key));
  for (const s of tenant.systems) {
    names.push(`p:${s.key}`, `pn:${s.key}`, userBoostField(s.key));
    for (const t of s.triggers) {
      if (t.type !== "metric") continue;
      names.push(highWaterField(t));
      if (isFiltered(t)) names.push(triggerCountField(t));
    }
  }
  for (const a of tenant.achievements) names.push(`a:${a.key}`);
  for (const b of tenant.leaderboards) names.push(...boardStateNames(b.key));
  return names;
}

const registerScript = loadLua("registerSlots-1");
const restoreScript = loadLua("restoreSlots-1");

/** The tenant's registry after registering this config's names: name -> index (1-based). */
export async function registerStateSlots(redis: Redis, keys: TenantKeys, tenant: CompiledTenant): Promise<StateSlots> {
  const flat = (await runScript(redis, registerScript, [keys.slots()], stateNames(tenant))) as string[];
  const slots = new Map<string, number>();
  for (let i = 0; i < flat.length; i += 2) slots.set(flat[i]!, Number(flat[i + 1]));
  return new StateSlots(slots);
}

/**
 * Writes this process's map back into the registry where it has neither the name nor the index
 * (lua/restoreSlots-1.lua): after Redis lost its data, the next process to start then registers
 * against the positions the running ones write. Replies the names the registry holds elsewhere
 * (another process registered first); then nothing was written.
 *
 * The registry is read first, and the script (a write) sent only when it lacks or differs from
 * the map: nearly always it holds it, and a read is served where a write is refused (a replica
 * the address leads to after a failover, whose refusal of a write makes the client reconnect:
 * redis-client.ts).
 */
export async function restoreStateSlots(redis: Redis, keys: TenantKeys, slots: StateSlots): Promise<string[]> {
  const stored = await redis.hgetall(keys.slots());
  let holdsMap = true;
  for (const [name, index] of slots.byName) if (stored[name] !== String(index)) holdsMap = false;
  if (holdsMap) return [];
  const pairs = [...slots.byName].flatMap(([name, index]) => [name, String(index)]);
  return (await runScript(redis, restoreScript, [keys.slots()], pairs)) as string[];
}

export class StateSlots {
  /** The slots a new registry would give `names`, in order (offline tools and tests). */
  static of(names: readonly string[]): StateSlots {
    return new StateSlots(new Map(names.map((name, i) => [name, i + 1])));
  }

  /**
   * The largest registered index: the length of a state array this process writes. The count of
   * names only while the registry has no gap: with one (a name deleted by hand), an array of
   * that count left holes below the positions past it, and cmsgpack packs a table with holes as
   * a map.
   */
  readonly size: number;

  constructor(readonly byName: ReadonlyMap<string, number>) {
    let largest = 0;
    for (const index of byName.values()) if (index > largest) largest = index;
    this.size = largest;
  }

  index(name: string): number {
    const index = this.byName.get(name);
    if (index === undefined) throw new Error(`state name not registered: ${name}`);
    return index;
  }

  /**
   * State keys for the read scripts (lua/includes/state-read.lua): index, name, index, name...
   * A name no config registered (a board a record names after the config dropped it, say) reads
   * as absent: index 0.
   */
  readArgs(names: readonly string[]): (string | number)[] {
    return names.flatMap((name) => [this.byName.get(name) ?? 0, name]);
  }

  /** The map R.slot of the rules literal: every registered name and its index. */
  toRecord(): Record<string, number> {
    return Object.fromEntries(this.byName);
  }
}
