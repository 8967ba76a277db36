import { createHash } from "node:crypto";
import type { Redis } from "ioredis";
import type { CompiledTenant } from "../config/compiled.js";
import { TenantKeys } from "./keys.js";

/**
 * `created` and `updated` of configured objects (PointsTriggerResponse requires both as dates,
 * trophy-compat §3.6). Config files carry no timestamps, so Laurel records, per object id, when it
 * first saw the object and when its definition last changed, in {t}:meta. A restart with the same
 * file changes neither; editing a trigger moves its `updated`.
 */
export class ObjectTimes {
  constructor(private readonly times: Map<string, { created: string; updated: string }>) {}

  get(id: string): { created: string; updated: string } {
    return this.times.get(id) ?? { created: new Date(0).toISOString(), updated: new Date(0).toISOString() };
  }
}

function fingerprint(value: unknown): string {
  return createHash("sha1").update(JSON.stringify(value)).digest("hex").slice(0, 16);
}

function definitions(tenant: CompiledTenant): [string, string][] {
  const out: [string, string][] = [];
  for (const m of tenant.metrics) out.push([m.id, fingerprint(m)]);
  for (const s of tenant.systems) {
    out.push([s.id, fingerprint({ ...s, triggers: undefined, levels: undefined })]);
    for (const t of s.triggers) out.push([t.id, fingerprint(t)]);
    for (const l of s.levels) out.push([l.id, fingerprint(l)]);
  }
  for (const a of tenant.achievements) out.push([a.id, fingerprint(a)]);
  return out;
}

export async function syncObjectTimes(redis: Redis, tenant: CompiledTenant, now: number): Promise<ObjectTimes> {
  const key = new TenantKeys(tenant.id).meta();
  const stored = await redis.hgetall(key);
  const times = new Map<string, { created: string; updated: string }>();
  const writes: string[] = [];
  for (const [id, print] of definitions(tenant)) {
    const [created, updated, oldPrint] = (stored[id] ?? "").split("|");
    let c = Number(created);
    let u = Number(updated);
    if (!stored[id]) {
      c = now;
      u = now;
    } else if (oldPrint !== print) {
      u = now;
    }
    if (!stored[id] || oldPrint !== print) writes.push(id, `${c}|${u}|${print}`);
    times.set(id, { created: new Date(c).toISOString(), updated: new Date(u).toISOString() });
  }
  if (writes.length > 0) await redis.hset(key, ...writes);
  return new ObjectTimes(times);
}
