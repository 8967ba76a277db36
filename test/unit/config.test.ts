import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { resolve } from "node:path";
import { configPath, dataDirectory, ROOT } from "../../src/boot.js";
import { ConfigError } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";
import { buildRules } from "../../src/store/rules.js";
import { StateSlots, stateNames } from "../../src/store/state-slots.js";
import { toLuaLiteral } from "../../src/store/lua-loader.js";
import { DEMO_YAML } from "../helpers/app.js";

function errorOf(yaml: string, env: NodeJS.ProcessEnv = {}): ConfigError {
  try {
    loadConfigText(yaml, "x.yaml", env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error("expected a ConfigError");
}

describe("config", () => {
  it("compiles the demo tenant exactly as the quick start promises", () => {
    const [demo] = loadConfigText(DEMO_YAML, "demo.yaml", {});
    expect(demo!.id).toBe("demo");
    expect(demo!.metrics.map((m) => [m.key, m.name])).toEqual([["lessons", "Lessons completed"], ["api-calls", "API calls"]]);
    const xp = demo!.systemByKey.get("xp")!;
    expect(xp).toMatchObject({ name: "XP", maxPoints: null });
    expect(xp.triggers).toEqual([expect.objectContaining({ type: "metric", metric: "lessons", threshold: 1, points: 10 })]);
    expect(xp.levels.map((l) => [l.key, l.points])).toEqual([["bronze", 50], ["silver", 200], ["gold", 1000]]);
    const energy = demo!.systemByKey.get("energy")!;
    expect(energy).toMatchObject({ name: "Energy", maxPoints: 100 });
    expect(energy.triggers.map((t) => [t.type, t.points])).toEqual([["user_creation", 100], ["metric", -1]]);
    expect(demo!.achievements.slice(0, 2).map((a) => [a.key, a.type === "metric" && a.metric, a.type === "metric" && a.value])).toEqual([
      ["first-lesson", "lessons", 1],
      ["ten-lessons", "lessons", 10],
    ]);
    expect(demo!.streak).toMatchObject({ frequency: "daily", mode: "all", metrics: [{ metric: "lessons", thresholdMicro: 1_000_000 }] });
  });

  it("gives the demo tenant's objects of every kind the ids they have shipped with (ids derive from tenant and key)", () => {
    // test/unit/domain.test.ts pins a metric's and a system's; these are the other kinds' (the
    // kind is part of the name hashed: a changed kind would change every id of that kind).
    const [demo] = loadConfigText(DEMO_YAML, "demo.yaml", {});
    const xp = demo!.systemByKey.get("xp")!;
    expect([xp.triggers[0]!.key, xp.triggers[0]!.id]).toEqual(["lesson-completed", "4a590f89-6416-53c9-87f3-ae06328bfea1"]);
    expect([xp.levels[0]!.key, xp.levels[0]!.id]).toEqual(["bronze", "56e30bd8-72c3-5780-b11f-89dcde7e2d69"]);
    expect([xp.boosts[0]!.key, xp.boosts[0]!.id]).toEqual(["pro-weekend", "707adaf0-532c-58e8-99f2-01ca98bc1768"]);
    expect([demo!.achievements[0]!.key, demo!.achievements[0]!.id]).toEqual(["first-lesson", "b0c89f5d-fa1f-5d3a-8700-eea95c9a7331"]);
    expect([demo!.leaderboards[0]!.key, demo!.leaderboards[0]!.id]).toEqual(["xp-all-time", "9bb7be0a-209e-5df6-a43b-c95e02e7081d"]);
  });

  it("names every fault of a file in one message, a misspelt key by its spelling, and a file it cannot read without a path", () => {
    // Three faults: a trigger's threshold spelt "Threshold" (typia names the missing field only),
    // a level's points spelt "pointz", a misspelt maxPoints (an unknown field).
    const yaml = DEMO_YAML.replace("threshold: 1\n            points: 10", "Threshold: 1\n            points: 10")
      .replace("name: Bronze\n            points: 50", "name: Bronze\n            pointz: 50")
      .replace("maxPoints: 100", "maxpoints: 100");
    const err = errorOf(yaml);
    expect(err.path).toBe("$input.tenants[0].points[0].triggers[0].threshold");
    expect(err.message).toContain('$input.tenants[0].points[0].triggers[0].threshold: expected (number & ExclusiveMinimum<0> & Maximum<1000000000>), got undefined (the field is spelt "Threshold" here)');
    expect(err.message).toContain('; $input.tenants[0].points[0].levels[0].points: expected');
    expect(err.message).toContain('(the field is spelt "pointz" here)');
    expect(err.message).toContain("; $input.tenants[0].points[1].maxpoints: unknown field (a misspelt key? its value is not shown: it may be a secret)");
    expect(err.message).not.toContain("more)");
    // Past ten, the rest are counted.
    const many = DEMO_YAML.replace("name: Lessons completed", ["name: Lessons completed", ...Array.from({ length: 12 }, (_, i) => `        extra${i}: 1`)].join("\n"));
    const manyErr = errorOf(many);
    expect(manyErr.message.match(/unknown field/g)).toHaveLength(10);
    expect(manyErr.message).toMatch(/\(and 2 more\)$/);
    // The file as a whole: no "$input:" before the reason.
    expect(errorOf("tenants: [").message).toMatch(/^x\.yaml is not valid YAML: /);
    expect(errorOf("tenants: [").path).toBe("");
  });

  it("names the path of a field with the wrong type", () => {
    expect(errorOf(DEMO_YAML.replace("maxPoints: 100", "maxPoints: lots")).path).toBe("$input.tenants[0].points[1].maxPoints");
    expect(errorOf(DEMO_YAML.replace("key: lessons\n", "key: 'has space'\n")).path).toBe("$input.tenants[0].metrics[0].key");
    expect(errorOf(DEMO_YAML.replace("frequency: daily", "frequency: hourly")).path).toBe("$input.tenants[0].streak.frequency");
    expect(errorOf(DEMO_YAML.replace("    streak:", "    unknownThing: 1\n    streak:")).path).toBe("$input.tenants[0].unknownThing");
  });

  it("names the path of a semantic error", () => {
    expect(errorOf(DEMO_YAML.replace("metric: api-calls\n            threshold", "metric: nope\n            threshold")).path).toBe("$input.tenants[0].points[1].triggers[1].metric");
    expect(errorOf(DEMO_YAML.replace("key: ten-lessons", "key: first-lesson")).path).toBe("$input.tenants[0].achievements[1].key");
    expect(errorOf(DEMO_YAML.replace("points: 200", "points: 50")).path).toBe("$input.tenants[0].points[0].levels");
    expect(errorOf(DEMO_YAML.replace("adminKeys: [demo-admin-key]", "adminKeys: [demo-key]")).path).toBe("$input.tenants[0].adminKeys[0]");
    expect(errorOf("tenants: [").message).toContain("not valid YAML");
  });

  it.each([
    ["a trigger of 0 points", ["points: 10\n        levels:", "points: 0\n        levels:"], "$input.tenants[0].points[0].triggers[0].points", "must not be 0"],
    ["a boost ending before it starts", ['end: "2026-11-30T00:00:00Z"\n            userAttributes', 'end: "2026-11-27T00:00:00Z"\n            userAttributes'], "$input.tenants[0].points[0].boosts[0].end", "must be after start"],
    ["a filter on an undeclared attribute", ["userAttributes: { plan: pro }", "userAttributes: { tier: pro }"], "$input.tenants[0].points[0].boosts[0].userAttributes.tier", 'user attribute "tier" is not declared'],
    ["more initial freezes than the maximum", ["initial: 0", "initial: 3"], "$input.tenants[0].streak.freezes.initial", "must not exceed max"],
    ["keepFinishedRuns on a perpetual board", ['points: xp\n        start: "2026-01-01"', 'points: xp\n        start: "2026-01-01"\n        keepFinishedRuns: 2'], "$input.tenants[0].leaderboards[0].keepFinishedRuns", "perpetual"],
    ["an API key shorter than 8 characters", ["apiKeys: [demo-key]", "apiKeys: [short]"], "$input.tenants[0].apiKeys[0]", "expected"],
    ["a metric on a points board", ["rankBy: points\n        points: xp", "rankBy: points\n        metric: lessons\n        points: xp"], "$input.tenants[0].leaderboards[0].metric", "takes no metric"],
    ["a points system on a metric board", ["rankBy: metric\n        metric: lessons", "rankBy: metric\n        points: xp\n        metric: lessons"], "$input.tenants[0].leaderboards[1].points", "takes no points system"],
    ["a user attribute listed twice", ["user: [plan]", "user: [plan, plan]"], "$input.tenants[0].attributes.user[1]", "listed twice"],
    ["a composite requiring itself", ["achievements: [ten-lessons, week-streak]", "achievements: [ten-lessons, dedicated]"], "$input.tenants[0].achievements[4].achievements[1]", '"dedicated" cannot require itself'],
  ])("refuses %s, naming its path", (_what, [from, to], path, message) => {
    expect(DEMO_YAML).toContain(from);
    const err = errorOf(DEMO_YAML.replace(from!, to!));
    expect(err.path).toBe(path);
    expect(err.message).toContain(message);
  });

  it("names a refused key or secret by its length, never its value (the start's error is logged)", () => {
    const key = errorOf(DEMO_YAML.replace("apiKeys: [demo-key]", "apiKeys: [s3cr3t]"));
    expect([key.path, key.message]).toEqual(["$input.tenants[0].apiKeys[0]", expect.stringContaining("got a string of 6 characters (not shown: a credential)")]);
    expect(key.message).not.toContain("s3cr3t");
    // A missing credential field is said missing, as any field: nothing to hide, no length.
    const missing = errorOf(DEMO_YAML.replace("    adminKeys: [demo-admin-key]\n", ""));
    expect([missing.path, missing.message]).toEqual(["$input.tenants[0].adminKeys", expect.stringMatching(/got undefined$/)]);
    const secret = "whsec_" + "A".repeat(300);
    const hook = errorOf(DEMO_YAML + `    webhooks:\n      - { key: w, url: "https://x.example/h", secret: "${secret}", events: [points.changed] }\n`);
    expect(hook.path).toBe("$input.tenants[0].webhooks[0].secret");
    expect(hook.message).not.toContain("AAAA");
    // Whatever its type, in its digest form too, and under a misspelt field name.
    for (const [from, to, secretText] of [
      ["apiKeys: [demo-key]", "apiKeys: [12345678901]", "12345678901"],
      ["apiKeys: [demo-key]", "apiKeys: [{sha256: sup3r-s3cret-value}]", "sup3r-s3cret-value"],
      ["apiKeys: [demo-key]", "apiKeys: [demo-key]\n    apikeys: [sup3r-s3cret-value]", "sup3r-s3cret-value"],
    ] as const) {
      const err = errorOf(DEMO_YAML.replace(from, to));
      expect(err.message, to).toContain("not shown");
      expect(err.message, to).not.toContain(secretText);
    }
    // Other values are shown as they were written.
    expect(errorOf(DEMO_YAML.replace("points: 10\n        levels:", "points: ten\n        levels:")).message).toContain('got "ten"');
  });

  it("refuses an endpoint's secrets listing one secret twice, naming the second place, never the secret", () => {
    const secret = "whsec_" + Buffer.from("the-one-secret-twice").toString("base64");
    const twice = (list: string) => errorOf(DEMO_YAML + `    webhooks:\n      - { key: w, url: "https://x.example/h", secrets: [${list}], events: [points.changed] }\n`);
    for (const [list, path, first] of [
      [`"${secret}", "${secret}"`, "$input.tenants[0].webhooks[0].secrets[1]", "secrets[0]"],
      [`"${secret}", "another-secret-0123", "${secret}"`, "$input.tenants[0].webhooks[0].secrets[2]", "secrets[0]"],
    ] as const) {
      const err = twice(list);
      expect(err.path).toBe(path);
      expect(err.message).toContain(`the same secret as $input.tenants[0].webhooks[0].${first}`);
      expect(err.message).not.toContain(secret.slice(6));
    }
    // Two different secrets (a rotation) compile.
    const [tenant] = loadConfigText(DEMO_YAML + `    webhooks:\n      - { key: w, url: "https://x.example/h", secrets: ["${secret}", "another-secret-0123"], events: [points.changed] }\n`, "x.yaml", {});
    expect(tenant!.webhooks[0]!.secrets).toEqual([secret, "another-secret-0123"]);
  });

  it("never shows the credentials inside a refused object or list, nor a URL written where a list belongs", () => {
    const secret = "whsec_Inside-A-Refused-Map";
    const url = "https://hookuser:Url-Pass-9f@hooks.example/T0?token=Url-Token-3c";
    const endpoint = `{ key: w, url: "${url}", secret: "${secret}", events: [points.changed] }`;
    for (const [text, path] of [
      // `webhooks` written as a map (the hosted service's shape), not a list: the whole map refused.
      [DEMO_YAML + `    webhooks:\n      endpoints: [${endpoint}]\n`, "$input.tenants[0].webhooks"],
      // A tenant written as a list: the tenant refused, its keys inside.
      [DEMO_YAML.replace("  - id: demo\n", "  - - id: demo\n      apiKeys: [Key-In-A-List-77]\n  - id: demo\n"), "$input.tenants[0]"],
      // An endpoint's URL where the list of endpoints belongs.
      [DEMO_YAML + `    webhooks: "${url}"\n`, "$input.tenants[0].webhooks"],
    ] as const) {
      const err = errorOf(text);
      expect(err.message).toContain(path);
      for (const shown of [secret, "Url-Pass-9f", "Url-Token-3c", "Key-In-A-List-77", "demo-key", "demo-admin-key"]) expect(err.message, path).not.toContain(shown);
      expect(err.message).toContain("not shown");
    }
  });

  it("refuses two tenants with one id", () => {
    const second = DEMO_YAML.slice(DEMO_YAML.indexOf("  - id: demo")).replace("[demo-key]", "[other-key]").replace("[demo-admin-key]", "[other-admin-key]");
    const err = errorOf(`${DEMO_YAML}${second}`);
    expect(err.path).toBe("$input.tenants[1].id");
    expect(err.message).toContain('duplicate tenant id "demo"');
  });

  it("refuses tenant ids <t> and time-<t>, whose webhook queues would be one BullMQ queue (laurel-hooks-time-<t>)", () => {
    const tenant = (id: string, n: number) =>
      `  - id: ${id}\n    apiKeys: [key-${n}-12345678]\n    adminKeys: [admin-${n}-12345678]\n    metrics: [{ key: lessons, name: Lessons }]\n`;
    // Either order, and without endpoints: an id is fixed for good, endpoints may come later.
    for (const [first, second, refused] of [["acme", "time-acme", "time-acme"], ["time-acme", "acme", "time-acme"]] as const) {
      const err = errorOf(`tenants:\n${tenant(first, 1)}${tenant(second, 2)}`);
      expect(err.path).toBe(`$input.tenants[${first === refused ? 0 : 1}].id`);
      expect(err.message).toContain(`tenant id "${refused}" would share a job queue (laurel-hooks-time-acme) with tenant "acme"`);
    }
    // Ids that only look alike are fine: time-acme alone, acme with timex-acme or time-acme2.
    expect(loadConfigText(`tenants:\n${tenant("time-acme", 1)}`, "x.yaml", {})).toHaveLength(1);
    expect(loadConfigText(`tenants:\n${tenant("acme", 1)}${tenant("timex-acme", 2)}${tenant("time-acme2", 3)}`, "x.yaml", {})).toHaveLength(3);
  });

  it("refuses the demo keys in production, written plain or as their digest", () => {
    expect(errorOf(DEMO_YAML, { NODE_ENV: "production" }).path).toBe("$input.tenants[0].apiKeys[0]");
    const digest = (key: string) => `{ sha256: ${createHash("sha256").update(key).digest("hex")} }`;
    const hashed = DEMO_YAML.replace("apiKeys: [demo-key]", "apiKeys: [other-key-123]").replace("adminKeys: [demo-admin-key]", `adminKeys: [${digest("demo-admin-key")}]`);
    expect(errorOf(hashed, { NODE_ENV: "production" }).path).toBe("$input.tenants[0].adminKeys[0]");
    expect(loadConfigText(hashed.replace(digest("demo-admin-key"), digest("other-admin-123")), "x.yaml", { NODE_ENV: "production" })).toHaveLength(1);
  });

  it("refuses duplicate keys in a JSON file as in YAML (JSON.parse would keep the last)", () => {
    const json = JSON.stringify({ tenants: [{ id: "t1", apiKeys: ["key-12345678"], adminKeys: ["admin-12345678"], metrics: [{ key: "m", name: "M" }] }] });
    expect(loadConfigText(json, "x.json", {})[0]!.id).toBe("t1");
    expect(() => loadConfigText(json.replace('"id":"t1"', '"id":"t1","id":"t9"'), "x.json", {})).toThrow(/unique/);
  });

  it("narrows the event rules to what the metric can touch", () => {
    const [demo] = loadConfigText(DEMO_YAML, "demo.yaml", {});
    const calls = buildRules(demo!, "api-calls", StateSlots.of(stateNames(demo!))).rules;
    expect(calls.ach).toEqual({});
    expect(calls.streak).toMatchObject({ counts: false });
    // xp and coins have no trigger on api-calls and no first-identification trigger; coins'
    // time trigger is scheduled at first identification.
    expect(calls.sys.map((s) => s.key)).toEqual(["energy", "coins"]);
    expect(calls.mt.map((t) => t.k)).toEqual(["api-call"]);
    const lessons = buildRules(demo!, "lessons", StateSlots.of(stateNames(demo!))).rules;
    expect(lessons.sys.map((s) => s.key)).toEqual(["xp", "energy", "coins"]);
    expect(lessons.mt.map((t) => [t.s, t.k])).toEqual([[1, "lesson-completed"], [3, "mobile-lesson"]]);
    expect(lessons.uc.map((t) => [t.s, t.k])).toEqual([[2, "welcome"]]);
    expect(lessons.mach).toEqual(["first-lesson", "ten-lessons"]);
    expect(lessons.sach).toEqual(["week-streak"]);
    expect(Object.keys(lessons.ach).sort()).toEqual(["dedicated", "first-lesson", "ten-lessons", "week-streak"]);
    expect(Object.keys(calls.ach)).toEqual([]);
    expect(lessons.streak).toMatchObject({ counts: true, f: "sv:lessons" });
    expect(calls.streak).toMatchObject({ counts: false, f: false });
  });

  it("encodes rules as a Lua literal", () => {
    expect(toLuaLiteral({ a: [1, "x\"y"], "b-c": false, d: true })).toBe('{a={1,"x\\"y"},["b-c"]=false,d=true}');
    expect(toLuaLiteral("é")).toBe('"\\195\\169"');
  });

  it("compiles the README's samples: the tenant file, with its Leaderboards and Webhooks blocks added", () => {
    // A reader copies them; both once failed to start (a 9-character secret, and a coalesce on a
    // type the endpoint did not subscribe to).
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
    const sample = (heading: string): string => {
      const section = readme.slice(readme.indexOf(`\n${heading}\n`));
      return /```yaml\n([\s\S]*?)```/.exec(section)![1]!;
    };
    const tenantFile = sample("### The tenant file");
    const [tenant] = loadConfigText(tenantFile, "README.md", {});
    expect(tenant!.id).toBe("demo");
    const indent = (block: string) => block.replace(/^(?=.)/gm, "    ");
    const withBlocks = `${tenantFile.replace(/^ {4}webhooks:[\s\S]*$/m, "")}${indent(sample("### Leaderboards"))}${indent(sample("### Webhooks (outbound events)"))}`;
    const [full] = loadConfigText(withBlocks, "README.md", {});
    expect(full!.leaderboards.map((b) => b.key)).toEqual(["weekly-lessons"]);
    expect(full!.webhooks.map((w) => w.key)).toEqual(["main"]);
  });
});

describe("paths from the environment", () => {
  it("take an empty LAUREL_CONFIG or LAUREL_DATA_DIR as unset (was: the working directory)", () => {
    for (const env of [{}, { LAUREL_CONFIG: "", LAUREL_DATA_DIR: "" }]) {
      expect(configPath(env)).toBe(resolve(ROOT, "config/demo.yaml"));
      expect(dataDirectory(env)).toBe(resolve(ROOT, "data/redis"));
    }
    expect(configPath({ LAUREL_CONFIG: "/etc/laurel.yaml" })).toBe("/etc/laurel.yaml");
    expect(dataDirectory({ LAUREL_DATA_DIR: "/var/lib/laurel" })).toBe("/var/lib/laurel");
  });
});
