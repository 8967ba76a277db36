import { randomInt } from "node:crypto";
import type { Redis } from "ioredis";

/**
 * Who sends a write that must not apply twice, and its place among that sender's calls: the
 * event script (lua/event-2.lua, step 1), the admin freeze grant (lua/streakAdmin-9.lua) and the
 * API completion (lua/complete-4.lua, which answers a re-sent completion as the first).
 *
 * When the connection to Redis drops, ioredis re-sends on the new connection every command that
 * had no reply, and Redis may already have run it. These scripts keep, per shard, the number of
 * the last such call each writer applied (the key {t:s}:wr:<writer>, lua/includes/call-order.lua),
 * and answer a call whose number is not above it without applying it again. This holds because
 * a writer is one Redis client: its calls go out on its one connection in the order of their
 * numbers, ioredis re-sends them in that order ahead of newer ones, and Redis runs a
 * connection's commands in order. A writer per process would not do: two clients of one process
 * (two stores, or a test's two services) would interleave one sequence of numbers on two
 * connections, and a call overtaken by a higher number on the other would be taken for re-sent.
 *
 * Only a call that may have run reads the record (redis-script.ts MayHaveRun: the event call is
 * told when ioredis re-sends it); every applied call writes it, and asks for its expiry to be set
 * again about once an hour (expiryDue).
 *
 * The writer is random per client (48 bits: two clients sharing one by chance is ~1 in 10^14
 * per pair); numbers start at 1 and stay exact as doubles far past any process's lifetime.
 */
export class CallOrder {
  readonly writer = randomInt(1, 2 ** 48);
  private lastCall = 0;
  private readonly expirySetAt = new Map<string, number>();

  /** The next call's number: every call, a retry after a zone correction too, takes a new one. */
  next(): number {
    return ++this.lastCall;
  }

  /**
   * Whether a call writing `writerKey` should set its expiry (a day): the first time, and then
   * when the last call that asked did so an hour ago or more (wall clock, not the service's).
   * A record written without it (Redis lost it meanwhile, or that call applied nothing) goes at
   * most an hour without expiry.
   */
  expiryDue(writerKey: string, wallMs: number = Date.now()): boolean {
    const last = this.expirySetAt.get(writerKey);
    if (last !== undefined && wallMs >= last && wallMs - last < EXPIRY_REFRESH_MS) return false;
    this.expirySetAt.set(writerKey, wallMs);
    return true;
  }
}

const EXPIRY_REFRESH_MS = 3_600_000;

const orders = new WeakMap<Redis, CallOrder>();

/** The call order of a Redis client, made on its first guarded call. */
export function callOrderOf(redis: Redis): CallOrder {
  let order = orders.get(redis);
  if (order === undefined) orders.set(redis, (order = new CallOrder()));
  return order;
}
