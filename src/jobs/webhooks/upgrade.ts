import type { Redis } from "ioredis";
import type { CompiledTenant } from "../../config/compiled.js";
import { TenantKeys } from "../../store/keys.js";
import { loadLua } from "../../store/lua-loader.js";
import { runScript } from "../../store/redis-script.js";
import { WEBHOOK_GROUP } from "./keys.js";
import { tenantWantedParts } from "./kinds.js";

const upgradeScript = loadLua("hookUpgrade-3");

/** The field of {t:s}:xw that holds the cutover while the upgrade runs. */
export const HOOK_CUTOVER_FIELD = "webhooks:cutover";

/**
 * Upgrade from the version whose webhook consumer group read the shard streams ({t:s}:x)
 * themselves: on each shard where that group still exists, the records it had not finished are
 * moved to the hook stream, selected for what the tenant's endpoints want, and the group is
 * removed (lua/hookUpgrade-3.lua; README: Operations). Webhooks.start runs it after the hook
 * groups exist and before the process writes anything. Returns the records appended.
 */
export async function moveShardStreamGroup(redis: Redis, tenant: CompiledTenant, batch = 500): Promise<number> {
  const keys = new TenantKeys(tenant.id);
  const wanted = tenantWantedParts(tenant);
  let appended = 0;
  for (let shard = 0; shard < tenant.shards; shard++) {
    // Checked here first: once upgraded, the script is never loaded (each library loaded stays on
    // the Lua heap that Redis's collector walks on every call; README, Architecture).
    const groups = (await redis.xinfo("GROUPS", keys.stream(shard)).catch(() => [])) as unknown[][];
    if (!groups.some((g) => g[1] === WEBHOOK_GROUP)) continue;
    for (;;) {
      const [, added, done] = (await runScript(redis, upgradeScript, [keys.stream(shard), keys.hookStream(shard), keys.watermarks(shard)], [WEBHOOK_GROUP, batch, ...wanted])) as [number, number, number];
      appended += added;
      if (done === 1) break;
    }
  }
  return appended;
}
