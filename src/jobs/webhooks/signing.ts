import { Buffer } from "node:buffer"; // not the global, an accessor (see store/redis-script.ts)
import { createHmac } from "node:crypto";

/**
 * Webhook signatures. Every delivery carries both:
 *
 * - `X-Trophy-Signature` (trophy-compat §5.8): base64 HMAC-SHA256 of the raw body, keyed with
 *   the secret string as written (UTF-8), so a receiver written for the hosted service verifies
 *   Laurel's deliveries unchanged. With several secrets (rotation), the first one signs.
 * - Standard Webhooks (https://www.standardwebhooks.com): `webhook-id` (the event id, the same
 *   on every attempt), `webhook-timestamp` (Unix seconds of the attempt, wall clock) and
 *   `webhook-signature`: `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`, one per active
 *   secret, space-separated. A secret `whsec_<base64>` is keyed with its base64-decoded bytes,
 *   as the Standard Webhooks libraries do; any other secret with its UTF-8 bytes.
 */
export function standardKey(secret: string): Buffer {
  return secret.startsWith("whsec_") ? Buffer.from(secret.slice(6), "base64") : Buffer.from(secret, "utf8");
}

export function trophySignature(body: string, secret: string): string {
  return createHmac("sha256", Buffer.from(secret, "utf8")).update(body, "utf8").digest("base64");
}

export function standardSignature(id: string, timestamp: number, body: string, secrets: readonly string[]): string {
  return secrets.map((secret) => `v1,${createHmac("sha256", standardKey(secret)).update(`${id}.${timestamp}.${body}`, "utf8").digest("base64")}`).join(" ");
}

/** The headers of one delivery attempt. */
export function signedHeaders(id: string, body: string, secrets: readonly string[], nowMs: number): Record<string, string> {
  const timestamp = Math.floor(nowMs / 1000);
  return {
    "content-type": "application/json",
    "user-agent": "Laurel-Webhooks/1",
    "x-trophy-signature": trophySignature(body, secrets[0]!),
    "webhook-id": id,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": standardSignature(id, timestamp, body, secrets),
  };
}
