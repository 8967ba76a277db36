import { hash as oneShotHash } from "node:crypto";

const sha1 = (data: Buffer): Buffer => oneShotHash("sha1", data, "buffer") as unknown as Buffer;

/**
 * Stable ids (DESIGN: "Stable ids derive from tenant and key (UUIDv5)"). A restart, a second
 * process or a config reload gives every metric, system, trigger, level and achievement the same
 * id, because the id is a pure function of the tenant id and the object's key.
 */

/** The root namespace of Laurel; fixed forever, changing it would change every id. */
const LAUREL_NAMESPACE = "6f1d1a5e-2b7c-5c3e-9a41-5b2f0c7d8e90";

function uuidBytes(uuid: string): Buffer {
  return Buffer.from(uuid.replace(/-/g, ""), "hex");
}

function formatUuid(bytes: Buffer): string {
  const h = bytes.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

// The namespaces in use are few (one per tenant); award ids hash one per award of every reply.
const namespaceBytes = new Map<string, Buffer>();

function cachedUuidBytes(namespace: string): Buffer {
  let bytes = namespaceBytes.get(namespace);
  if (!bytes) namespaceBytes.set(namespace, (bytes = uuidBytes(namespace)));
  return bytes;
}

/**
 * RFC 9562 UUID version 5 (SHA-1, name-based). One-shot `crypto.hash` over namespace + name:
 * ~1.2 µs against ~1.5 µs for a Hash object, and a read renders up to 100 award ids.
 */
export function uuidV5(name: string, namespace: string): string {
  const ns = cachedUuidBytes(namespace);
  const input = Buffer.allocUnsafe(ns.length + Buffer.byteLength(name, "utf8"));
  ns.copy(input);
  input.write(name, ns.length, "utf8");
  const hash = sha1(input);
  const bytes = hash.subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x50;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  return formatUuid(Buffer.from(bytes));
}

export function tenantNamespace(tenantId: string): string {
  return uuidV5(`tenant:${tenantId}`, LAUREL_NAMESPACE);
}

/** The id of a configured object: `kind` is e.g. "metric", `path` its key (or sys/key). */
export function stableId(namespace: string, kind: string, path: string): string {
  return uuidV5(`${kind}:${path}`, namespace);
}

/** Award ids: one per (user, system, sequence number); the sequence lives in the user's state. */
export function awardId(namespace: string, userId: string, systemKey: string, seq: number): string {
  return uuidV5(`award:${systemKey}:${seq}:${userId}`, namespace);
}
