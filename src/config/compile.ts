import { createHash } from "node:crypto";
import { MAX_POINTS, toMicro } from "../domain/decimal.js";
import { stableId, tenantNamespace } from "../domain/ids.js";
import { MAX_EVENT_FILTERED_TRIGGERS } from "../domain/filters.js";
import { parseDay } from "../domain/periods.js";
import { deliveryQueueName, timelineQueueName } from "../jobs/webhooks/keys.js";
import { urlForDisplay } from "../redact.js";
import type { ApiKeyConfig, AttributeFilter, ConfigFile, TenantConfig, WebhookConfig, WebhookEventType } from "./types.js";
import type {
  AttributePairs,
  CompiledAchievement,
  CompiledBoost,
  CompiledLeaderboard,
  CompiledLevel,
  CompiledMetric,
  CompiledStreak,
  CompiledSystem,
  CompiledTenant,
  CompiledTrigger,
  CompiledWebhook,
} from "./compiled.js";

/** A semantic error in an otherwise well-typed file; `path` uses typia's `$input...` notation. */
export class ConfigError extends Error {
  /** `path` "" for the file as a whole (unreadable, not YAML): the message then stands alone. */
  constructor(readonly path: string, message: string) {
    super(path === "" ? message : `${path}: ${message}`);
  }
}

function hashApiKey(key: string): Buffer {
  return createHash("sha256").update(key, "utf8").digest();
}

function keyHash(entry: ApiKeyConfig): Buffer {
  return typeof entry === "string" ? hashApiKey(entry) : Buffer.from(entry.sha256, "hex");
}

/** A list whose entries mean nothing twice (attributes, prerequisites, event types): a repeat is a typo's sign. */
function refuseRepeats(items: readonly string[], path: string): void {
  items.forEach((item, i) => {
    if (items.indexOf(item) !== i) throw new ConfigError(`${path}[${i}]`, `"${item}" is listed twice`);
  });
}

/**
 * An endpoint's `secrets` listing one secret twice: a rotation meant to list the new one and the
 * old one, and signs with one. Named by place only (a credential is never shown).
 */
