import type { Redis } from "ioredis";
import { loadLua } from "./lua-loader.js";
import { runScript } from "./redis-script.js";
import type { StateSlots } from "./state-slots.js";

const readPlanScript = loadLua("readPlan-1");

/**
 * The steps of lua/readPlan-1.lua: everything one user-scoped read needs from the user's
 * shard, gathered into one script call. Each step method returns the index of its result.
 */
export class ReadPlan {
  private readonly args: (string | number)[] = [];
  private steps = 0;

  /** `slots`: where each state key is in the user's state array (state-slots.ts). */
  constructor(private readonly slots: StateSlots) {}

  private step(...args: (string | number)[]): number {
    this.args.push(...args);
    return this.steps++;
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
    return this.step("Z", key, min, max, limit);
  }

  /** Members with max >= score >= min, descending. */
  revRange(key: string, max: number | string, min: number | string, limit = -1): number {
    return this.step("R", key, max, min, limit);
  }

  /** HMGET of a hash of the user's shard. */
  hash(key: string, fields: readonly string[]): number {
    return this.step("H", key, fields.length, ...fields);
  }

  /**
   * A series' open month from the shard's hash of open months (lua/buckets/open-day.lua): its
   * days ascending (the month's closed days, then the open day), flat as [day, count, change,
   * total, ...]; [] when none.
   */
  openMonth(key: string, field: string): number {
    return this.step("O", key, field);
  }

  /** Runs the plan: null for an unknown user, else one result per step. */
  async run(redis: Redis, userKey: string): Promise<unknown[][] | null> {
    const reply = (await runScript(redis, readPlanScript, [userKey], this.args)) as unknown[];
    return reply[0] === 0 ? null : (reply.slice(1) as unknown[][]);
  }
}
