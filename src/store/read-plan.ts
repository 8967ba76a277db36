import type { Redis } from "ioredis";
import { loadLua } from "./lua-loader.js";
import { runScript } from "./redis-script.js";
import type { StateSlots } from "./state-slots.js";

const readPlanScript = loadLua("readPlan-1");

/**
 * The steps of lua/readPlan-1.lua: everything one user-scoped read needs from the user's
 * shard, gathered into one script call. Each step method returns the index of its result.
 * A step that reads a key passes it in KEYS (after the user's hash), not in ARGV: Redis Cluster
 * routes and checks a script by its declared keys, every one of the user's slot.
 */
export class ReadPlan {
  private readonly args: (string | number)[] = [];
  /** The keys the steps read, in the steps' order (KEYS[2..]). */
  private readonly keys: string[] = [];
  private steps = 0;

  /** `slots`: where each state key is in the user's state array (state-slots.ts). */
  constructor(private readonly slots: StateSlots) {}

  private step(...args: (string | number)[]): number {
    this.args.push(...args);
    return this.steps++;
  }

  /** A step that reads `key` (taken by the script from KEYS, in order). */
  private keyStep(key: string, ...args: (string | number)[]): number {
    this.keys.push(key);
    return this.step(...args);
  }

  /** Keys of the hot state `s`; a missing key reads as null. */
  state(keys: readonly string[]): number {
    return this.step("S", keys.length, ...this.slots.readArgs(keys));
  }

  /** Fields of the user hash; a missing field reads as null. */
  fields(fields: readonly string[]): number {
    return this.step("F", fields.length, ...fields);
  }

  /** Members with min <= score <= max, ascending; limit -1 = all. Bounds as ZRANGEBYSCORE takes them. */
  range(key: string, min: number | string, max: number | string, limit = -1): number {
    return this.keyStep(key, "Z", min, max, limit);
  }

  /** Members with max >= score >= min, descending. */
  revRange(key: string, max: number | string, min: number | string, limit = -1): number {
    return this.keyStep(key, "R", max, min, limit);
  }

  /** HMGET of a hash of the user's shard. */
  hash(key: string, fields: readonly string[]): number {
    return this.keyStep(key, "H", fields.length, ...fields);
  }

  /**
   * A series' open month from the shard's hash of open months (lua/buckets/open-day.lua): its
   * days ascending (the month's closed days, then the open day), flat as [day, count, change,
   * total, ...]; [] when none.
   */
  openMonth(key: string, field: string): number {
    return this.keyStep(key, "O", field);
  }

  /** Runs the plan: null for an unknown user, else one result per step. */
  async run(redis: Redis, userKey: string): Promise<unknown[][] | null> {
    const reply = (await runScript(redis, readPlanScript, [userKey, ...this.keys], this.args)) as unknown[];
    return reply[0] === 0 ? null : (reply.slice(1) as unknown[][]);
  }
}
