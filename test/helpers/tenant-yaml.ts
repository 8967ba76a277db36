/** A one-tenant config file for a test: the demo keys, then `body` (tenant fields indented 4 spaces). */
export function tenantYaml(tenantId: string, body: string): string {
  return `tenants:\n  - id: ${tenantId}\n    apiKeys: [demo-key]\n    adminKeys: [demo-admin-key]\n${body.replace(/^\n/, "")}`;
}

/** A one-metric tenant with a streak on lessons (threshold 1), `streak` its further streak fields, `rest` more tenant fields before it. */
export function lessonsStreakTenantYaml(tenantId: string, frequency: "daily" | "weekly" | "monthly", streak: string, rest = ""): string {
  return tenantYaml(
    tenantId,
    `
    metrics: [{ key: lessons, name: Lessons }]
${rest}    streak:
      frequency: ${frequency}
      metrics: [{ metric: lessons, threshold: 1 }]
${streak}`,
  );
}

/**
 * The metric lessons and one points system xp ("XP") with `triggers` (YAML flow items); `system`,
 * more of the system's fields (indented 8 spaces: boosts, maxPoints); `rest`, more tenant fields
 * after it (indented 4: achievements). The tenant-file edit tests' shape (config-edits*.test.ts).
 */
export function xpSystemTenantYaml(tenantId: string, triggers: string, system = "", rest = ""): string {
  return tenantYaml(
    tenantId,
    `
    metrics: [{ key: lessons, name: Lessons }]
    points:
      - key: xp
        name: XP
        triggers: [${triggers}]
${system}${rest}`,
  );
}

/** Lessons paying 10 XP, in `shards` shards (one: every record of the tenant in one stream). */
const lessonsXp = (shards: number): string => `
    shards: ${shards}
    metrics: [{ key: lessons, name: Lessons }]
    points:
      - key: xp
        name: XP
        triggers: [{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 10 }]
`;
const LESSONS_XP = lessonsXp(1);

/** The stream worker's tests' tenant; `rest`, more tenant fields (indented 4 spaces). */
export function lessonsXpTenantYaml(tenantId: string, shards = 1, rest = ""): string {
  return tenantYaml(tenantId, lessonsXp(shards) + rest);
}

/** The types an application typically reacts to: rare per event (bench/webhooks.mjs MILESTONES). */
export const MILESTONES = ["points.level_changed", "achievement.completed", "streak.started", "streak.lost", "streak.freeze_consumed"];

/**
 * The webhook selection tests' tenant: one shard (so a stream's length counts every record),
 * lessons paying 10 XP, bronze at 15 (the second lesson moves the level), a first-lesson
 * achievement, a daily streak; with one endpoint at `url` subscribed to `events`, or none.
 */
export function lessonsTenantYaml(tenantId: string, endpoint?: { url: string; events: readonly string[] }): string {
  const webhooks = endpoint ? `    webhooks:\n      - { key: main, url: "${endpoint.url}", secret: "a-test-secret-0123456789", events: [${endpoint.events.join(", ")}] }\n` : "";
  return tenantYaml(
    tenantId,
    `${LESSONS_XP}        levels:
          - { key: bronze, name: Bronze, points: 15 }
    achievements:
      - { key: first-lesson, name: First lesson, type: metric, metric: lessons, value: 1 }
    streak:
      frequency: daily
      metrics: [{ metric: lessons, threshold: 1 }]
${webhooks}`,
  );
}

/** One shard (so its keys are easy to name), a daily lessons streak, and a perpetual streak board. */
export function streakTenantYaml(tenantId: string): string {
  return tenantYaml(
    tenantId,
    `
    shards: 1
    metrics: [{ key: lessons, name: Lessons }]
    streak:
      frequency: daily
      metrics: [{ metric: lessons, threshold: 1 }]
    leaderboards:
      - { key: streaks, name: Streaks, rankBy: streak, start: "2026-01-01" }
`,
  );
}