function refuseRepeatedSecrets(secrets: readonly string[], path: string): void {
  secrets.forEach((secret, k) => {
    const first = secrets.indexOf(secret);
    if (first !== k) throw new ConfigError(`${path}[${k}]`, `the same secret as ${path}[${first}] (not shown: a credential); a rotation lists the new secret and the old one`);
  });
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
  const tenants = file.tenants.map((tenant, i) => {
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
  refuseSharedQueues(tenants);
  return tenants;
}

/**
 * Tenants' BullMQ queues share one prefix, and their names hold the tenant id: a tenant
 * `time-<t>` beside a tenant `<t>` would give the first's webhook delivery queue the name of the
 * second's webhook timeline queue (`laurel-hooks-time-<t>`), so that each tenant's worker took the
 * other's jobs (its deliveries run as ticks, never sent; the other's ticks listed as deliveries by
 * the admin API). Refused whether or not either has endpoints yet: an id is fixed for the life of
 * the tenant's data, and endpoints may be added later. The other queues' names (laurel-time-,
 * laurel-runs-, laurel-streaks-) cannot meet.
 */
function refuseSharedQueues(tenants: readonly CompiledTenant[]): void {
  const timelines = new Map(tenants.map((t) => [timelineQueueName(t.id), t.id]));
  tenants.forEach((tenant, i) => {
    const other = timelines.get(deliveryQueueName(tenant.id));
    if (other !== undefined) {
      throw new ConfigError(`$input.tenants[${i}].id`, `tenant id "${tenant.id}" would share a job queue (${deliveryQueueName(tenant.id)}) with tenant "${other}": ids "<t>" and "time-<t>" cannot both be used`);
    }
  });
}

/** An Instant of the config (a date means midnight UTC) as ms, or a ConfigError. */
function instant(text: string, at: string): number {
  const ms = parseDay(text.slice(0, 10)) === null ? NaN : Date.parse(text.length === 10 ? `${text}T00:00:00Z` : text);
  if (!Number.isFinite(ms)) throw new ConfigError(at, `"${text}" is not a valid instant`);
  return ms;
}

const HOUR_MS = 3_600_000;

export function compileTenant(tenant: TenantConfig, path: string): CompiledTenant {
  const ns = tenantNamespace(tenant.id);
  for (const kind of ["user", "event"] as const) {
    refuseRepeats(tenant.attributes?.[kind] ?? [], `${path}.attributes.${kind}`);
  }
  const userAttributes = new Set(tenant.attributes?.user ?? []);
  const eventAttributes = new Set(tenant.attributes?.event ?? []);
  const pairs = (filter: AttributeFilter | undefined, declared: Set<string>, at: string, kind: string): AttributePairs => {
    const out = Object.entries(filter ?? {});
    for (const [k] of out) {
      if (!declared.has(k)) throw new ConfigError(`${at}.${k}`, `${kind} attribute "${k}" is not declared in attributes.${kind}`);
    }
    return out;
  };
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
      const base = {
        key: t.key,
        id: stableId(ns, "trigger", `${s.key}/${t.key}`),
        systemKey: s.key,
        points: t.points,
        userAttributes: pairs(t.userAttributes, userAttributes, `${tp}.userAttributes`, "user"),
      };
      switch (t.type) {
        case "metric": {
          requireMetric(t.metric, `${tp}.metric`);
          const thresholdMicro = toMicro(t.threshold);
          if (thresholdMicro <= 0) throw new ConfigError(`${tp}.threshold`, "must be at least 0.000001");
          const eventPairs = pairs(t.eventAttributes, eventAttributes, `${tp}.eventAttributes`, "event");
          return { ...base, type: "metric", metric: t.metric, threshold: t.threshold, thresholdMicro, eventAttributes: eventPairs };
        }
        case "user_creation":
          return { ...base, type: "user_creation" };
        case "streak":
          if (!tenant.streak) throw new ConfigError(`${tp}.type`, "a streak trigger needs a streak in the tenant");
          return { ...base, type: "streak", length: t.length };
        case "achievement":
          if (!(tenant.achievements ?? []).some((a) => a.key === t.achievement)) {
            throw new ConfigError(`${tp}.achievement`, `unknown achievement "${t.achievement}"`);
          }
          return { ...base, type: "achievement", achievement: t.achievement };
        case "time":
          return { ...base, type: "time", unit: t.unit, interval: t.interval, intervalMs: t.interval * (t.unit === "hour" ? HOUR_MS : 24 * HOUR_MS) };
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
    const boostsConfig = s.boosts ?? [];
    unique(boostsConfig, `${sp}.boosts`);
    const boosts: CompiledBoost[] = boostsConfig.map((b, bi) => {
      const bp = `${sp}.boosts[${bi}]`;
      const start = instant(b.start, `${bp}.start`);
      const end = b.end === undefined ? null : instant(b.end, `${bp}.end`);
      if (end !== null && end <= start) throw new ConfigError(`${bp}.end`, "must be after start");
      return {
        key: b.key,
        id: stableId(ns, "boost", `${s.key}/${b.key}`),
        systemKey: s.key,
        name: b.name,
        multiplier: b.multiplier,
        start,
        end,
        rounding: b.rounding ?? "down",
        userAttributes: pairs(b.userAttributes, userAttributes, `${bp}.userAttributes`, "user"),
      };
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
      boosts,
    };
  });
  // The event script takes the event-filter results of a metric's triggers as the bits of one double.
  for (const metric of metrics) {
    const filtered = systems.flatMap((s) => s.triggers).filter((t) => t.type === "metric" && t.metric === metric.key && t.eventAttributes.length > 0);
    if (filtered.length > MAX_EVENT_FILTERED_TRIGGERS) {
      throw new ConfigError(`${path}.points`, `metric "${metric.key}" has ${filtered.length} triggers with eventAttributes; at most ${MAX_EVENT_FILTERED_TRIGGERS}`);
    }
  }

  const achievementsConfig = tenant.achievements ?? [];
  unique(achievementsConfig, `${path}.achievements`);
  const achievementKeys = new Set(achievementsConfig.map((a) => a.key));
  const achievements: CompiledAchievement[] = achievementsConfig.map((a, ai) => {
    const ap = `${path}.achievements[${ai}]`;
    const base = {
      key: a.key,
      id: stableId(ns, "achievement", a.key),
      name: a.name,
      description: a.description ?? null,
      badgeUrl: a.badgeUrl ?? null,
      userAttributes: pairs(a.userAttributes, userAttributes, `${ap}.userAttributes`, "user"),
    };
    switch (a.type) {
      case "metric":
        requireMetric(a.metric, `${ap}.metric`);
        return { ...base, type: "metric", metric: a.metric, value: a.value, valueMicro: toMicro(a.value) };
      case "streak":
        if (!tenant.streak) throw new ConfigError(`${ap}.type`, "a streak achievement needs a streak in the tenant");
        return { ...base, type: "streak", length: a.length };
      case "api":
        return { ...base, type: "api" };
      case "composite":
        a.achievements.forEach((k, ki) => {
          if (k === a.key) throw new ConfigError(`${ap}.achievements[${ki}]`, `"${k}" cannot require itself`);
          if (!achievementKeys.has(k)) throw new ConfigError(`${ap}.achievements[${ki}]`, `unknown achievement "${k}"`);
        });
        refuseRepeats(a.achievements, `${ap}.achievements`);
        return { ...base, type: "composite", prerequisites: a.achievements };
    }
  });
  checkCompositeCycles(achievements, `${path}.achievements`);

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
    const f = tenant.streak.freezes;
    if (f && (f.initial ?? 0) > f.max) throw new ConfigError(`${path}.streak.freezes.initial`, "must not exceed max");
    streak = {
      frequency: tenant.streak.frequency,
      metrics: streakMetrics,
      mode: tenant.streak.mode ?? "all",
      freezes: f ? { initial: f.initial ?? 0, max: f.max, everyDays: f.autoEarn?.everyDays ?? 0, amount: f.autoEarn?.amount ?? 0 } : null,
    };
  }

  const leaderboardsConfig = tenant.leaderboards ?? [];
  unique(leaderboardsConfig, `${path}.leaderboards`);
  const leaderboards: CompiledLeaderboard[] = leaderboardsConfig.map((b, bi) => {
    const bp = `${path}.leaderboards[${bi}]`;
    const startDay = parseDay(b.start);
    if (startDay === null) throw new ConfigError(`${bp}.start`, `"${b.start}" is not a date`);
    const endDay = b.end === undefined ? null : parseDay(b.end);
    if (endDay === null && b.end !== undefined) throw new ConfigError(`${bp}.end`, `"${b.end}" is not a date`);
    if (endDay !== null && endDay <= startDay) throw new ConfigError(`${bp}.end`, "must be after start");
    // A field of another kind of board is a mistake to say, not to ignore.
    if (b.rankBy !== "metric" && b.metric !== undefined) throw new ConfigError(`${bp}.metric`, `a rankBy ${b.rankBy} board takes no metric`);
    if (b.rankBy !== "points" && b.points !== undefined) throw new ConfigError(`${bp}.points`, `a rankBy ${b.rankBy} board takes no points system`);
    if (b.rankBy === "metric") {
      if (b.metric === undefined) throw new ConfigError(`${bp}.metric`, "rankBy metric needs a metric");
      requireMetric(b.metric, `${bp}.metric`);
    }
    if (b.rankBy === "points" && (b.points === undefined || !systems.some((s) => s.key === b.points))) {
      throw new ConfigError(`${bp}.points`, `rankBy points needs a points system of this tenant`);
    }
    if (b.rankBy === "streak") {
      if (!tenant.streak) throw new ConfigError(`${bp}.rankBy`, "a streak board needs a streak in the tenant");
      if (b.runUnit !== undefined) throw new ConfigError(`${bp}.runUnit`, "streak boards are perpetual (trophy-compat §5.6)");
    }
    if ((b.runUnit === undefined) !== (b.runInterval === undefined)) {
      throw new ConfigError(`${bp}.runInterval`, "runUnit and runInterval go together");
    }
    if (b.keepFinishedRuns !== undefined && b.runUnit === undefined) {
      throw new ConfigError(`${bp}.keepFinishedRuns`, "a perpetual board has no finished runs to keep (keepFinishedRuns needs runUnit)");
    }
    if (b.breakdownAttribute !== undefined && !userAttributes.has(b.breakdownAttribute)) {
      throw new ConfigError(`${bp}.breakdownAttribute`, `user attribute "${b.breakdownAttribute}" is not declared in attributes.user`);
    }
    return {
      key: b.key,
      id: stableId(ns, "leaderboard", b.key),
      name: b.name,
      description: b.description ?? null,
      rankBy: b.rankBy,
      metric: b.rankBy === "metric" ? b.metric! : null,
      points: b.rankBy === "points" ? b.points! : null,
      startDay,
      endDay,
      runUnit: b.runUnit ?? null,
      runInterval: b.runInterval ?? null,
      maxParticipants: b.maxParticipants ?? 1000,
      keepFinishedRuns: b.keepFinishedRuns ?? null,
      breakdownAttribute: b.breakdownAttribute ?? null,
      ranking: b.ranking ?? "competition",
    };
  });

  return {
    id: tenant.id,
    name: tenant.name ?? tenant.id,
    ns,
    shards: tenant.shards ?? 16,
    idempotencyWindowMs: tenant.idempotencyWindowHours === undefined ? null : tenant.idempotencyWindowHours * 3_600_000,
    apiKeyHashes: tenant.apiKeys.map(keyHash),
    adminKeyHashes: tenant.adminKeys.map(keyHash),
    metrics,
    metricByKey,
    systems,
    systemByKey: new Map(systems.map((s) => [s.key, s])),
    achievements,
    achievementByKey: new Map(achievements.map((a) => [a.key, a])),
    streak,
    userAttributes,
    eventAttributes,
    controlPercent: tenant.experiment?.controlPercent ?? 0,
    leaderboards,
    leaderboardByKey: new Map(leaderboards.map((b) => [b.key, b])),
    // issue 6 (outbound events): begin
    webhooks: compileWebhooks(tenant.webhooks ?? [], `${path}.webhooks`),
    // issue 6: end
  };
}

/** Composite achievements must not depend on themselves through other composites. */
function checkCompositeCycles(achievements: CompiledAchievement[], path: string): void {
  const byKey = new Map(achievements.map((a) => [a.key, a]));
  const state = new Map<string, "visiting" | "done">();
  const visit = (key: string, trail: string[]): void => {
    if (state.get(key) === "done") return;
    if (state.get(key) === "visiting") throw new ConfigError(path, `composite achievements form a cycle: ${[...trail, key].join(" -> ")}`);
    state.set(key, "visiting");
    const a = byKey.get(key)!;
    if (a.type === "composite") a.prerequisites.forEach((p) => visit(p, [...trail, key]));
    state.set(key, "done");
  };
  achievements.forEach((a) => visit(a.key, []));
}

// issue 6 (outbound events): begin
/** The types that can be coalesced: the frequent per-user changes (src/jobs/webhooks/coalesce.ts says how they merge). */
const COALESCIBLE: ReadonlySet<WebhookEventType> = new Set(["points.changed", "leaderboard.rank_changed"]);

/**
 * The Authorization header a URL's userinfo stands for, as curl sends it: `Basic
 * base64(user:password)`, both percent-decoded first (RFC 3986 3.2.1, RFC 7617, UTF-8); null
 * without a userinfo. The compiled endpoint keeps its URL without the userinfo, so neither the
 * request line nor the admin API carries it. Errors never show the userinfo.
 */
function basicAuthorization(url: URL, path: string): string | null {
  if (url.username === "" && url.password === "") return null;
  let user: string;
  let password: string;
  try {
    user = decodeURIComponent(url.username);
    password = decodeURIComponent(url.password);
  } catch {
    throw new ConfigError(path, "the userinfo (user:password@) has a % not followed by two hex digits (not shown: a credential)");
  }
  if (user.includes(":")) throw new ConfigError(path, "the userinfo's user must not hold a colon, encoded or not (RFC 7617; not shown: a credential)");
  return `Basic ${Buffer.from(`${user}:${password}`, "utf8").toString("base64")}`;
}

function compileWebhooks(webhooks: WebhookConfig[], path: string): CompiledWebhook[] {
  unique(webhooks, path);
  return webhooks.map((w, i) => {
    const at = `${path}[${i}]`;
    if ((w.secret === undefined) === (w.secrets === undefined)) throw new ConfigError(`${at}.secret`, "give exactly one of secret and secrets");
    let url: URL;
    try {
      url = new URL(w.url);
    } catch {
      throw new ConfigError(`${at}.url`, `${urlForDisplay(w.url)} is not a URL`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new ConfigError(`${at}.url`, "must be http or https");
    // WHATWG parsing repairs what it can ("http:///x" becomes http://x/): the host must be written.
    if (!/^https?:\/\/[^/?#\s]/i.test(w.url)) throw new ConfigError(`${at}.url`, `${urlForDisplay(w.url)} must be written http(s)://<host>/..., the host right after the //`);
    const secrets = w.secrets ?? [w.secret!];
    secrets.forEach((secret, k) => {
      if (secret.startsWith("whsec_") && !/^[A-Za-z0-9+/]+={0,2}$/.test(secret.slice(6))) {
        throw new ConfigError(w.secrets ? `${at}.secrets[${k}]` : `${at}.secret`, "a whsec_ secret must be followed by base64");
      }
    });
    refuseRepeatedSecrets(secrets, `${at}.secrets`);
    refuseRepeats(w.events, `${at}.events`);
    const events = new Set<string>(w.events);
    const coalesceMs = new Map<string, number>();
    for (const [type, minutes] of Object.entries(w.coalesce ?? {}) as [WebhookEventType, number][]) {
      if (!COALESCIBLE.has(type)) throw new ConfigError(`${at}.coalesce.${type}`, "only points.changed and leaderboard.rank_changed can be coalesced");
      if (!events.has(type)) throw new ConfigError(`${at}.coalesce.${type}`, "the endpoint does not subscribe to this type");
      coalesceMs.set(type, minutes * 60_000);
    }
    const authorization = basicAuthorization(url, `${at}.url`);
    url.username = "";
    url.password = "";
    return { key: w.key, url: url.href, authorization, secrets, events, coalesceMs, timeoutMs: (w.timeoutSeconds ?? 10) * 1000 };
  });
}
// issue 6: end
