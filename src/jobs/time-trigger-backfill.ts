import type { CompiledTenant, CompiledTimeTrigger } from "../config/compiled.js";
import { timeTriggerZset } from "../store/rules.js";
import type { TenantStore } from "../store/tenant-store.js";

/**
 * Schedules on a time trigger the users who existed before it. A user is put on a time trigger's
 * due set ({t:s}:tt:<sys>.<trig>) at first identification (lua/includes/user.lua createUser), so a
 * trigger added to the config of a tenant that already has users would pay only the users created
 * after it. Once per trigger (the mark in {t}:time-scheduled), one SCAN pass over the keyspace
 * finds every user hash of the tenant and adds each user with ZADD NX, first due one interval
 * after the pass began by the service clock: for a trigger just added, one interval after the
 * start that first saw it. A user the trigger already holds keeps their due instant. Nobody is
 * paid for time before the pass (a tenant upgraded from a version without it, a trigger added
 * back): that time cannot be told from time before the user existed. Idempotent: a pass cut short
 * runs again at the next start, and two processes passing at once add nobody twice.
 */
const SCAN_COUNT = 1000;

function timeTriggersOf(tenant: CompiledTenant): CompiledTimeTrigger[] {
  return tenant.systems.flatMap((s) => s.triggers.filter((t): t is CompiledTimeTrigger => t.type === "time"));
}

/**
 * Runs the pass for every time trigger of the tenant not marked done; returns the users added.
 * `now` is the service clock when the pass began. `stopping` is asked between SCAN pages: a stopping process leaves the rest (unmarked) to the next start.
 */
export async function scheduleExistingUsers(store: TenantStore, now: number, stopping: () => boolean = () => false): Promise<number> {
  const triggers = timeTriggersOf(store.tenant);
  const mark = store.keys.timeScheduled();
  const marked = await forgetRemovedTriggers(store);
  const pending = triggers.filter((t) => !marked.has(timeTriggerZset(t)));
  if (pending.length === 0) return 0;
  let added = 0;
  // `{tenant:` then the shard's digits, then `}:u:` and the user id, compared as bytes: a user id
  // may hold braces and colons, and is kept byte for byte as the zset member.
  const head = Buffer.from(`{${store.tenant.id}:`);
  let cursor = "0";
  do {
    const [next, keys] = await store.redis.scanBuffer(cursor, "MATCH", `{${store.tenant.id}:*}:u:*`, "COUNT", SCAN_COUNT);
    cursor = next.toString();
    const pipeline = store.redis.pipeline();
    let queued = 0;
    for (const key of keys) {
      const user = userOfKey(key, head);
      if (user === null) continue;
      for (const trigger of pending) {
        pipeline.zadd(Buffer.concat([user.prefix, Buffer.from(timeTriggerZset(trigger))]), "NX", now + trigger.intervalMs, user.id);
        queued += 1;
      }
    }
    if (queued > 0) for (const [err, n] of (await pipeline.exec()) ?? []) {
      if (err) throw err;
      added += n as number;
    }
  } while (cursor !== "0" && !stopping());
  if (cursor !== "0") return added;
  await store.redis.hset(mark, ...pending.flatMap((t) => [timeTriggerZset(t), String(Date.now())]));
  return added;
}

/**
 * Drops the marks of the time triggers the config no longer has (every mark, for a tenant with
 * none): a trigger added back gets the pass again, for the users created meanwhile, whom no first
 * identification put on it. Returns the marks kept (due set names).
 */
export async function forgetRemovedTriggers(store: TenantStore): Promise<Set<string>> {
  const mark = store.keys.timeScheduled();
  const sets = new Set(timeTriggersOf(store.tenant).map(timeTriggerZset));
  const marked = Object.keys(await store.redis.hgetall(mark));
  const gone = marked.filter((set) => !sets.has(set));
  if (gone.length > 0) await store.redis.hdel(mark, ...gone);
  return new Set(marked.filter((set) => sets.has(set)));
}

/** The shard prefix `{tenant:shard}:` and the user id of a user hash key, or null for another key. */
function userOfKey(key: Buffer, head: Buffer): { prefix: Buffer; id: Buffer } | null {
  if (!key.subarray(0, head.length).equals(head)) return null;
  let i = head.length;
  while (i < key.length && key[i]! >= 0x30 && key[i]! <= 0x39) i++;
  if (i === head.length || key.toString("latin1", i, i + 4) !== "}:u:" || key.length === i + 4) return null;
  return { prefix: key.subarray(0, i + 2), id: key.subarray(i + 4) };
}
