import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";

/**
 * The schema's bounds (src/config/types.ts, README "The tenant file"), each at its edge: the last
 * value taken, and the first one past it refused with the path of the field. A bound moved by one
 * (a key of 65 characters, a 7-character API key, 1025 shards) fails here.
 */

type Tenant = Record<string, any>;

/** A small tenant using every object whose bounds are checked below. */
function baseTenant(): Tenant {
  return {
    id: "bounds",
    apiKeys: ["api-key-1"],
    adminKeys: ["admin-key-1"],
    experiment: { controlPercent: 10 },
    metrics: [
      { key: "m", name: "M" },
      { key: "other", name: "Other" },
    ],
    points: [
      {
        key: "p",
        name: "P",
        triggers: [{ key: "tr", type: "metric", metric: "m", threshold: 1, points: 1 }],
        levels: [{ key: "l", name: "L", points: 5 }],
        boosts: [{ key: "b", name: "B", multiplier: 2, start: "2026-11-28T00:00:00Z" }],
      },
    ],
    streak: { frequency: "daily", metrics: [{ metric: "m", threshold: 1 }], freezes: { initial: 0, max: 100 } },
    leaderboards: [{ key: "board", name: "Board", rankBy: "metric", metric: "m", start: "2026-01-01" }],
    webhooks: [{ key: "w", url: "https://example.com/hook", secret: "0123456789abcdef", events: ["points.changed"] }],
  };
}

/** The file with one change made to its tenant, as JSON text. */
function fileWith(change: (t: Tenant) => void): string {
  const tenant = baseTenant();
  change(tenant);
  return JSON.stringify({ tenants: [tenant] });
}

function pathOfError(text: string): string {
  try {
    loadConfigText(text, "x.json", {});
  } catch (err) {
    if (err instanceof ConfigError) return err.path;
    throw err;
  }
  return "(taken)";
}

const T = "$input.tenants[0]";
const hex = (text: string) => createHash("sha256").update(text).digest("hex");

