import { Buffer } from "node:buffer"; // not the global, an accessor (see store/redis-script.ts)
import { hash as oneShotHash } from "node:crypto";

const sha1Hex = (data: Buffer): string => oneShotHash("sha1", data, "hex") as string;

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

// The namespaces in use are few (one per tenant); award ids hash one per award of every reply.
const namespaceBytes = new Map<string, Buffer>();

function cachedUuidBytes(namespace: string): Buffer {
  let bytes = namespaceBytes.get(namespace);
  if (!bytes) namespaceBytes.set(namespace, (bytes = uuidBytes(namespace)));
  return bytes;
}

// The variant's hex digit: its two top bits are 10 (RFC 9562), the low two come from the hash.
const VARIANT_DIGITS = "89ab";

// The hash input is built in one reused buffer: a Buffer allocated, filled and dropped per id
// made 10 ids cost 7.7 µs against 6.3 (node bench/award-render.mjs; bench/README.md, "The
// thirteenth stop"), and a metering read renders up to 100 ids. Node runs one id at a time.
let scratch = Buffer.allocUnsafe(1024);

/**
 * RFC 9562 UUID version 5 (SHA-1, name-based). One-shot `crypto.hash` over namespace + name, as
 * hex: the first 32 digits are the UUID's bytes, with digit 12 replaced by the version (5) and
 * digit 16 by the variant. Hex output and string cuts cost ~1.2 µs here against ~2.4 for the
 * digest as a Buffer, its bits set and the copy turned to hex; a read renders up to 100 award ids.
 */
export function uuidV5(name: string, namespace: string): string {
  const ns = cachedUuidBytes(namespace);
  // UTF-8 takes at most 3 bytes per UTF-16 unit: room checked without measuring the name.
  const room = ns.length + 3 * name.length;
  if (room > scratch.length) scratch = Buffer.allocUnsafe(2 * room);
  ns.copy(scratch);
  const size = ns.length + scratch.write(name, ns.length, "utf8");
  const h = sha1Hex(scratch.subarray(0, size));
  const variant = VARIANT_DIGITS[parseInt(h[16]!, 16) & 3]!;
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

export function tenantNamespace(tenantId: string): string {
  return uuidV5(`tenant:${tenantId}`, LAUREL_NAMESPACE);
}

/**
 * The id of a configured object: `kind` is e.g. "metric", `path` its key (or sys/key).
 *
 * Returned as the string table's own copy (an object literal's key is internalized; Object.keys
 * gives that copy back). Why: a config id lives as long as its config, and the first time one is
 * used as a property key V8 internalizes it; a string not already in the table is copied there
 * and the original turned into a ThinString, which a young-generation collection does not
 * replace once its holder is old. Node 20's V8 has one ThinString map, whose encoding bit says
 * two-byte, and TurboFan's inline concatenation takes the encoding from the inputs' maps: the
 * event reply's `{"metricId":"${metricId}",...` then came out a two-byte string in some runs and
 * not others, and uWS's `res.end` flattened it to two bytes a character and encoded it to UTF-8
 * the slow way, ~16k instructions an event call more (`String::Utf8Value` 24.0k against 7.8k;
 * the event call's bimodal ~138k / ~155k, bench/README.md, "The fifty-fifth stop"). Found with a
 * scratch probe testing the reply's parts through v8.serialize's string tag: two-byte replies in
 * 2 of 3 `node bench/gc-trace.mjs` runs of the start (every reply from ~5 000 events on, when
 * eventReply is optimised), in none with this change.
 */
export function stableId(namespace: string, kind: string, path: string): string {
  return Object.keys({ [uuidV5(`${kind}:${path}`, namespace)]: 0 })[0]!;
}

/** Award ids: one per (user, system, sequence number); the sequence lives in the user's state. */
export function awardId(namespace: string, userId: string, systemKey: string, seq: number): string {
  return uuidV5(`award:${systemKey}:${seq}:${userId}`, namespace);
}
