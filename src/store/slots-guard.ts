import type { Redis } from "ioredis";
import type { Logger } from "pino";
import type { TenantKeys } from "./keys.js";
import { redisRefusalOf } from "./redis-refusals.js";
import { restoreStateSlots, type StateSlots } from "./state-slots.js";

/** How often a running process writes its state slots back (SlotsGuardOptions.everyMs). */
export const SLOTS_CHECK_MS = 10_000;

/** What the guard needs of a tenant store: its registry's key and the map this process writes by. */
export interface GuardedStore {
  readonly tenant: { readonly id: string };
  readonly keys: TenantKeys;
  readonly slots: StateSlots;
}

export interface SlotsGuardOptions {
  /** The process's main client: its `ready` after the first is a reconnect (a restarted Redis, maybe empty). */
  redis: Redis;
  stores: readonly GuardedStore[];
  logger: Logger;
  /** Called once, after the fatal line, when the registry disagrees: the process's exit. */
  exit: () => void;
  /** Between two periodic checks (tests shorten it). */
  everyMs?: number;
}

/**
 * Keeps the state registry {t}:slots (state-slots.ts) in step with a running process. The
 * process reads its map once, at start, and writes every user by it; when Redis loses its data
 * under it (a restart without AOF, a FLUSHALL, a failover to an empty replica) the registry is
 * gone, and a process started afterwards numbered its config afresh: the users one of them wrote
 * were read by the other at shifted positions (wrong totals, wrong points).
 *
 * So the process writes its map back (lua/restoreSlots-1.lua) whenever its client is ready again
 * (a reconnect, after a restart) and every `everyMs` (a FLUSHALL keeps the connection). When
 * another process registered other positions first, the two cannot both be right about the
 * stored states, and this one stops writing with its own: it logs a fatal line and calls `exit`
 * (a supervisor restarts it, and the start reads the live registry). A check that fails (Redis
 * down, refusing writes) is no conflict: the next ready or tick tries again.
 *
 * Nothing here is on the request path: a check is one read of each tenant's registry (HGETALL),
 * and the script only where the registry lacks the map.
 */
export function guardStateSlots(opts: SlotsGuardOptions): { stop(): void } {
  let stopped = false;
  let running = false;
  let again = false;
  // The last check's write was refused by a read-only replica: the client reconnects on that
  // refusal (redis-client.ts), and a check on each `ready` would refuse and reconnect again, in
  // a loop, while the address leads to an empty replica. The ticks alone check until one passes.
  let onReplica = false;

  const check = async (): Promise<void> => {
    // One check at a time; a trigger during one runs another after it (a reconnect during a
    // check whose call failed must not be lost).
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      do {
        again = false;
        for (const store of opts.stores) {
          if (stopped) return;
          let conflicts: string[];
          try {
            conflicts = await restoreStateSlots(opts.redis, store.keys, store.slots);
          } catch (err) {
            // Redis down or refusing: not a conflict; the next ready or tick retries.
            onReplica = redisRefusalOf(err)?.cause === "read-only";
            break;
          }
          onReplica = false;
          if (conflicts.length > 0 && !stopped) {
            stopped = true;
            stopTriggers();
            const registry = store.keys.slots();
            opts.logger.fatal(
              { tenant: store.tenant.id, registry, conflicts: conflicts.length, names: conflicts.slice(0, 5) },
              `the state registry ${registry} changed under this process (Redis lost its data and another process registered first?); exiting so that a restart reads it`,
            );
            opts.exit();
            return;
          }
        }
      } while (again && !stopped);
    } finally {
      running = false;
    }
  };

  const onReady = (): void => {
    if (!onReplica) void check();
  };
  // Installed after the start's registration, on a client that was ready for it: every `ready`
  // from here on is a reconnect.
  opts.redis.on("ready", onReady);
  const timer = setInterval(() => void check(), opts.everyMs ?? SLOTS_CHECK_MS);
  timer.unref();
  const stopTriggers = (): void => {
    clearInterval(timer);
    opts.redis.off("ready", onReady);
  };

  return {
    stop() {
      stopped = true;
      stopTriggers();
    },
  };
}
