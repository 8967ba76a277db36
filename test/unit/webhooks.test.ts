import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";
import { decodeStreamRecord } from "../../src/domain/stream-record.js";
import { configBoundaries, editedBoundaries } from "../../src/jobs/webhooks/boundaries.js";
import { backoffDelay, DEFAULT_BACKOFF, DEFAULT_DELIVERY, deliveryOptions } from "../../src/jobs/webhooks/deliveries.js";
import { boardParts, recordEvents, streamEventId } from "../../src/jobs/webhooks/kinds.js";
import { signedHeaders, standardSignature, trophySignature } from "../../src/jobs/webhooks/signing.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";

/** Outbound events, pure parts (issue 6): backoff schedule, signatures, kinds, boundaries, config. */

const HOUR = 3_600_000;

describe("backoff", () => {
  it("by default retries at least 8 times over about a day, growing exponentially", () => {
    const attempts = DEFAULT_DELIVERY.attempts;
    expect(attempts).toBeGreaterThanOrEqual(8);
    const delays = Array.from({ length: attempts - 1 }, (_, i) => backoffDelay(i + 1, DEFAULT_BACKOFF, () => 0.5));
    expect(delays[0]).toBe(30_000);
    for (let i = 1; i < delays.length; i++) expect(delays[i]!).toBeGreaterThan(delays[i - 1]!);
    const span = delays.reduce((a, b) => a + b, 0);
    expect(span).toBeGreaterThan(18 * HOUR);
    expect(span).toBeLessThan(26 * HOUR);
  });

  it("jitters each delay within ±20% and caps it", () => {
    expect(backoffDelay(3, DEFAULT_BACKOFF, () => 0)).toBe(Math.round(30_000 * 6.25 * 0.8));
    expect(backoffDelay(3, DEFAULT_BACKOFF, () => 1)).toBe(Math.round(30_000 * 6.25 * 1.2));
    expect(backoffDelay(30, DEFAULT_BACKOFF, () => 0.5)).toBe(12 * HOUR);
    // The cap is the longest wait, jitter included (capped before the jitter, 14.4 h).
    expect(backoffDelay(9, DEFAULT_BACKOFF, () => 1)).toBe(12 * HOUR);
    expect(backoffDelay(9, DEFAULT_BACKOFF, () => 0)).toBe(Math.round(30_000 * 2.5 ** 8 * 0.8));
    expect(backoffDelay(5, { firstMs: 0, factor: 1, jitter: 0, maxMs: 0 })).toBe(0);
  });
});

describe("delivery defaults", () => {
  // The integration tests shorten every one of these (test/helpers/app.ts, FAST backoffs), so
  // only this holds them to what README's Webhooks section promises an operator.
  it("are the README's: 10 attempts, kept 7 days (50 000) delivered and 30 days dead, 16 queued and 32 first attempts at once", () => {
    const opts = deliveryOptions();
    expect(opts).toEqual({
      attempts: 10,
      backoff: { firstMs: 30_000, factor: 2.5, jitter: 0.2, maxMs: 12 * HOUR },
      concurrency: 16,
      lockDurationMs: 30_000,
      stalledIntervalMs: 30_000,
      keepDelivered: { age: 7 * 86_400, count: 50_000 },
      keepDead: { age: 30 * 86_400 },
      // At most 2 s a first attempt; a failed one, or one of 500 ms or more, queues the endpoint's deliveries for 30 s.
      firstAttempt: { enabled: true, timeoutMs: 2_000, pauseMs: 30_000, slowMs: 500, concurrency: 32 },
      // A stop lets attempts in flight finish for as long as a first attempt may take.
      stopGraceMs: 2_000,
    });
    // A part given keeps the defaults of the rest.
    expect(deliveryOptions({ firstAttempt: { timeoutMs: 300 } }).firstAttempt).toEqual({ ...opts.firstAttempt, timeoutMs: 300 });
  });
});