/** [what, the change taking the edge value, the change one past it, the path named]. */
const BOUNDS: [string, (t: Tenant) => void, (t: Tenant) => void, string][] = [
  ["a key of 64 characters", (t) => (t.metrics[1].key = "k".repeat(64)), (t) => (t.metrics[1].key = "k".repeat(65)), `${T}.metrics[1].key`],
  ["a tenant id of 32 lowercase characters", (t) => (t.id = "t".repeat(32)), (t) => (t.id = "t".repeat(33)), `${T}.id`],
  ["a tenant id, lowercase only", (t) => (t.id = "t1"), (t) => (t.id = "T1"), `${T}.id`],
  ["an API key of 8 characters", (t) => (t.apiKeys = ["k".repeat(8)]), (t) => (t.apiKeys = ["k".repeat(7)]), `${T}.apiKeys[0]`],
  ["an API key of 256 characters", (t) => (t.apiKeys = ["k".repeat(256)]), (t) => (t.apiKeys = ["k".repeat(257)]), `${T}.apiKeys[0]`],
  ["a key's digest in lowercase hex", (t) => (t.apiKeys = [{ sha256: hex("some-key-1") }]), (t) => (t.apiKeys = [{ sha256: hex("some-key-1").toUpperCase() }]), `${T}.apiKeys[0].sha256`],
  ["at least one API key", (t) => (t.apiKeys = ["api-key-1"]), (t) => (t.apiKeys = []), `${T}.apiKeys`],
  ["at least one admin key", (t) => (t.adminKeys = ["admin-key-1"]), (t) => (t.adminKeys = []), `${T}.adminKeys`],
  ["at least one metric", (t) => (t.metrics = [{ key: "m", name: "M" }]), (t) => (t.metrics = []), `${T}.metrics`],
  ["1024 shards", (t) => (t.shards = 1024), (t) => (t.shards = 1025), `${T}.shards`],
  ["1 shard", (t) => (t.shards = 1), (t) => (t.shards = 0), `${T}.shards`],
  ["a control group of 100%", (t) => (t.experiment.controlPercent = 100), (t) => (t.experiment.controlPercent = 101), `${T}.experiment.controlPercent`],
  ["a control group of 0%", (t) => (t.experiment.controlPercent = 0), (t) => (t.experiment.controlPercent = -1), `${T}.experiment.controlPercent`],
  ["a trigger of 1e9 points", (t) => (t.points[0].triggers[0].points = 1e9), (t) => (t.points[0].triggers[0].points = 1e9 + 1), `${T}.points[0].triggers[0].points`],
  ["a trigger of -1e9 points", (t) => (t.points[0].triggers[0].points = -1e9), (t) => (t.points[0].triggers[0].points = -1e9 - 1), `${T}.points[0].triggers[0].points`],
  ["a name of 1 character", (t) => (t.metrics[1].name = "x"), (t) => (t.metrics[1].name = ""), `${T}.metrics[1].name`],
  ["a name of 200 characters", (t) => (t.metrics[1].name = "x".repeat(200)), (t) => (t.metrics[1].name = "x".repeat(201)), `${T}.metrics[1].name`],
  ["a level at 0 points", (t) => (t.points[0].levels[0].points = 0), (t) => (t.points[0].levels[0].points = -1), `${T}.points[0].levels[0].points`],
  ["100 initial freezes", (t) => (t.streak.freezes.initial = 100), (t) => (t.streak.freezes.initial = 101), `${T}.streak.freezes.initial`],
  ["a webhook secret of 16 characters", (t) => (t.webhooks[0].secret = "s".repeat(16)), (t) => (t.webhooks[0].secret = "s".repeat(15)), `${T}.webhooks[0].secret`],
  [
    "five webhook secrets",
    (t) => {
      delete t.webhooks[0].secret;
      t.webhooks[0].secrets = Array.from({ length: 5 }, (_, i) => `secret-${i}-0123456789`);
    },
    (t) => {
      delete t.webhooks[0].secret;
      t.webhooks[0].secrets = Array.from({ length: 6 }, (_, i) => `secret-${i}-0123456789`);
    },
    `${T}.webhooks[0].secrets`,
  ],
  ["a webhook timeout of 60 s", (t) => (t.webhooks[0].timeoutSeconds = 60), (t) => (t.webhooks[0].timeoutSeconds = 61), `${T}.webhooks[0].timeoutSeconds`],
  ["a coalescing window of 1 minute", (t) => (t.webhooks[0].coalesce = { "points.changed": 1 }), (t) => (t.webhooks[0].coalesce = { "points.changed": 0 }), `${T}.webhooks[0].coalesce["points.changed"]`],
  // An instant without a zone would be read in the machine's zone (README: "ISO 8601 instants with a zone").
  ["a boost start with its zone", (t) => (t.points[0].boosts[0].start = "2026-11-28T00:00:00+01:00"), (t) => (t.points[0].boosts[0].start = "2026-11-28T00:00:00"), `${T}.points[0].boosts[0].start`],
  ["a leaderboard start that is a date", (t) => (t.leaderboards[0].start = "2026-01-01"), (t) => (t.leaderboards[0].start = "2026-01-01T00:00:00Z"), `${T}.leaderboards[0].start`],
];

describe("the tenant file's schema at its bounds", () => {
  it("takes the base file", () => {
    expect(loadConfigText(fileWith(() => {}), "x.json", {})).toHaveLength(1);
  });

  it.each(BOUNDS)("takes %s, refuses one past it, naming the field", (_what, edge, past, path) => {
    expect(pathOfError(fileWith(edge))).toBe("(taken)");
    expect(pathOfError(fileWith(past))).toBe(path);
  });
});

