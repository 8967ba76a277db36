import { randomInt } from "node:crypto";

/**
 * Who sends a write that must not apply twice, and its place among that sender's calls: the
 * event script (lua/event-1.lua, step 1) and the admin freeze grant (lua/streakAdmin-3.lua).
 *
 * When the connection to Redis drops, ioredis re-sends on the new connection every command that
 * had no reply, and Redis may already have run it. These scripts keep, per user, the writer and
 * the number of the last such call they applied (state names `we`, `wn`), and answer an older or
 * equal number of the same writer without applying it again. This holds because one process's
 * calls go out on one connection in the order of their numbers, ioredis re-sends them in that
 * order ahead of newer ones, and Redis runs a connection's commands in order.
 *
 * The writer is random per process (48 bits: two processes sharing one by chance is ~1 in 10^14
 * per pair); numbers start at 1 and stay exact as doubles far past any process's lifetime.
 */
export const WRITER_ID = randomInt(1, 2 ** 48);

let lastCall = 0;

/** The next call's number: every call, a retry after a zone correction too, takes a new one. */
export function nextCallNumber(): number {
  return ++lastCall;
}