describe("signatures", () => {
  it("Standard Webhooks: the specification's test vector", () => {
    // github.com/standard-webhooks/standard-webhooks, libraries' shared test case.
    const signature = standardSignature("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, '{"test": 2432232314}', ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]);
    expect(signature).toBe("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
  });

  it("rotation: one v1 signature per secret, space-separated; X-Trophy-Signature with the first secret as written", () => {
    const body = '{"id":"x","type":"points.changed"}';
    const headers = signedHeaders("evt", body, ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "plain-secret-0123456789"], 1_700_000_000_123);
    expect(headers["webhook-id"]).toBe("evt");
    expect(headers["webhook-timestamp"]).toBe("1700000000");
    const parts = headers["webhook-signature"]!.split(" ");
    expect(parts).toHaveLength(2);
    const plain = createHmac("sha256", "plain-secret-0123456789").update(`evt.1700000000.${body}`).digest("base64");
    expect(parts[1]).toBe(`v1,${plain}`);
    expect(headers["x-trophy-signature"]).toBe(createHmac("sha256", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").update(body).digest("base64"));
    expect(trophySignature(body, "plain-secret-0123456789")).toBe(createHmac("sha256", "plain-secret-0123456789").update(body).digest("base64"));
  });
});

describe("the events a stream record stands for", () => {
  const flat = (o: string) => ["k", "ev", "u", "ada", "t", "1780000000000", "z", "UTC", "e", "lessons|1000000|e1", "o", o];

  it("maps every outcome part to its event types", () => {
    const fields = flat("c;a:first;p:xp:10:60:1:2;p:coins:5:5:0:0;s:1;fc:1;fe:2;b:weekly:3::10000000");
    const record = decodeStreamRecord("1780000000000-0", fields);
    const events = recordEvents(record, boardParts(fields));
    expect(events.map((e) => [e.type, e.subject])).toEqual([
      ["achievement.completed", "first"],
      ["points.changed", "xp"],
      ["points.level_changed", "xp"],
      ["points.changed", "coins"],
      ["streak.freeze_consumed", "fc"],
      ["streak.freeze_earned", "fe"],
      ["streak.started", "streak"],
      ["streak.extended", "streak"],
      ["leaderboard.rank_changed", "weekly:3"],
    ]);
    expect(boardParts(fields)).toEqual([{ boardKey: "weekly", run: 3, oldValue: null, newValue: 10_000_000 }]);
  });

  it("a streak extended past 1 is not a start; a lost streak and an admin grant have their own types", () => {
    const fields = flat("s:4;sl:3;fa:1;b:streaky:0:3:0");
    const events = recordEvents(decodeStreamRecord("1-0", fields), boardParts(fields));
    expect(events.map((e) => e.type)).toEqual(["streak.lost", "streak.freeze_earned", "streak.extended", "leaderboard.rank_changed"]);
    expect(boardParts(fields)[0]).toEqual({ boardKey: "streaky", run: 0, oldValue: 3, newValue: 0 });
  });

  it("a points part with nothing added stands for no points.changed (the selection may keep it: README)", () => {
    const fields = flat("p:xp:0:60:2:2");
    expect(recordEvents(decodeStreamRecord("1-0", fields), boardParts(fields))).toEqual([]);
  });

  it("freezes auto-earned and granted in one record (a grant settles the user first) are two events with two ids", () => {
    const fields = flat("fe:1;fa:2");
    const events = recordEvents(decodeStreamRecord("1-0", fields), boardParts(fields));
    expect(events.map((e) => [e.type, e.subject])).toEqual([
      ["streak.freeze_earned", "fe"],
      ["streak.freeze_earned", "fa"],
    ]);
    // Were they one id, the queue would take the grant's for a duplicate of the first and drop it.
    const ids = events.map((e) => streamEventId("6f1d1a5e-2b7c-5c3e-9a41-5b2f0c7d8e90", "demo", 0, "1-0", e.type, e.subject));
    expect(new Set(ids).size).toBe(2);
  });

  it("derives one id per (stream entry, type, subject), the same every time", () => {
    const ns = "6f1d1a5e-2b7c-5c3e-9a41-5b2f0c7d8e90";
    const id = streamEventId(ns, "demo", 3, "1780000000000-0", "points.changed", "xp");
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(streamEventId(ns, "demo", 3, "1780000000000-0", "points.changed", "xp")).toBe(id);
    expect(streamEventId(ns, "demo", 3, "1780000000000-0", "points.changed", "coins")).not.toBe(id);
    expect(streamEventId(ns, "demo", 3, "1780000000000-1", "points.changed", "xp")).not.toBe(id);
    expect(streamEventId(ns, "demo", 4, "1780000000000-0", "points.changed", "xp")).not.toBe(id);
  });
});

const BASE = `
    metrics: [{ key: lessons, name: Lessons }]
    points:
      - key: xp
        name: XP
        triggers: [{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 10 }]
        boosts:
          - { key: launch, name: Launch, multiplier: 2, start: "2026-06-03T00:00:00Z", end: "2026-06-04T00:00:00Z" }
          - { key: forever, name: Forever, multiplier: 1.5, start: "2026-06-10" }
    leaderboards:
      - { key: weekly, name: Weekly, rankBy: metric, metric: lessons, start: "2026-06-01", runUnit: day, runInterval: 7 }
      - { key: monthly, name: Monthly, rankBy: metric, metric: lessons, start: "2026-01-31", end: "2026-05-01", runUnit: month, runInterval: 1 }
      - { key: season, name: Season, rankBy: metric, metric: lessons, start: "2026-06-02", end: "2026-06-09" }
`;

describe("calendar boundaries", () => {
  const [tenant] = loadConfigText(tenantYaml("bnd", BASE), "b.yaml", {});
  const at = (iso: string) => Date.parse(iso);
  const list = (from: string, to: string) => configBoundaries(tenant!, at(from), at(to)).map((b) => [b.type, b.subject, new Date(b.at).toISOString()]);

  it("boosts start and finish at their instants, in (from, to]", () => {
    expect(list("2026-06-02T00:00:00Z", "2026-06-04T00:00:00Z").filter(([t]) => String(t).startsWith("points"))).toEqual([
      ["points.boost_started", tenant!.systems[0]!.boosts[0]!.id, "2026-06-03T00:00:00.000Z"],
      ["points.boost_finished", tenant!.systems[0]!.boosts[0]!.id, "2026-06-04T00:00:00.000Z"],
    ]);
    expect(list("2026-06-03T00:00:00Z", "2026-06-03T23:59:59Z")).toEqual([]);
  });

  it("runs: a weekly board, a perpetual board with an end, a monthly board clipped by its end", () => {
    const [launch, forever] = tenant!.systems[0]!.boosts.map((b) => b.id);
    expect(list("2026-06-01T00:00:00Z", "2026-06-15T00:00:00Z")).toEqual([
      ["leaderboard.started", "season:0", "2026-06-02T00:00:00.000Z"],
      ["points.boost_started", launch, "2026-06-03T00:00:00.000Z"],
      ["points.boost_finished", launch, "2026-06-04T00:00:00.000Z"],
      ["leaderboard.finished", "weekly:0", "2026-06-08T00:00:00.000Z"],
      ["leaderboard.started", "weekly:1", "2026-06-08T00:00:00.000Z"],
      ["leaderboard.finished", "season:0", "2026-06-09T00:00:00.000Z"],
      ["points.boost_started", forever, "2026-06-10T00:00:00.000Z"],
      ["leaderboard.finished", "weekly:1", "2026-06-15T00:00:00.000Z"],
      ["leaderboard.started", "weekly:2", "2026-06-15T00:00:00.000Z"],
    ]);
    // Monthly from Jan 31: runs start on the last day of shorter months; the board ends on May 1.
    expect(list("2026-02-01T00:00:00Z", "2026-06-01T00:00:00Z").filter(([, s]) => String(s).startsWith("monthly"))).toEqual([
      ["leaderboard.finished", "monthly:0", "2026-02-28T00:00:00.000Z"],
      ["leaderboard.started", "monthly:1", "2026-02-28T00:00:00.000Z"],
      ["leaderboard.finished", "monthly:1", "2026-03-31T00:00:00.000Z"],
      ["leaderboard.started", "monthly:2", "2026-03-31T00:00:00.000Z"],
      ["leaderboard.finished", "monthly:2", "2026-04-30T00:00:00.000Z"],
      ["leaderboard.started", "monthly:3", "2026-04-30T00:00:00.000Z"],
      ["leaderboard.finished", "monthly:3", "2026-05-01T00:00:00.000Z"],
    ]);
  });

  it("a long gap replays at most the last 10 boundaries of a board", () => {
    const weekly = list("2026-06-01T00:00:00Z", "2027-06-01T00:00:00Z").filter(([, s]) => String(s).startsWith("weekly"));
    expect(weekly).toHaveLength(10);
    expect(weekly.at(-1)).toEqual(["leaderboard.started", "weekly:52", "2027-05-31T00:00:00.000Z"]);
  });
});

describe("calendar boundaries edited in the tenant file", () => {
  const at = (iso: string) => Date.parse(iso);
  const file = (launchEnd: string, monthlyEnd: string) =>
    loadConfigText(tenantYaml("bnd", BASE.replace('end: "2026-06-04T00:00:00Z"', `end: "${launchEnd}"`).replace('end: "2026-05-01"', `end: "${monthlyEnd}"`)), "b.yaml", {})[0]!;
  /** The file edited from `before` to `after`, the last tick at `cursor`: late boundaries and moved records. */
  const edit = (before: ReturnType<typeof file>, after: ReturnType<typeof file>, cursor: string) => {
    const first = editedBoundaries(before, null, at(cursor));
    expect(first.late).toEqual([]);
    const { late, moved, snapshot } = editedBoundaries(after, first.snapshot, at(cursor));
    // Read again with the same file, nothing is late any more.
    expect(editedBoundaries(after, snapshot, at(cursor)).late).toEqual([]);
    return { late: late.map((b) => [b.type, b.subject, new Date(b.at).toISOString()]), moved: Object.fromEntries([...moved].map(([k, t]) => [k.replace(/\|.*:/, "|").replace(/\|[0-9a-f-]{36}$/, "|boost"), new Date(t).toISOString()])) };
  };
  const original = file("2026-06-04T00:00:00Z", "2026-05-01");

  it("an end moved before the last tick, not announced yet: late; moved later after it was announced: recorded", () => {
    // The monthly board's end moved from 1 May to 15 March, read on 20 March: the run of 28 Feb finishes on 15 March.
    expect(edit(original, file("2026-06-04T00:00:00Z", "2026-03-15"), "2026-03-20T00:00:00Z")).toEqual({ late: [["leaderboard.finished", "monthly:1", "2026-03-15T00:00:00.000Z"]], moved: {} });
    // Read on 10 March, the new end is still ahead: the window (cursor, now] holds it.
    expect(edit(original, file("2026-06-04T00:00:00Z", "2026-03-15"), "2026-03-10T00:00:00Z")).toEqual({ late: [], moved: {} });
    // Moved from 15 March (announced) to 20 March, read on 25 March: late, and the announcement recorded.
    const march15 = file("2026-06-04T00:00:00Z", "2026-03-15");
    expect(edit(march15, file("2026-06-04T00:00:00Z", "2026-03-20"), "2026-03-25T00:00:00Z")).toEqual({
      late: [["leaderboard.finished", "monthly:1", "2026-03-20T00:00:00.000Z"]],
      moved: { "leaderboard.finished|1": "2026-03-15T00:00:00.000Z" },
    });
    // Moved earlier after it was announced: not again; the instant it was announced at recorded.
    expect(edit(march15, file("2026-06-04T00:00:00Z", "2026-03-10"), "2026-03-25T00:00:00Z")).toEqual({ late: [], moved: { "leaderboard.finished|1": "2026-03-15T00:00:00.000Z" } });
    // A boost's end moved from 4 June (announced) to 1 July: recorded; to 3 June 12:00 before that was announced: late.
    expect(edit(original, file("2026-07-01T00:00:00Z", "2026-05-01"), "2026-06-05T00:00:00Z")).toEqual({ late: [], moved: { "points.boost_finished|boost": "2026-06-04T00:00:00.000Z" } });
    expect(edit(original, file("2026-06-03T12:00:00Z", "2026-05-01"), "2026-06-03T18:00:00Z")).toEqual({ late: [["points.boost_finished", original.systems[0]!.boosts[0]!.id, "2026-06-03T12:00:00.000Z"]], moved: {} });
  });

  it("an end moved earlier after it was announced, then back or later: announced again only later than it was", () => {
    /** Reads the files one after the other, each at its cursor, keeping the snapshot and the records as the timeline does. */
    const reads = (steps: [ReturnType<typeof file>, string][]) => {
      let stored: Map<string, string> | null = null;
      return steps.map(([tenant, cursor]) => {
        const { late, moved, snapshot } = editedBoundaries(tenant, stored, at(cursor));
        stored = new Map([...(stored ?? []), ...snapshot, ...[...moved].map(([k, t]): [string, string] => [`s:${k}`, String(t)])]);
        for (const b of late) if (stored.has(`s:${b.type}|${b.subject}`)) stored.set(`s:${b.type}|${b.subject}`, String(b.at));
        return late.map((b) => [b.type, b.subject, new Date(b.at).toISOString()]);
      });
    };
    // The monthly board's run of 28 Feb finished (announced) on 31 March; end moved to 15 March on 10 April, back on 12 April.
    expect(reads([[original, "2026-04-01T00:00:00Z"], [file("2026-06-04T00:00:00Z", "2026-03-15"), "2026-04-10T00:00:00Z"], [original, "2026-04-12T00:00:00Z"]])).toEqual([[], [], []]);
    // The boost's end announced on 4 June, moved to 3 June 12:00, then to 4 June 12:00 (later than announced): announced again.
    const launchId = original.systems[0]!.boosts[0]!.id;
    expect(
      reads([
        [original, "2026-06-05T00:00:00Z"],
        [file("2026-06-03T12:00:00Z", "2026-05-01"), "2026-06-05T06:00:00Z"],
        [original, "2026-06-05T07:00:00Z"],
        [file("2026-06-04T12:00:00Z", "2026-05-01"), "2026-06-05T08:00:00Z"],
        [file("2026-06-04T12:00:00Z", "2026-05-01"), "2026-06-05T09:00:00Z"],
      ]),
    ).toEqual([[], [], [], [["points.boost_finished", launchId, "2026-06-04T12:00:00.000Z"]], []]);
    // The weekly board ended on 15 June (its run of 8 June's own end) and moved to 1 July on the 20th: the runs of 15 and 22 June are back.
    const weekly = (end: string) => loadConfigText(tenantYaml("bnd", BASE.replace('runUnit: day, runInterval: 7 }', `runUnit: day, runInterval: 7, end: "${end}" }`)), "b.yaml", {})[0]!;
    expect(reads([[weekly("2026-06-15"), "2026-06-16T00:00:00Z"], [weekly("2026-07-01"), "2026-06-23T00:00:00Z"]]).at(-1)!.filter(([, s]) => String(s).startsWith("weekly"))).toEqual([
      ["leaderboard.started", "weekly:2", "2026-06-15T00:00:00.000Z"],
      ["leaderboard.finished", "weekly:2", "2026-06-22T00:00:00.000Z"],
      ["leaderboard.started", "weekly:3", "2026-06-22T00:00:00.000Z"],
    ]);
    // Moved back before them on the 24th and later again on the 25th: announced already.
    expect(reads([[weekly("2026-06-15"), "2026-06-16T00:00:00Z"], [weekly("2026-07-01"), "2026-06-23T00:00:00Z"], [weekly("2026-06-15"), "2026-06-24T00:00:00Z"], [weekly("2026-07-01"), "2026-06-25T00:00:00Z"]]).slice(2)).toEqual([[], []]);
  });

  it("without a snapshot (the first tick of a version that keeps one), nothing is late", () => {
    const { late, moved, snapshot } = editedBoundaries(file("2026-06-03T12:00:00Z", "2026-03-15"), null, at("2026-06-05T00:00:00Z"));
    expect([late, moved.size]).toEqual([[], 0]);
    // A board's end, and the instant up to which its boundaries count as announced (the cursor, short of the end).
    expect(snapshot.get("b:monthly")).toBe(`${at("2026-03-15")} ${at("2026-03-15") - 1}`);
    expect(snapshot.get("b:weekly")).toBe(`- ${at("2026-06-05T00:00:00Z")}`);
  });
});

function errorOf(body: string): ConfigError {
  try {
    loadConfigText(tenantYaml("cfg", BASE + body), "x.yaml", {});
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error("expected a ConfigError");
}

describe("webhook config", () => {
  const ok = (extra = "") => `    webhooks:\n      - { key: main, url: "https://example.com/hooks", secret: "0123456789abcdef", events: [points.changed]${extra} }\n`;

  it("compiles an endpoint with defaults", () => {
    const [tenant] = loadConfigText(tenantYaml("cfg", BASE + ok()), "x.yaml", {});
    expect(tenant!.webhooks).toEqual([
      { key: "main", url: "https://example.com/hooks", authorization: null, secrets: ["0123456789abcdef"], events: new Set(["points.changed"]), coalesceMs: new Map(), timeoutMs: 10_000 },
    ]);
    const [none] = loadConfigText(tenantYaml("cfg", BASE), "x.yaml", {});
    expect(none!.webhooks).toEqual([]);
  });

  it("turns a URL's userinfo into a Basic Authorization, percent-decoded, and keeps the URL without it", () => {
    const compiled = (url: string) => loadConfigText(tenantYaml("cfg", BASE + ok().replace("https://example.com/hooks", url)), "x.yaml", {})[0]!.webhooks[0]!;
    const basic = (userPass: string) => `Basic ${Buffer.from(userPass, "utf8").toString("base64")}`;
    expect(compiled("https://user:p%40ss@hooks.example.com/laurel?x=1")).toMatchObject({ url: "https://hooks.example.com/laurel?x=1", authorization: basic("user:p@ss") });
    // curl's reading: a user alone has an empty password; a UTF-8 password is sent as UTF-8.
    expect(compiled("https://only@hooks.example.com/")).toMatchObject({ url: "https://hooks.example.com/", authorization: basic("only:") });
    expect(compiled("https://u%C3%A9:%E2%82%AC@hooks.example.com/")).toMatchObject({ url: "https://hooks.example.com/", authorization: basic("ué:€") });
    // Without a userinfo: the URL as before, no header.
    expect(compiled("https://hooks.example.com/laurel")).toMatchObject({ url: "https://hooks.example.com/laurel", authorization: null });
    // A userinfo that cannot be decoded, or a user with a colon (RFC 7617), is refused without showing it.
    for (const url of ["https://us%zzer:secretpw@hooks.example.com/", "https://a%3Ab:secretpw@hooks.example.com/"]) {
      const err = errorOf(ok().replace("https://example.com/hooks", url));
      expect(err.path, url).toBe("$input.tenants[0].webhooks[0].url");
      expect(err.message, url).not.toContain("secretpw");
    }
  });

  it("refuses a bad endpoint, naming the field", () => {
    expect(errorOf(ok().replace('secret: "0123456789abcdef"', 'secret: "0123456789abcdef", secrets: ["fedcba9876543210"]')).path).toBe("$input.tenants[0].webhooks[0].secret");
    expect(errorOf(ok().replace('secret: "0123456789abcdef", ', "")).path).toBe("$input.tenants[0].webhooks[0].secret");
    expect(errorOf(ok().replace("https://example.com/hooks", "ftp://example.com/x")).path).toBe("$input.tenants[0].webhooks[0].url");
    expect(errorOf(ok().replace("points.changed]", "points.exploded]")).path).toMatch(/^\$input\.tenants\[0\]\.webhooks\[0\]\.events/);
    // The path the file has: `secret` for one, `secrets[k]` for a list.
    expect(errorOf(ok().replace('"0123456789abcdef"', '"whsec_not base64 at all!"')).path).toBe("$input.tenants[0].webhooks[0].secret");
    expect(errorOf(ok().replace('secret: "0123456789abcdef"', 'secrets: ["0123456789abcdef", "whsec_not base64 at all!"]')).path).toBe("$input.tenants[0].webhooks[0].secrets[1]");
    // A URL WHATWG would repair into another host (http:///x is http://x/) is refused.
    for (const url of ["http:///x", "https:/example.com/hooks", "http://"]) expect(errorOf(ok().replace("https://example.com/hooks", url)).path, url).toBe("$input.tenants[0].webhooks[0].url");
    expect(errorOf(ok(", coalesce: { streak.lost: 5 }").replace("points.changed]", "points.changed, streak.lost]")).message).toContain("only points.changed and leaderboard.rank_changed");
    expect(errorOf(ok(", coalesce: { leaderboard.rank_changed: 5 }")).message).toContain("does not subscribe");
    const twice = errorOf(ok().replace("points.changed]", "points.changed, points.changed]"));
    expect(twice.path).toBe("$input.tenants[0].webhooks[0].events[1]");
    expect(twice.message).toContain('"points.changed" is listed twice');
    expect(errorOf(ok() + ok().replace("    webhooks:\n", "")).path).toBe("$input.tenants[0].webhooks[1].key");
  });
});
