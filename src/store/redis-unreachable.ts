/**
 * ioredis gave up on a command: the connection stayed down through its retries
 * (maxRetriesPerRequest) or was closed for good, or it was on the wire at a drop and no
 * connection came back to send it again on (resend-wait.ts), or it waited for a connection past
 * its bound (offline-wait.ts: through sentinels none of which answers). Whether Redis ran it is
 * unknown. A request answers it 503 (http/router.ts errorAnswer); background work may try again.
 */
export function isRedisUnreachable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  return err.name === "MaxRetriesPerRequestError" || err.name === "ResendAbandonedError" || err.name === "OfflineWaitExpiredError" || err.message === "Connection is closed.";
}