function errorOf(text: string, env: NodeJS.ProcessEnv = {}): ConfigError {
  try {
    loadConfigText(text, "x.json", env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error("expected a ConfigError");
}

/** A metric trigger on `m` filtered by the event attribute `src`. */
const filteredTrigger = (i: number) => ({ key: `f${i}`, type: "metric", metric: "m", threshold: 1, points: 1, eventAttributes: { src: "x" } });

/** [what, the change, the path named, a part of the message]. */
const FAULTS: [string, (t: Tenant) => void, string, string][] = [
  ["a boost start on a day the month lacks", (t) => (t.points[0].boosts[0].start = "2026-02-31T00:00:00Z"), `${T}.points[0].boosts[0].start`, "is not a valid instant"],
  ["a boost ending as it starts", (t) => (t.points[0].boosts[0].end = t.points[0].boosts[0].start), `${T}.points[0].boosts[0].end`, "must be after start"],
  ["a trigger threshold below a millionth", (t) => (t.points[0].triggers[0].threshold = 1e-7), `${T}.points[0].triggers[0].threshold`, "at least 0.000001"],
  ["a streak trigger without a streak", (t) => {
    delete t.streak;
    t.points[0].triggers.push({ key: "s", type: "streak", length: 3, points: 1 });
  }, `${T}.points[0].triggers[1].type`, "needs a streak"],
  ["an achievement trigger on an unknown achievement", (t) => t.points[0].triggers.push({ key: "a", type: "achievement", achievement: "nope", points: 1 }), `${T}.points[0].triggers[1].achievement`, 'unknown achievement "nope"'],
  ["more than 52 event-filtered triggers on one metric", (t) => {
    t.attributes = { event: ["src"] };
    t.points[0].triggers.push(...Array.from({ length: 53 }, (_, i) => filteredTrigger(i)));
  }, `${T}.points`, "has 53 triggers with eventAttributes; at most 52"],
  ["a metric achievement on an unknown metric", (t) => (t.achievements = [{ key: "a", name: "A", type: "metric", metric: "nope", value: 1 }]), `${T}.achievements[0].metric`, 'unknown metric "nope"'],
  ["a streak achievement without a streak", (t) => {
    delete t.streak;
    t.achievements = [{ key: "a", name: "A", type: "streak", length: 2 }];
  }, `${T}.achievements[0].type`, "needs a streak"],
  ["a composite requiring an unknown achievement", (t) => (t.achievements = [{ key: "c", name: "C", type: "composite", achievements: ["nope"] }]), `${T}.achievements[0].achievements[0]`, 'unknown achievement "nope"'],
  ["composites requiring each other", (t) => (t.achievements = [
    { key: "a", name: "A", type: "composite", achievements: ["b"] },
    { key: "b", name: "B", type: "composite", achievements: ["a"] },
  ]), `${T}.achievements`, "form a cycle: a -> b -> a"],
  ["a streak metric listed twice", (t) => t.streak.metrics.push({ metric: "m", threshold: 2 }), `${T}.streak.metrics[1].metric`, 'metric "m" listed twice'],
  ["a streak threshold below a millionth", (t) => (t.streak.metrics[0].threshold = 1e-7), `${T}.streak.metrics[0].threshold`, "at least 0.000001"],
  ["a board start on a day the month lacks", (t) => (t.leaderboards[0].start = "2026-02-30"), `${T}.leaderboards[0].start`, "is not a date"],
  ["a board end on a day the month lacks", (t) => (t.leaderboards[0].end = "2026-02-30"), `${T}.leaderboards[0].end`, "is not a date"],
  ["a board ending as it starts", (t) => (t.leaderboards[0].end = t.leaderboards[0].start), `${T}.leaderboards[0].end`, "must be after start"],
  ["a metric board without a metric", (t) => delete t.leaderboards[0].metric, `${T}.leaderboards[0].metric`, "needs a metric"],
  ["a metric board on an unknown metric", (t) => (t.leaderboards[0].metric = "nope"), `${T}.leaderboards[0].metric`, 'unknown metric "nope"'],
  ["a points board on an unknown system", (t) => (t.leaderboards[0] = { key: "board", name: "Board", rankBy: "points", points: "nope", start: "2026-01-01" }), `${T}.leaderboards[0].points`, "needs a points system of this tenant"],
  ["a streak board without a streak", (t) => {
    delete t.streak;
    t.leaderboards[0] = { key: "board", name: "Board", rankBy: "streak", start: "2026-01-01" };
  }, `${T}.leaderboards[0].rankBy`, "needs a streak"],
  ["a streak board with runs", (t) => (t.leaderboards[0] = { key: "board", name: "Board", rankBy: "streak", start: "2026-01-01", runUnit: "day", runInterval: 7 }), `${T}.leaderboards[0].runUnit`, "perpetual"],
  ["a runUnit without a runInterval", (t) => (t.leaderboards[0].runUnit = "day"), `${T}.leaderboards[0].runInterval`, "go together"],
  ["a runInterval without a runUnit", (t) => (t.leaderboards[0].runInterval = 7), `${T}.leaderboards[0].runInterval`, "go together"],
  ["a breakdown by an undeclared attribute", (t) => (t.leaderboards[0].breakdownAttribute = "plan"), `${T}.leaderboards[0].breakdownAttribute`, 'user attribute "plan" is not declared'],
  ["an event attribute listed twice", (t) => (t.attributes = { event: ["src", "src"] }), `${T}.attributes.event[1]`, '"src" is listed twice'],
  ["an event filter on an attribute declared for users only", (t) => {
    t.attributes = { user: ["plan"] };
    t.points[0].triggers[0].eventAttributes = { plan: "pro" };
  }, `${T}.points[0].triggers[0].eventAttributes.plan`, 'event attribute "plan" is not declared in attributes.event'],
  ["a user filter on an attribute declared for events only", (t) => {
    t.attributes = { event: ["src"] };
    t.points[0].triggers[0].userAttributes = { src: "x" };
  }, `${T}.points[0].triggers[0].userAttributes.src`, 'user attribute "src" is not declared in attributes.user'],
];

describe("the checks across fields", () => {
  it.each(FAULTS)("refuses %s, naming its path", (_what, change, path, message) => {
    const err = errorOf(fileWith(change));
    expect(err.path).toBe(path);
    expect(err.message).toContain(message);
  });

  it("takes each check's last good value: 52 event-filtered triggers, a millionth, an end just after the start", () => {
    const text = fileWith((t) => {
      t.attributes = { event: ["src"] };
      t.points[0].triggers.push(...Array.from({ length: 52 }, (_, i) => filteredTrigger(i)));
      t.points[0].triggers[0].threshold = 0.000001;
      t.streak.metrics[0].threshold = 0.000001;
      t.points[0].boosts[0].end = "2026-11-28T00:00:00.001Z";
      t.leaderboards[0].end = "2026-01-02";
      // A date is midnight UTC; February's last day.
      t.points[0].boosts.push({ key: "dates", name: "Dates", multiplier: 2, start: "2026-02-28", end: "2026-03-01" });
    });
    const [tenant] = loadConfigText(text, "x.json", {});
    expect(tenant!.systems[0]!.triggers).toHaveLength(53);
    expect(tenant!.streak!.metrics[0]!.thresholdMicro).toBe(1);
    expect(tenant!.systems[0]!.boosts.map((b) => [b.start, b.end])).toEqual([
      [Date.parse("2026-11-28T00:00:00Z"), Date.parse("2026-11-28T00:00:00.001Z")],
      [Date.parse("2026-02-28T00:00:00Z"), Date.parse("2026-03-01T00:00:00Z")],
    ]);
    expect(tenant!.leaderboards[0]!.endDay! - tenant!.leaderboards[0]!.startDay).toBe(1);
  });

  it("refuses a key that opens two tenants, whichever its form: a request could not know whose data it reads", () => {
    const second = (keys: Tenant) => ({ ...baseTenant(), id: "second", apiKeys: ["api-key-2"], adminKeys: ["admin-key-2"], ...keys });
    const file = (keys: Tenant) => JSON.stringify({ tenants: [baseTenant(), second(keys)] });
    expect(loadConfigText(file({}), "x.json", {})).toHaveLength(2);
    for (const [keys, path] of [
      [{ apiKeys: ["api-key-1"] }, "$input.tenants[1].apiKeys[0]"],
      [{ apiKeys: ["api-key-2", { sha256: hex("api-key-1") }] }, "$input.tenants[1].apiKeys[1]"],
      [{ adminKeys: ["admin-key-1"] }, "$input.tenants[1].adminKeys[0]"],
      [{ adminKeys: ["api-key-1"] }, "$input.tenants[1].adminKeys[0]"],
    ] as const) {
      const err = errorOf(file(keys));
      expect(err.path, JSON.stringify(keys)).toBe(path);
      expect(err.message).toContain("key already used by bounds.");
    }
  });
});

describe("what a file compiles to", () => {
  it("holds a key written as its digest as the same key written plain", () => {
    const [plain] = loadConfigText(fileWith(() => {}), "x.json", {});
    const [digest] = loadConfigText(fileWith((t) => (t.apiKeys = [{ sha256: hex("api-key-1") }])), "x.json", {});
    expect(digest!.apiKeyHashes.map((h) => h.toString("hex"))).toEqual([hex("api-key-1")]);
    expect(digest!.apiKeyHashes).toEqual(plain!.apiKeyHashes);
  });

  it("fills the README's defaults", () => {
    const [tenant] = loadConfigText(fileWith((t) => (t.webhooks[0].coalesce = { "points.changed": 5 })), "x.json", {});
    expect(tenant!.shards).toBe(16);
    expect(tenant!.idempotencyWindowMs).toBeNull();
    expect(tenant!.leaderboards[0]).toMatchObject({ maxParticipants: 1000, ranking: "competition", keepFinishedRuns: null, breakdownAttribute: null });
    expect(tenant!.webhooks[0]!.coalesceMs).toEqual(new Map([["points.changed", 5 * 60_000]]));
    const [windowed] = loadConfigText(fileWith((t) => (t.idempotencyWindowHours = 3)), "x.json", {});
    expect(windowed!.idempotencyWindowMs).toBe(3 * 3_600_000);
  });

  it("gives every configured object a UUIDv5 of the tenant id and its key: the same in every load, another in another tenant", () => {
    const demoLike = (id: string) =>
      fileWith((t) => {
        t.id = id;
        // The same trigger key in two systems: two triggers, two ids.
        t.points.push({ key: "q", name: "Q", triggers: [{ key: "tr", type: "metric", metric: "m", threshold: 1, points: 2 }] });
      });
    const [a] = loadConfigText(demoLike("demo"), "x.json", {});
    const [again] = loadConfigText(demoLike("demo"), "x.json", {});
    const [other] = loadConfigText(demoLike("other"), "x.json", {});
    // The ids test/unit/domain.test.ts pins for the demo tenant: the compiled config uses them.
    expect(a!.metricByKey.get("m")!.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const [demo] = loadConfigText(JSON.stringify({ tenants: [{ ...baseTenant(), id: "demo", metrics: [{ key: "lessons", name: "L" }, { key: "m", name: "M" }], points: [{ key: "xp", name: "XP", triggers: [] }] }] }), "x.json", {});
    expect(demo!.metricByKey.get("lessons")!.id).toBe("e673ce80-9ed7-5efd-9513-f33fc403f160");
    expect(demo!.systemByKey.get("xp")!.id).toBe("e207b8f5-4a18-5dd8-9839-f85d6a748e02");
    const ids = (t: typeof a) => [
      ...t!.metrics.map((m) => m.id),
      ...t!.systems.flatMap((s) => [s.id, ...s.triggers.map((x) => x.id), ...s.levels.map((l) => l.id), ...s.boosts.map((b) => b.id)]),
      ...t!.leaderboards.map((b) => b.id),
    ];
    expect(ids(again)).toEqual(ids(a));
    expect(new Set(ids(a)).size).toBe(ids(a).length);
    for (const id of ids(other)) expect(ids(a)).not.toContain(id);
  });
});

describe("the start's message", () => {
  it("counts the faults past the tenth, from the first one past it", () => {
    // Eleven unknown fields: ten named, "(and 1 more)".
    const eleven = errorOf(fileWith((t) => Object.assign(t.metrics[1], Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`extra${i}`, 1])))));
    expect(eleven.message.match(/unknown field/g)).toHaveLength(10);
    expect(eleven.message).toMatch(/\(and 1 more\)$/);
    const ten = errorOf(fileWith((t) => Object.assign(t.metrics[1], Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`extra${i}`, 1])))));
    expect(ten.message.match(/unknown field/g)).toHaveLength(10);
    expect(ten.message).not.toContain("more)");
  });

  it("never shows a refused secret of a rotation list", () => {
    const err = errorOf(
      fileWith((t) => {
        delete t.webhooks[0].secret;
        t.webhooks[0].secrets = ["a-good-secret-0123456789", "s3cr3t-short"];
      }),
    );
    expect(err.path).toBe(`${T}.webhooks[0].secrets[1]`);
    expect(err.message).toContain("not shown: a credential");
    expect(err.message).not.toContain("s3cr3t-short");
  });

  it("names the demo key's own place when NODE_ENV=production", () => {
    const text = fileWith((t) => {
      t.apiKeys = ["api-key-1", "demo-key"];
      t.adminKeys = ["admin-key-1", { sha256: hex("demo-admin-key") }];
    });
    expect(loadConfigText(text, "x.json", {})).toHaveLength(1);
    expect(errorOf(text, { NODE_ENV: "production" }).path).toBe(`${T}.apiKeys[1]`);
    const admin = errorOf(text.replace('"demo-key"', '"api-key-2"'), { NODE_ENV: "production" });
    expect(admin.path).toBe(`${T}.adminKeys[1]`);
    expect(admin.message).toContain("the demo keys are refused when NODE_ENV=production");
  });
});
