import { createHash } from "node:crypto";
import { MAX_POINTS, toMicro } from "../domain/decimal.js";
import { stableId, tenantNamespace } from "../domain/ids.js";
import type { ApiKeyConfig, ConfigFile, TenantConfig } from "./types.js";
import type {
  CompiledAchievement,
  CompiledLevel,
  CompiledMetric,
  CompiledStreak,
  CompiledSystem,
  CompiledTenant,
  CompiledTrigger,
} from "./compiled.js";

/** A semantic error in an otherwise well-typed file; `path` uses typia's `$input...` notation. */
export class ConfigError extends Error {
  constructor(readonly path: string, message: string) {
    super(`${path}: ${message}`);
  }
}

export function hashApiKey(key: string): Buffer {
  return createHash("sha256").update(key, "utf8").digest();
}

function keyHash(entry: ApiKeyConfig): Buffer {
  return typeof entry === "string" ? hashApiKey(entry) : Buffer.from(entry.sha256, "hex");
}

function unique<T extends { key: string }>(items: T[], path: string): void {
  const seen = new Set<string>();
  items.forEach((item, i) => {
    if (seen.has(item.key)) throw new ConfigError(`${path}[${i}].key`, `duplicate key "${item.key}"`);
    seen.add(item.key);
  });
}

export function compileConfig(file: ConfigFile): CompiledTenant[] {
  const ids = new Set<string>();
  const allKeys = new Map<string, string>();
  return file.tenants.map((tenant, i) => {
    const path = `$input.tenants[${i}]`;
    if (ids.has(tenant.id)) throw new ConfigError(`${path}.id`, `duplicate tenant id "${tenant.id}"`);
    ids.add(tenant.id);
    const compiled = compileTenant(tenant, path);
    // One key must map to one tenant, or a request could not know whose data it reads.
    for (const [kind, hashes] of [["apiKeys", compiled.apiKeyHashes], ["adminKeys", compiled.adminKeyHashes]] as const) {
      hashes.forEach((h, k) => {
        const owner = allKeys.get(h.toString("hex"));
        if (owner !== undefined) throw new ConfigError(`${path}.${kind}[${k}]`, `key already used by ${owner}`);
        allKeys.set(h.toString("hex"), `${tenant.id}.${kind}`);
      });
    }
    return compiled;
  });
}

export function compileTenant(tenant: TenantConfig, path: string): CompiledTenant {
  const ns = tenantNamespace(tenant.id);
  unique(tenant.metrics, `${path}.metrics`);
  const metrics: CompiledMetric[] = tenant.metrics.map((m) => ({
    key: m.key,
    id: stableId(ns, "metric", m.key),
    name: m.name,
    description: m.description ?? null,
    units: m.units ?? null,
  }));
  const metricByKey = new Map(metrics.map((m) => [m.key, m]));
  const requireMetric = (key: string, at: string): void => {
    if (!metricByKey.has(key)) throw new ConfigError(at, `unknown metric "${key}"`);
  };

  const systemsConfig = tenant.points ?? [];
  unique(systemsConfig, `${path}.points`);
  const systems: CompiledSystem[] = systemsConfig.map((s, si) => {
    const sp = `${path}.points[${si}]`;
    unique(s.triggers, `${sp}.triggers`);
    const triggers: CompiledTrigger[] = s.triggers.map((t, ti) => {
      const tp = `${sp}.triggers[${ti}]`;
      if (t.points === 0) throw new ConfigError(`${tp}.points`, "must not be 0");
      const base = { key: t.key, id: stableId(ns, "trigger", `${s.key}/${t.key}`), systemKey: s.key, points: t.points };
      switch (t.type) {
        case "metric": {
          requireMetric(t.metric, `${tp}.metric`);
          const thresholdMicro = toMicro(t.threshold);
          if (thresholdMicro <= 0) throw new ConfigError(`${tp}.threshold`, "must be at least 0.000001");
          return { ...base, type: "metric", metric: t.metric, threshold: t.threshold, thresholdMicro };
        }
        case "user_creation":
          return { ...base, type: "user_creation" };
      }
    });
    const levelsConfig = s.levels ?? [];
    unique(levelsConfig, `${sp}.levels`);
    const levels: CompiledLevel[] = levelsConfig
      .map((l) => ({
        key: l.key,
        id: stableId(ns, "level", `${s.key}/${l.key}`),
        name: l.name,
        description: l.description ?? null,
        badgeUrl: l.badgeUrl ?? null,
        points: l.points,
      }))
      .sort((a, b) => a.points - b.points);
    levels.forEach((l, li) => {
      if (li > 0 && levels[li - 1]!.points === l.points) {
        throw new ConfigError(`${sp}.levels`, `two levels share the threshold ${l.points}`);
      }
    });
    return {
      key: s.key,
      id: stableId(ns, "points", s.key),
      name: s.name,
      description: s.description ?? null,
      badgeUrl: s.badgeUrl ?? null,
      maxPoints: s.maxPoints ?? null,
      cap: s.maxPoints ?? MAX_POINTS,
      triggers,
      levels,
    };
  });

  const achievementsConfig = tenant.achievements ?? [];
  unique(achievementsConfig, `${path}.achievements`);
  const achievements: CompiledAchievement[] = achievementsConfig.map((a, ai) => {
    requireMetric(a.metric, `${path}.achievements[${ai}].metric`);
    return {
      key: a.key,
      id: stableId(ns, "achievement", a.key),
      name: a.name,
      description: a.description ?? null,
      badgeUrl: a.badgeUrl ?? null,
      type: "metric",
      metric: a.metric,
      value: a.value,
      valueMicro: toMicro(a.value),
    };
  });

  let streak: CompiledStreak | null = null;
  if (tenant.streak) {
    const seen = new Set<string>();
    const streakMetrics = tenant.streak.metrics.map((m, mi) => {
      const at = `${path}.streak.metrics[${mi}].metric`;
      requireMetric(m.metric, at);
      if (seen.has(m.metric)) throw new ConfigError(at, `metric "${m.metric}" listed twice`);
      seen.add(m.metric);
      const thresholdMicro = toMicro(m.threshold);
      if (thresholdMicro <= 0) throw new ConfigError(`${path}.streak.metrics[${mi}].threshold`, "must be at least 0.000001");
      return { metric: m.metric, thresholdMicro };
    });
    streak = { frequency: tenant.streak.frequency, metrics: streakMetrics, mode: tenant.streak.mode ?? "all" };
  }

  return {
    id: tenant.id,
    name: tenant.name ?? tenant.id,
    ns,
    shards: tenant.shards ?? 16,
    apiKeyHashes: tenant.apiKeys.map(keyHash),
    adminKeyHashes: tenant.adminKeys.map(keyHash),
    metrics,
    metricByKey,
    systems,
    systemByKey: new Map(systems.map((s) => [s.key, s])),
    achievements,
    achievementByKey: new Map(achievements.map((a) => [a.key, a])),
    streak,
  };
}
