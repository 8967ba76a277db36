import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stableId, tenantNamespace } from "../../src/domain/ids.js";
import { boundaryEventId } from "../../src/jobs/webhooks/kinds.js";
import { uniqueTenantId, withTestApp, type TestApp } from "../helpers/app.js";
import { xpSystemTenantYaml } from "../helpers/tenant-yaml.js";
import { startReceiver, type Receiver } from "../helpers/webhook-receiver.js";

/**
 * The time-driven webhook events of boundaries edited in the tenant file between two starts on
 * one Redis (README: Webhooks, Time-driven events): a boundary an edit moved to before the last
 * tick is announced at the first tick after the start that reads the edit, once; one announced
 * and then moved later is announced again at its new instant under a new event id; a boundary
 * never moved keeps the id of its boost or run alone. The manual clock: each start's first
 * POST /admin/v1/clock runs the tick, and settled() waits for its deliveries.
 */

let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver.close();
});

const hook = (types: string) => `
    webhooks:
      - key: main
        url: URL
        secrets: ["a-plain-secret-for-the-tests-0123"]
        events: [${types}]
`;

const PER_LESSON = "{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 10 }";

/** Starts the service with `yaml` at `now`, moves the clock to `now` (a tick), waits for the deliveries, then runs `body`. */
async function startAt(tenantId: string, yaml: string, now: string, body: (t: TestApp) => Promise<void> = async () => undefined): Promise<void> {
  await withTestApp({ manualClock: now, yaml: yaml.replace("URL", receiver.url) }, async (t) => {
    await t.setClock(now);
    await t.app.webhooks!.settled(tenantId);
    await body(t);
    await t.app.webhooks!.settled(tenantId);
  });
}

describe("a global boost's boundaries edited in the tenant file", () => {
  const tenantId = uniqueTenantId("wb");
  const yaml = (boosts: string) => xpSystemTenantYaml(tenantId, PER_LESSON, `        boosts: [${boosts}]\n`, hook("points.boost_started, points.boost_finished"));
  const boost = (key: string, start: string, end: string | null) => `{ key: ${key}, name: Boost, multiplier: 2, start: "${start}"${end === null ? "" : `, end: "${end}"`} }`;
  const boostId = (key: string) => stableId(tenantNamespace(tenantId), "boost", `xp/${key}`);
  const events = (type: string, key: string) => receiver.received.filter((r) => r.body.type === type && r.body.boost?.id === boostId(key));
  const at = (hour: string) => `2026-06-05T${hour}:00:00.000Z`;

  it("announces an end moved before the last tick once, and an end moved later after its finish again at the new end under a new id", async () => {
    await startAt(tenantId, yaml(boost("double", "2026-06-01", "2026-06-10")), at("10"));
    expect(events("points.boost_started", "double")).toHaveLength(0); // before the first start: history
    // End moved to 09:00, before the last tick (10:00): finished at the first tick of this start.
    await startAt(tenantId, yaml(boost("double", "2026-06-01", at("09"))), at("11"));
    expect(events("points.boost_finished", "double").map((r) => r.body)).toEqual([
      expect.objectContaining({ timestamp: at("09"), boost: expect.objectContaining({ status: "finished", end: at("09") }) }),
    ]);
    const first = events("points.boost_finished", "double")[0]!.body.id;
    // Its id is the boost's alone, as for a boundary never moved.
    expect(first).toBe(boundaryEventId(tenantNamespace(tenantId), tenantId, "points.boost_finished", boostId("double")));
    // Started again with the same file: not again.
    await startAt(tenantId, yaml(boost("double", "2026-06-01", at("09"))), at("12"));
    expect(events("points.boost_finished", "double")).toHaveLength(1);
    // End moved later: nothing now, finished again at the new end under an id of its own.
    await startAt(tenantId, yaml(boost("double", "2026-06-01", at("20"))), at("13"), async (t) => {
      expect(events("points.boost_finished", "double")).toHaveLength(1);
      await t.setClock(at("20"));
    });
    const finished = events("points.boost_finished", "double");
    expect(finished.map((r) => r.body.timestamp)).toEqual([at("09"), at("20")]);
    expect(finished[1]!.body.id).not.toBe(first);
    // Moved back before the last announcement: announced already, never again.
    await startAt(tenantId, yaml(boost("double", "2026-06-01", at("15"))), at("21"));
    expect(events("points.boost_finished", "double")).toHaveLength(2);
    expect(events("points.boost_started", "double")).toHaveLength(0);
  });

  it("announces a boost added with its start in the past as started, once", async () => {
    const since = boost("since-may", "2026-05-01", null);
    await startAt(tenantId, yaml(`${boost("double", "2026-06-01", at("15"))}, ${since}`), at("22"));
    expect(events("points.boost_started", "since-may").map((r) => r.body)).toEqual([
      expect.objectContaining({ id: boundaryEventId(tenantNamespace(tenantId), tenantId, "points.boost_started", boostId("since-may")), timestamp: "2026-05-01T00:00:00.000Z" }),
    ]);
    await startAt(tenantId, yaml(`${boost("double", "2026-06-01", at("15"))}, ${since}`), at("23"));
    expect(events("points.boost_started", "since-may")).toHaveLength(1);
    expect(events("points.boost_finished", "since-may")).toHaveLength(0);
  });
});

