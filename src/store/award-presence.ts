import { fmix32 } from "../domain/fmix32.js";
import { userIdHash } from "../domain/shards.js";

/**
 * Which (user, points system) pairs this process has seen awards of: what the metering read
 * sends (TenantStore.readUserPoints).
 *
 * A user's award list, once it holds a record, never empties (awards are trimmed to the newest
 * 100, never to none), so for a pair seen here one LRANGE answers the read. For the others the
 * list may be empty, and an empty list alone cannot tell a total of 0 from an unknown user: those
 * reads send an EXISTS of the user's hash with the LRANGE, in the same write, so that the read is
 * one round trip either way; the EXISTS costs the service about as much again as the LRANGE, so it
 * is kept to the pairs this process knows nothing of.
 *
 * One bit per pair in a fixed table for the whole process (2^24 bits, 2 MiB, allocated when the
 * first pair is seen; the pairs of every tenant, each tenant's systems salted apart), set and never
 * cleared: a pair whose bit another pair set by chance reads as seen, and if its list is then
 * empty the read sends the EXISTS after the LRANGE's reply, a second round trip (the only case
 * that takes two). With n pairs seen the chance is about n / 2^24 (0.6% at 100 000, 6% at a
 * million): a shared bit never gives a wrong answer.
 */
const BITS_LOG2 = 24;

export class AwardPresence {
  private bits: Uint8Array | null = null;

  /** The bit of a user (userIdHash) in a system (systemSalt). */
  static index(userHash: number, systemSalt: number): number {
    // Mixed first: FNV-1a's high bits alone are weak.
    return fmix32(userHash ^ systemSalt) >>> (32 - BITS_LOG2);
  }

  has(index: number): boolean {
    return this.bits !== null && (this.bits[index >>> 3]! & (1 << (index & 7))) !== 0;
  }

  add(index: number): void {
    this.bits ??= new Uint8Array(1 << (BITS_LOG2 - 3));
    this.bits[index >>> 3]! |= 1 << (index & 7);
  }
}

/** The process's table: every tenant's stores share it (a worker process that serves no reads allocates none). */
export const processAwardPresence = new AwardPresence();

/**
 * A system's salt: its tenant's id and its key hashed (FNV-1a, as user ids are) and mixed, so that
 * one user's bits in two systems, or two tenants, are unrelated.
 */
export function systemSalt(tenantId: string, systemKey: string): number {
  return fmix32(userIdHash(`${tenantId}\u0000${systemKey}`) ^ 0x9e3779b9);
}
