import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { loadConfigText } from "../../src/config/load.js";
import { applyTimeTicks, applyUpsert, applyUserBoost, emptyState, readUserPoints } from "../../src/domain/model.js";

/**
 * The reference model's rule for dropping finished user boosts (lua/userBoost-3.lua keeps the
 * same; test/integration/time-triggers.test.ts drives the Lua through the API). The demo's
 * `coins` system pays 5 a day from first identification (`daily-allowance`).
 */
const tenant = loadConfigText(readFileSync(new URL("../../config/demo.yaml", import.meta.url), "utf8"), "demo.yaml", {})[0]!;
const DAY = 86_400_000;
const T0 = Date.parse("2026-12-20T12:00:00Z");
const boost = (id: string, multiplier: number, start: number, end: number) => ({ id, multiplier, start, end, rounding: "down" as const });

function userWithDoubleDay() {
  const state = emptyState();
  applyUpsert(tenant, state, "u", "upsert", [["tz", "UTC"]], T0); // due T0 + 1 day
  applyUserBoost(tenant, state, "u", "coins", "add", boost("double", 2, T0 + 0.5 * DAY, T0 + 1.5 * DAY), T0);
  return state;
}

describe("finished user boosts in the model", () => {
  it("keeps a finished boost while an interval due inside it is unpaid", () => {
    const state = userWithDoubleDay();
    applyUserBoost(tenant, state, "u", "coins", "add", boost("later", 3, T0 + 20 * DAY, T0 + 21 * DAY), T0 + 3 * DAY + 3_600_000);
    expect(state.users.get("u")!.boosts.get("coins")!.map((b) => b.id)).toEqual(["double", "later"]);
    applyTimeTicks(tenant, state, T0 + 3 * DAY + 3_600_000);
    // Intervals due T0 + 1 day (inside the boost: 10), + 2 days and + 3 days (5 each).
    expect(readUserPoints(state, "u", "coins", 10)!.awards.map((a) => a.awarded)).toEqual([20]);
  });

  it("drops it once every interval it covers is paid", () => {
    const state = userWithDoubleDay();
    applyTimeTicks(tenant, state, T0 + 3 * DAY + 3_600_000);
    applyUserBoost(tenant, state, "u", "coins", "add", boost("later", 3, T0 + 20 * DAY, T0 + 21 * DAY), T0 + 3 * DAY + 3_600_000);
    expect(state.users.get("u")!.boosts.get("coins")!.map((b) => b.id)).toEqual(["later"]);
  });
});