describe("a board's end edited in the tenant file", () => {
  const tenantId = uniqueTenantId("wl");
  const yaml = (end: string) =>
    xpSystemTenantYaml(
      tenantId,
      PER_LESSON,
      "",
      `    leaderboards:
      - { key: weekly, name: Weekly, rankBy: points, points: xp, start: "2026-06-01", runUnit: day, runInterval: 7, end: "${end}" }
${hook("leaderboard.started, leaderboard.finished")}`,
    );
  const events = (type: string, run: string) => receiver.received.filter((r) => r.body.type === type && r.body.leaderboard?.key === "weekly" && r.body.leaderboard.run === run);

  it("announces the run an end moved before the last tick finished once, and finished again at its new end under a new id when the end moves later", async () => {
    await startAt(tenantId, yaml("2026-06-30"), "2026-06-10T12:00:00Z", async (t) => {
      expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "ada" }, value: 1 })).status).toBe(201);
    });
    // End moved to 10 June, before the last tick (10 June 12:00): the run of 8 June finished then.
    await startAt(tenantId, yaml("2026-06-10"), "2026-06-11T12:00:00Z");
    const finished = () => events("leaderboard.finished", "2026-06-08");
    expect(finished().map((r) => r.body)).toEqual([
      expect.objectContaining({
        timestamp: "2026-06-10T00:00:00.000Z",
        leaderboard: expect.objectContaining({ status: "finished", rankings: [expect.objectContaining({ userId: "ada", rank: 1, value: 10 })] }),
      }),
    ]);
    const first = finished()[0]!.body.id;
    expect(first).toBe(boundaryEventId(tenantNamespace(tenantId), tenantId, "leaderboard.finished", "weekly:1"));
    await startAt(tenantId, yaml("2026-06-10"), "2026-06-12T12:00:00Z");
    expect(finished()).toHaveLength(1);
    // End moved later: the run is on again; moved back to 10 June before its new finish (the
    // finish announced already: nothing), then later again: it finishes at its own end, 15 June.
    await startAt(tenantId, yaml("2026-06-30"), "2026-06-13T12:00:00Z");
    await startAt(tenantId, yaml("2026-06-10"), "2026-06-14T00:00:00Z");
    expect(finished()).toHaveLength(1);
    await startAt(tenantId, yaml("2026-06-30"), "2026-06-14T12:00:00Z", async (t) => {
      expect(finished()).toHaveLength(1);
      await t.setClock("2026-06-15T00:00:00Z");
    });
    expect(finished().map((r) => r.body.timestamp)).toEqual(["2026-06-10T00:00:00.000Z", "2026-06-15T00:00:00.000Z"]);
    expect(finished()[1]!.body.id).not.toBe(first);
    expect(events("leaderboard.started", "2026-06-15")).toHaveLength(1);
  });
  it("announces the runs an end moved later brings back, up to the last tick, once", async () => {
    // A tenant of its own (the same board key), on a receiver of its own.
    const id = uniqueTenantId("wr");
    const own = await startReceiver();
    const file = (end: string) => yaml(end).replace(`id: ${tenantId}`, `id: ${id}`).replace("URL", own.url);
    const runEvents = (type: string, run: string) => own.received.filter((r) => r.body.type === type && r.body.leaderboard.run === run).map((r) => r.body.timestamp);
    try {
      // Ends with its run of 8 June (on 15 June, that run's own end), announced finished at 16 June.
      await startAt(id, file("2026-06-15"), "2026-06-14T12:00:00Z", async (t) => {
        await t.setClock("2026-06-16T00:00:00Z");
      });
      expect(runEvents("leaderboard.finished", "2026-06-08")).toEqual(["2026-06-15T00:00:00.000Z"]);
      // End moved to 30 June on the 17th: the run of 15 June is back, started before the last tick.
      await startAt(id, file("2026-06-30"), "2026-06-17T00:00:00Z");
      expect(runEvents("leaderboard.started", "2026-06-15")).toEqual(["2026-06-15T00:00:00.000Z"]);
      // Moved before it and back: announced already, not again (nor the finish of 8 June).
      await startAt(id, file("2026-06-15"), "2026-06-17T12:00:00Z");
      await startAt(id, file("2026-06-30"), "2026-06-18T00:00:00Z");
      expect(runEvents("leaderboard.started", "2026-06-15")).toHaveLength(1);
      expect(runEvents("leaderboard.finished", "2026-06-08")).toHaveLength(1);
      expect(runEvents("leaderboard.finished", "2026-06-15")).toHaveLength(0);
    } finally {
      await own.close();
    }
  });
});
