import { hash, randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import type { CompiledTenant } from "./config/compiled.js";
import { fail } from "./domain/errors.js";
import { halfSipHash53 } from "./domain/half-siphash.js";
import { checkFixedSettings } from "./store/fixed-settings.js";
import { markRunGroupLists } from "./store/leaderboard-store.js";
import { syncObjectTimes, type ObjectTimes } from "./store/object-times.js";
import { READ_SCRIPTS } from "./store/lua-loader.js";
import { preloadScripts } from "./store/redis-script.js";
import { TenantStore } from "./store/tenant-store.js";

export interface TenantContext {
  tenant: CompiledTenant;
  store: TenantStore;
  times: ObjectTimes;
}

interface KeyEntry {
  /** The key's SHA-256 digest, one character per byte (latin1). */
  digest: string;
  context: TenantContext;
  admin: boolean;
}

/** Equal-length strings compared in time that does not depend on where they differ. */
function constantTimeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/**
 * The tenants of this process and the keys that reach them. Keys are held only as SHA-256
 * digests. A presented key is hashed, looked up by digest (a timing difference there reveals
 * nothing about any key: the digest cannot be inverted), and the digest is then compared in
 * constant time. An API key never opens admin routes, nor an admin key application routes.
 *
 * A key that passed that check once is known afterwards by its tag: a keyed PRF of the presented
 * text (HalfSipHash under a secret drawn at start, never stored or sent). The metering read spent
 * ~7k of its ~60k instructions on the digest and its check (OpenSSL's binding, the algorithm
 * name's normalisation, the comparison), the tag costs a few hundred. The plaintext is still
 * never kept; a tag reveals nothing without the secret, and a forged key is taken only if its
 * tag equals a verified key's (odds 2^-53 per try, the secret unknown). Only verified keys are
 * remembered, so the memo holds at most one entry per configured key.
 */
export class Tenants {
  private readonly byHash = new Map<string, KeyEntry>();
  private readonly verified = new Map<number, KeyEntry>();
  /** The tag's secret key, two 32-bit words drawn at start. */
  private readonly k0: number;
  private readonly k1: number;
  readonly all: TenantContext[];

  /** Builds the stores, loads every script into Redis and records the config objects' times. */
  static async create(redis: Redis, tenants: CompiledTenant[], now: number): Promise<Tenants> {
    const contexts: TenantContext[] = [];
    for (const [index, tenant] of tenants.entries()) {
      // Before anything is written: a config that would misread the stored data stops here.
      await checkFixedSettings(redis, tenant, index);
      const store = await TenantStore.open(redis, tenant);
      await preloadScripts(redis, store.scripts());
      await markRunGroupLists(redis, tenant, now);
      contexts.push({ tenant, store, times: await syncObjectTimes(redis, tenant, now) });
    }
    // The read scripts are the tenants' shared ones: loaded once, not once per tenant.
    await preloadScripts(redis, READ_SCRIPTS);
    return new Tenants(contexts);
  }

  private constructor(contexts: TenantContext[]) {
    this.all = contexts;
    const secret = randomBytes(8);
    this.k0 = secret.readUInt32LE(0);
    this.k1 = secret.readUInt32LE(4);
    for (const context of this.all) {
      for (const [hashes, admin] of [[context.tenant.apiKeyHashes, false], [context.tenant.adminKeyHashes, true]] as const) {
        for (const key of hashes) {
          const digest = key.toString("latin1");
          this.byHash.set(digest, { digest, context, admin });
        }
      }
    }
  }

  private lookup(apiKey: string, admin: boolean): TenantContext {
    if (apiKey === "" || apiKey.length > 512) fail("UNAUTHORIZED");
    const tag = halfSipHash53(this.k0, this.k1, apiKey);
    let entry = this.verified.get(tag);
    if (entry === undefined) {
      entry = this.verify(apiKey);
      this.verified.set(tag, entry);
    }
    if (entry.admin !== admin) fail("UNAUTHORIZED");
    return entry.context;
  }

  /** The entry of a presented key, by its SHA-256 digest compared in constant time; 401 if none. */
  private verify(apiKey: string): KeyEntry {
    // One-shot digest as a string: ~0.2 µs, against ~1 µs for createHash and a Buffer. latin1, a
    // character per byte, not hex: half the characters for the Map to hash and the comparison to
    // walk (~60 ns less, bench/README.md "The fifteenth stop").
    const digest = hash("sha256", apiKey, "binary"); // "binary" is latin1
    const entry = this.byHash.get(digest);
    if (!entry || !constantTimeEqual(entry.digest, digest)) fail("UNAUTHORIZED");
    return entry;
  }

  authenticate(apiKey: string): TenantContext {
    return this.lookup(apiKey, false);
  }

  authenticateAdmin(apiKey: string): TenantContext {
    return this.lookup(apiKey, true);
  }
}
