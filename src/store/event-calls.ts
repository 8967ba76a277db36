import { randomInt } from "node:crypto";

/**
 * Who sends an event call, and its place among that sender's calls (lua/event-1.lua, step 1).
 *
 * When the connection to Redis drops, ioredis re-sends on the new connection every command that
 * had no reply, and Redis may already have run it. The event script keeps, per user, the writer
 * and the number of the last call it applied, and answers an older or equal number of the same
 * writer without applying it again. This holds because one process's calls go out on one
 * connection in the order of their numbers, ioredis re-sends them in that order ahead of newer
 * ones, and Redis runs a connection's commands in order.
 *
 * The writer is random per process (48 bits: two processes sharing one by chance is ~1 in 10^14
 * per pair); numbers start at 1 and stay exact as doubles far past any process's lifetime.
 */
export const EVENT_WRITER = randomInt(1, 2 ** 48);

let lastCall = 0;

/** The next event call's number: every call, a retry after a zone correction too, takes a new one. */
export function nextEventCall(): number {
  return ++lastCall;
}
