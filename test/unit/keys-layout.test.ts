import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { loadConfigText } from "../../src/config/load.js";
import { TenantKeys } from "../../src/store/keys.js";
import { boardKeys } from "../../src/store/leaderboard-store.js";
import { buildRules } from "../../src/store/rules.js";
import { StateSlots, stateNames } from "../../src/store/state-slots.js";
import type { TenantStore } from "../../src/store/tenant-store.js";
import { DEMO_YAML } from "../helpers/app.js";

/**
 * src/store/keys.ts builds every key name and its comment lists them: each builder, given the
 * layout's placeholders, must give a name the layout lists, and every builder must be in the
 * table below (a new one is documented before it is used). A board's run keys were built by hand
 * in leaderboard-store.ts and rules.ts, outside both.
 */
const layout = readFileSync(new URL("../../src/store/keys.ts", import.meta.url), "utf8");
const keys = new TenantKeys("t");
const s = "s" as unknown as number;
const run = "<run>" as unknown as number;

/** Each builder, called with the layout's placeholders, and the name the layout writes for it. */
const BUILT: Record<string, () => string> = {
  prefix: () => keys.prefix(s),
  user: () => keys.user(s, "<user>"),
  rankHistory: () => keys.rankHistory(s, "<board>", run, "<user>"),
  idempotency: () => keys.idempotency(s, "<user>", "<metric>", "<key>").replace("\x1f", "\\x1f"),
  writer: () => keys.writer(s, "<writer>" as unknown as number),
  agg: () => keys.agg(s),
  stream: () => keys.stream(s),
  pointsZset: () => keys.pointsZset(s, "<system>"),
  awards: () => keys.awards(s, "<system>", "<user>"),
  userBoosts: () => keys.userBoosts(s),
  buckets: () => keys.buckets(s, "<series>", "<user>"),
  hookStream: () => keys.hookStream(s),
  openMonths: () => keys.openMonths(s),
  watermarks: () => keys.watermarks(s),
  streakActive: () => keys.streakActive(s),
  streakDeadline: () => keys.streakDeadline(s),
  streakBest: () => keys.streakBest(s),
  streakHistory: () => keys.streakHistory(s, "<user>"),
  runsDeleted: () => keys.runsDeleted(),
  fixed: () => keys.fixed(),
  timeScheduled: () => keys.timeScheduled(),
  runGroupsFrom: () => keys.runGroupsFrom(),
  timeDue: () => keys.timeDue(s, "<system>", "<trigger>"),
  attributeUsers: () => keys.attributeUsers(s, "<attr>", "<value>"),
  attributePoints: () => keys.attributePoints(s, "<system>", "<attr>", "<value>"),
  boardCounters: () => keys.boardCounters("<board>", run),
  runGroups: () => keys.runGroups(s, "<board>", run),
  meta: () => keys.meta(),
  slots: () => keys.slots(),
  boardRunHead: () => `${keys.boardRunHead(s, "<board>")}<run>[:<group>]`,
  boardRun: () => keys.boardRun(s, "<board>", run, "<group>").replace(":<group>", "[:<group>]"),
};

describe("src/store/keys.ts", () => {
  it("has a builder in this table for each name it builds, and no other", () => {
    const builders = Object.getOwnPropertyNames(TenantKeys.prototype).filter((name) => name !== "constructor");
    expect(builders.sort()).toEqual(Object.keys(BUILT).sort());
  });

  it.each(Object.entries(BUILT).filter(([name]) => name !== "prefix"))("%s: a name its layout lists", (_name, build) => {
    expect(layout).toContain(` ${build()} `);
  });

  it("a board's run keys: the reads' (boardKeys) and the event scripts' (the rules' head and the run) are keys.ts's", () => {
    const [tenant] = loadConfigText(DEMO_YAML, "demo.yaml", {});
    const store = { tenant, keys: new TenantKeys(tenant!.id) } as unknown as TenantStore;
    const shards = Array.from({ length: tenant!.shards }, (_, shard) => shard);
    const slots = StateSlots.of(stateNames(tenant!));
    expect(tenant!.leaderboards.length).toBeGreaterThan(0);
    for (const board of tenant!.leaderboards) {
      // The rules of an event that moves the board (a metric board's own metric).
      const { rules } = buildRules(tenant!, board.rankBy === "metric" ? board.metric! : null, slots);
      expect(boardKeys(store, board, 7, "")).toEqual(shards.map((shard) => store.keys.boardRun(shard, board.key, 7)));
      expect(boardKeys(store, board, 7, "pro")).toEqual(shards.map((shard) => `${store.keys.prefix(shard)}lb:${board.key}:7:pro`));
      const forScripts = rules.lb.find((lb) => lb.k === board.key)!;
      expect(forScripts.keys.map((head) => `${head}7`)).toEqual(shards.map((shard) => store.keys.boardRun(shard, board.key, 7)));
    }
  });
});
