import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { shardOf } from "../../src/domain/shards.js";
import { demoConfig, startTestApp, uniqueTenantId, type TestApp } from "../helpers/app.js";

/**
 * Streaks on the user's local calendar (spec: Streak; DESIGN: Time), moved by the manual clock.
 */
/** The demo tenant with another frequency and without freezes (freezes have their own tests). */
export function streakYaml(frequency: "daily" | "weekly" | "monthly"): string {
  return withoutFreezes(demoConfig(uniqueTenantId()).yaml).replace("frequency: daily", `frequency: ${frequency}`);
}

function withoutFreezes(yaml: string): string {
  return yaml.replace(/\n      freezes:\n(        .*\n)+/, "\n");
}

describe("daily streaks", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ yaml: streakYaml("daily"), manualClock: "2026-03-02T12:00:00Z" });
  });
  afterAll(async () => t.close());

  const lesson = (user: Record<string, unknown>, value = 1) => t.call("POST", "/v1/metrics/lessons/event", { user, value });

  it("extends once per local day, breaks after a missed day", async () => {
    const u = { id: "daily", tz: "UTC" };
    await t.setClock("2026-03-02T08:00:00Z");
    expect((await lesson(u)).body.currentStreak).toMatchObject({ length: 1, extended: true, started: "2026-03-02", expires: "2026-03-03" });
    expect((await lesson(u)).body.currentStreak).toMatchObject({ length: 1, extended: false });
    await t.setClock("2026-03-03T23:59:00Z");
    expect((await lesson(u)).body.currentStreak).toMatchObject({ length: 2, extended: true, started: "2026-03-02", periodStart: "2026-03-03", expires: "2026-03-04" });
    // 4 March missed: on 5 March the streak has already been lost; an event not meeting the threshold shows 0.
    await t.setClock("2026-03-05T10:00:00Z");
    expect((await t.call("POST", "/v1/metrics/api-calls/event", { user: u, value: 1 })).body.currentStreak).toMatchObject({ length: 0, started: null, expires: null, extended: false });
    expect((await lesson(u)).body.currentStreak).toMatchObject({ length: 1, started: "2026-03-05", extended: true });
  });

  it("accumulates decimal values within the period until the threshold is met", async () => {
    const u = { id: "partial", tz: "UTC" };
    await t.setClock("2026-03-10T08:00:00Z");
    expect((await lesson(u, 0.4)).body.currentStreak).toMatchObject({ length: 0, extended: false });
    expect((await lesson(u, 0.6)).body.currentStreak).toMatchObject({ length: 1, extended: true });
    // The next day starts from zero again.
    await t.setClock("2026-03-11T08:00:00Z");
    expect((await lesson(u, 0.5)).body.currentStreak).toMatchObject({ length: 1, extended: false, expires: "2026-03-11" });
  });

  it("follows the local calendar across a DST change (America/New_York, 8 March 2026)", async () => {
    const u = { id: "dst", tz: "America/New_York" };
    // 23:30 local on 7 March (EST, UTC-5) = 04:30Z on 8 March.
    await t.setClock("2026-03-08T04:30:00Z");
    expect((await lesson(u)).body.currentStreak).toMatchObject({ length: 1, periodStart: "2026-03-07" });
    // 8 March is 23 hours long locally; 23:30 EDT (UTC-4) = 03:30Z on 9 March.
    await t.setClock("2026-03-09T03:30:00Z");
    expect((await lesson(u)).body.currentStreak).toMatchObject({ length: 2, periodStart: "2026-03-08", extended: true });
    // 00:10 EDT on 9 March.
    await t.setClock("2026-03-09T04:10:00Z");
    expect((await lesson(u)).body.currentStreak).toMatchObject({ length: 3, periodStart: "2026-03-09", extended: true });
  });

  it("keeps the streak on the new local calendar after a zone change, and remembers the zone", async () => {
    await t.setClock("2026-03-20T10:00:00Z"); // 19:00 in Tokyo, 20 March
    expect((await lesson({ id: "traveller", tz: "Asia/Tokyo" })).body.currentStreak).toMatchObject({ length: 1, periodStart: "2026-03-20" });
    // Flies to Los Angeles: 21 March 10:00Z is 03:00 PDT on 21 March, the next local day.
    await t.setClock("2026-03-21T10:00:00Z");
    expect((await lesson({ id: "traveller", tz: "America/Los_Angeles" })).body.currentStreak).toMatchObject({ length: 2, periodStart: "2026-03-21" });
    // Later events omit tz: the stored zone (Los Angeles) applies. 22 March 05:00Z is 22:00 on 21 March in LA.
    await t.setClock("2026-03-22T05:00:00Z");
    expect((await lesson({ id: "traveller" })).body.currentStreak).toMatchObject({ length: 2, periodStart: "2026-03-21", extended: false });
  });

  it("a zone change that moves the calendar back does not break or double-extend the streak", async () => {
    await t.setClock("2026-03-25T20:00:00Z"); // 26 March 05:00 in Tokyo
    expect((await lesson({ id: "westward", tz: "Asia/Tokyo" })).body.currentStreak).toMatchObject({ length: 1, periodStart: "2026-03-26" });
    await t.setClock("2026-03-25T21:00:00Z"); // still 25 March in New York
    const back = (await lesson({ id: "westward", tz: "America/New_York" })).body.currentStreak;
    // Started on 26 March in Tokyo, which New York has not reached: shown as today, not tomorrow.
    expect(back).toMatchObject({ length: 1, extended: false, periodStart: "2026-03-25", started: "2026-03-25", expires: "2026-03-27" });
    expect((await t.call("GET", "/v1/users/westward/streak")).body).toMatchObject({ length: 1, started: "2026-03-25", periodStart: "2026-03-25" });
  });

  // A user whose zone alternates (two devices in two zones). The stored periods are the old
  // calendar's numbers, read by the new calendar as its own; two ways of mapping them that were
  // tried at the thirty-fifth stop and dropped are held off by these: shifting a streak carried
  // west back to end on the new calendar's today (every move east extended it again), and
  // bridging the periods a move east skipped while the old deadline had not passed (a user who
  // did nothing kept the streak alive for weeks by two profile updates a day).
  it("a zone that alternates between Tokyo and New York extends the streak once for one instant", async () => {
    await t.setClock("2026-07-08T20:00:00Z"); // 16:00 on 8 July in New York, 05:00 on 9 July in Tokyo
    const lengths = [];
    for (const tz of ["America/New_York", "Asia/Tokyo", "America/New_York", "Asia/Tokyo", "America/New_York", "Asia/Tokyo"]) {
      lengths.push((await lesson({ id: "two-devices", tz })).body.currentStreak.length);
    }
    // New York's 8 July; Tokyo's 9 July holds the same instant, so the lesson covers it there.
    expect(lengths).toEqual([1, 1, 1, 1, 1, 1]);
    // Each calendar's next day extends it once, whichever device sends it.
    await t.setClock("2026-07-09T20:00:00Z"); // 16:00 on 9 July in New York, 05:00 on 10 July in Tokyo
    lengths.length = 0;
    for (const tz of ["Asia/Tokyo", "America/New_York", "Asia/Tokyo", "America/New_York"]) {
      lengths.push((await lesson({ id: "two-devices", tz })).body.currentStreak.length);
    }
    expect(lengths).toEqual([2, 2, 2, 2]);
  });

  // The known gap until the thirty-sixth stop: a move east could skip a local day. The stored
  // period is a number the new calendar reads as its own; the instant of the work is now read on
  // the new calendar too (lua/includes/state.lua lastCovered).
  it("a move east that skips a local day keeps the streak: the work's instant is on the new calendar's yesterday", async () => {
    await t.setClock("2026-01-12T04:00:00Z"); // 23:00 on 11 January in New York
    expect((await lesson({ id: "eastward", tz: "America/New_York" })).body.currentStreak).toMatchObject({ length: 1, periodStart: "2026-01-11" });
    await t.setClock("2026-01-12T15:30:00Z"); // 00:30 on 13 January in Tokyo; 12 January there holds 04:00Z
    expect((await lesson({ id: "eastward", tz: "Asia/Tokyo" })).body.currentStreak).toMatchObject({
      length: 2,
      extended: true,
      periodStart: "2026-01-13",
      expires: "2026-01-14",
    });
  });

  it("a zone update east is read on the new calendar by the streak reads, the deadline index and the next event", async () => {
    await t.setClock("2026-01-20T04:00:00Z"); // 23:00 on 19 January in New York
    expect((await lesson({ id: "east-update", tz: "America/New_York" })).body.currentStreak).toMatchObject({ length: 1 });
    await t.setClock("2026-01-20T15:10:00Z"); // 00:10 on 21 January in Tokyo
    expect((await t.call("PATCH", "/v1/users/east-update", { tz: "Asia/Tokyo" })).status).toBe(200);
    // Covered through Tokyo's 20 January (13:00 there): alive until the end of 21 January.
    expect((await t.call("GET", "/v1/users/east-update/streak")).body).toMatchObject({ length: 1, periodStart: "2026-01-21", expires: "2026-01-21" });
    const tenant = t.tenants[0]!;
    const deadlines = `{${tenant.id}:${shardOf("east-update", tenant.shards)}}:sd`;
    expect(Number(await t.redis.zscore(deadlines, "east-update"))).toBe(Date.parse("2026-01-21T15:00:00Z"));
    expect((await lesson({ id: "east-update" })).body.currentStreak).toMatchObject({ length: 2, extended: true, expires: "2026-01-22" });
  });

  it("work at the very instant the new zone's day begins is on that day there: a move east does not extend for it again", async () => {
    await t.setClock("2026-02-02T15:00:00.000Z"); // 10:00 on 2 February in New York, 00:00:00.000 on 3 February in Tokyo
    expect((await lesson({ id: "east-midnight", tz: "America/New_York" })).body.currentStreak).toMatchObject({ length: 1, periodStart: "2026-02-02" });
    await t.setClock("2026-02-02T16:00:00Z"); // 01:00 on 3 February in Tokyo: its first millisecond holds the lesson
    expect((await lesson({ id: "east-midnight", tz: "Asia/Tokyo" })).body.currentStreak).toMatchObject({ length: 1, periodStart: "2026-02-03" });
  });

  it("two devices in two zones, one lesson a day: the streak is never lost, and grows at most once a day", async () => {
    const lengths = [];
    for (let day = 0; day < 8; day++) {
      await t.setClock(new Date(Date.parse("2026-09-01T20:00:00Z") + day * 86_400_000).toISOString()); // 16:00 in New York, 05:00 the next day in Tokyo
      lengths.push((await lesson({ id: "day-by-device", tz: day % 2 === 0 ? "America/New_York" : "Asia/Tokyo" })).body.currentStreak.length);
    }
    // Tokyo's lessons extend (their day follows the one New York's lesson covered there); New
    // York's do not (Tokyo extended that day's number already), but they keep the streak: the
    // next Tokyo lesson reads their instant on Tokyo's yesterday.
    expect(lengths).toEqual([1, 2, 2, 3, 3, 4, 4, 5]);
  });

  it("the work's instant is the period's first meeting of the threshold, not a later value", async () => {
    await t.setClock("2026-08-20T11:30:00Z"); // 00:30 on 20 August in Pago Pago
    expect((await lesson({ id: "late-value", tz: "Pacific/Pago_Pago" })).body.currentStreak).toMatchObject({ length: 1 });
    await t.setClock("2026-08-21T10:50:00Z"); // 23:50 on 20 August there
    expect((await lesson({ id: "late-value" }, 0.01)).body.currentStreak).toMatchObject({ length: 1, extended: false });
    // 01:00 on 22 August in Kiritimati: the lesson (01:30 on 21 August there) covers 21 August,
    // so today extends; the late 0.01 (00:50 today there) would have taken today for nothing.
    await t.setClock("2026-08-21T11:00:00Z");
    expect((await lesson({ id: "late-value", tz: "Pacific/Kiritimati" })).body.currentStreak).toMatchObject({ length: 2, extended: true });
  });

  // From the second review: a later lesson in a met period did not move the work's instant, so
  // a move east read the first lesson's and lost a streak kept by a lesson every 23 hours.
  it("a later full lesson in a met period is the work a move east reads", async () => {
    const u = "every-23-hours";
    await t.setClock("2026-03-16T01:30:00Z"); // 10:30 on 16 March in Tokyo
    expect((await lesson({ id: u, tz: "Asia/Tokyo" })).body.currentStreak).toMatchObject({ length: 1 });
    await t.setClock("2026-03-17T00:30:00Z"); // 09:30 on 17 March in Tokyo
    expect((await lesson({ id: u })).body.currentStreak).toMatchObject({ length: 2 });
    await t.setClock("2026-03-17T23:30:00Z"); // 23:30 on 17 March in London: 17 March is done
    expect((await lesson({ id: u, tz: "Europe/London" })).body.currentStreak).toMatchObject({ length: 2, extended: false });
    await t.setClock("2026-03-18T22:30:00Z"); // 07:30 on 19 March in Tokyo; the London lesson was 08:30 on 18 March there
    expect((await lesson({ id: u, tz: "Asia/Tokyo" })).body.currentStreak).toMatchObject({ length: 3, extended: true });
  });

  it("a zone that alternates without activity does not keep a streak alive", async () => {
    await t.setClock("2026-08-05T15:00:00Z");
    expect((await lesson({ id: "idle-traveller", tz: "America/New_York" })).body.currentStreak).toMatchObject({ length: 1 });
    for (let day = 7; day <= 12; day++) {
      // 01:00 UTC: still the day before in New York, already the day in London.
      await t.setClock(`2026-08-${String(day).padStart(2, "0")}T01:00:00Z`);
      expect((await t.call("PATCH", "/v1/users/idle-traveller", { tz: "Europe/London" })).status).toBe(200);
      await t.setClock(`2026-08-${String(day).padStart(2, "0")}T01:05:00Z`);
      expect((await t.call("PATCH", "/v1/users/idle-traveller", { tz: "America/New_York" })).status).toBe(200);
    }
    await t.setClock("2026-08-12T15:00:00Z");
    expect((await t.call("GET", "/v1/users/idle-traveller/streak")).body).toMatchObject({ length: 0 });
    expect((await lesson({ id: "idle-traveller" })).body.currentStreak).toMatchObject({ length: 1, started: "2026-08-12" });
  });
});

describe("freezes and zone changes", () => {
  // From the review: after a move east, the first settlement read the stored period number and
  // charged a freeze for the day the work's instant covered on the new calendar.
  it("a move east, then a missed day: one freeze for the one day missed on the new calendar", async () => {
    const t = await startTestApp({ yaml: demoConfig().yaml, manualClock: "2026-06-12T03:00:00Z", jobs: false });
    try {
      for (const [id, granted] of [["two-freezes", 2], ["one-freeze", 1]] as const) {
        await t.setClock("2026-06-12T03:00:00Z"); // 23:00 on 11 June in New York, 12:00 on 12 June in Tokyo
        expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id, tz: "America/New_York" }, value: 1 })).body.currentStreak).toMatchObject({ length: 1 });
        const freezes = Array.from({ length: granted }, () => ({ userId: id }));
        expect((await t.call("POST", "/admin/v1/streaks/freezes", { freezes }, { "x-api-key": t.adminKey })).status).toBe(200);
        await t.setClock("2026-06-12T05:00:00Z");
        expect((await t.call("PATCH", `/v1/users/${id}`, { tz: "Asia/Tokyo" })).status).toBe(200);
        expect((await t.call("GET", `/v1/users/${id}/streak`)).body).toMatchObject({ length: 1, periodStart: "2026-06-12", expires: "2026-06-13" });
        // 13 June (Tokyo) missed; 00:30 on 14 June an event on another metric settles.
        await t.setClock("2026-06-13T15:30:00Z");
        expect((await t.call("POST", "/v1/metrics/api-calls/event", { user: { id }, value: 1 })).body.currentStreak).toMatchObject({ length: 1, freezes: granted - 1, expires: "2026-06-14" });
        expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id }, value: 1 })).body.currentStreak).toMatchObject({ length: 2, extended: true });
      }
    } finally {
      await t.close();
    }
  });

  // From the review of the first version of this rule: the day's accumulated values were keyed
  // by the period number, which a zone change carries over, so a value of 0.01 on Pago Pago's day
  // N met the threshold with Kiritimati's day-N lesson and moved the work's instant 23 hours on.
  it("a value sent after a zone change does not meet the threshold with the old calendar's work", async () => {
    const t = await startTestApp({ yaml: streakYaml("daily"), manualClock: "2026-07-01T10:30:00Z", jobs: false });
    try {
      const lesson = (user: Record<string, unknown>, value: number) => t.call("POST", "/v1/metrics/lessons/event", { user, value });
      // 00:30 on 2 July in Kiritimati; then the user moves to Pago Pago (23:31 on 30 June there).
      expect((await lesson({ id: "carried", tz: "Pacific/Kiritimati" }, 1)).body.currentStreak).toMatchObject({ length: 1 });
      await t.setClock("2026-07-01T10:31:00Z");
      expect((await t.call("PATCH", "/v1/users/carried", { tz: "Pacific/Pago_Pago" })).status).toBe(200);
      await t.setClock("2026-07-03T10:50:00Z"); // 23:50 on 2 July in Pago Pago, the number Kiritimati extended
      expect((await lesson({ id: "carried" }, 0.01)).body.currentStreak).toMatchObject({ length: 1, extended: false });
      await t.setClock("2026-07-03T11:10:00Z"); // 01:10 on 4 July in Kiritimati: 3 July there had no work
      expect((await t.call("PATCH", "/v1/users/carried", { tz: "Pacific/Kiritimati" })).status).toBe(200);
      expect((await t.call("GET", "/v1/users/carried/streak")).body).toMatchObject({ length: 0 });
    } finally {
      await t.close();
    }
  });

  // Also from the review: a freeze's period number read a day ahead on a calendar to the west, and
  // back; zone round trips must not make freezes cover more than their days (about two periods,
  // the freezes' periods and the 25 hours between the zones at most).
  it("zone round trips between Kiritimati and Pago Pago do not stretch two freezes", async () => {
    const t = await startTestApp({ yaml: demoConfig().yaml, manualClock: "2026-06-01T11:00:00Z", jobs: false });
    try {
      const id = "round-trips";
      const start = Date.parse("2026-06-01T11:00:00Z"); // 01:00 on 2 June in Kiritimati
      expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id, tz: "Pacific/Kiritimati" }, value: 1 })).body.currentStreak).toMatchObject({ length: 1 });
      const freezes = [{ userId: id }, { userId: id }];
      expect((await t.call("POST", "/admin/v1/streaks/freezes", { freezes }, { "x-api-key": t.adminKey })).status).toBe(200);
      for (let hours = 12; hours <= 120; hours += 12) {
        await t.setClock(new Date(start + hours * 3_600_000).toISOString());
        const tz = (hours / 12) % 2 === 1 ? "Pacific/Pago_Pago" : "Pacific/Kiritimati";
        // An event on another metric: a zone change and a settlement on the new calendar.
        expect((await t.call("POST", "/v1/metrics/api-calls/event", { user: { id, tz }, value: 1 })).status).toBe(201);
      }
      // One day of work, two freezes, a day's grace and 25 hours of zones: gone by 122 hours.
      await t.setClock(new Date(start + 122 * 3_600_000).toISOString());
      for (const tz of ["Pacific/Pago_Pago", "Pacific/Kiritimati"]) {
        expect((await t.call("POST", "/v1/metrics/api-calls/event", { user: { id, tz }, value: 1 })).body.currentStreak).toMatchObject({ length: 0 });
      }
    } finally {
      await t.close();
    }
  });
});

describe("a threshold of several events across a zone change", () => {
  /** The demo tenant without freezes, its streak met by `threshold` lessons a period. */
  function yamlWith(frequency: "daily" | "monthly", threshold: number): string {
    const yaml = streakYaml(frequency).replace(/(- metric: lessons\n\s+threshold: )1\n/, `$1${threshold}\n`);
    expect(yaml).toContain(`threshold: ${threshold}\n`);
    return yaml;
  }

  // From the second review: the first version of the restart cleared the period's values at any
  // change of the zone's name, so a user whose devices send Asia/Kolkata and Asia/Calcutta (one
  // zone, two names) never met a threshold of three.
  it("keeps the period's values when the new zone's period began before them (another name of the zone, the same offset)", async () => {
    const t = await startTestApp({ yaml: yamlWith("daily", 3), manualClock: "2026-03-20T06:00:00Z", jobs: false });
    try {
      const lengths = [];
      for (const tz of ["Asia/Kolkata", "Asia/Calcutta", "Asia/Kolkata", "Asia/Calcutta"]) {
        lengths.push((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "aliases", tz }, value: 1 })).body.currentStreak.length);
      }
      expect(lengths).toEqual([0, 0, 1, 1]);
    } finally {
      await t.close();
    }
  });

  it("monthly: lessons in New York, then Chicago in the same month, count together", async () => {
    const t = await startTestApp({ yaml: yamlWith("monthly", 3), manualClock: "2026-05-10T15:00:00Z", jobs: false });
    try {
      const lesson = (tz?: string) => t.call("POST", "/v1/metrics/lessons/event", { user: tz ? { id: "mover", tz } : { id: "mover" }, value: 1 });
      expect((await lesson("America/New_York")).body.currentStreak).toMatchObject({ length: 0 });
      expect((await lesson()).body.currentStreak).toMatchObject({ length: 0 });
      await t.setClock("2026-05-25T15:00:00Z");
      expect((await t.call("PATCH", "/v1/users/mover", { tz: "America/Chicago" })).status).toBe(200);
      expect((await lesson()).body.currentStreak).toMatchObject({ length: 1, extended: true, periodStart: "2026-05-01" });
    } finally {
      await t.close();
    }
  });
});

describe("the work's instant, played", () => {
  // From the third review: while each further full threshold of the event's own metric moved the
  // work's instant, a -1 then +1, or one cheap metric of a mode-all rule, moved it to the end of
  // the day for nothing, and a move east then took the next day as covered. Baseline: the lesson
  // at 00:05 on 10 May in New York is 18:05 on 10 May in Kiritimati; at 00:30 on 12 May there,
  // 11 May had no work, and the streak is lost.
  /** A daily streak of lessons and API calls, one of each a day, in `mode`. */
  const lessonsAndCalls = (mode: "any" | "all"): string => {
    const yaml = streakYaml("daily")
      .replace("frequency: daily", `frequency: daily\n      mode: ${mode}`)
      .replace(/(- metric: lessons\n\s+threshold: 1\n)/, "$1        - metric: api-calls\n          threshold: 1\n");
    expect(yaml).toContain(`mode: ${mode}\n`);
    expect(yaml).toContain("- metric: api-calls\n          threshold: 1\n");
    return yaml;
  };
  const historyOfTwo = async (t: TestApp, id: string, extra: (id: string) => Promise<void>) => {
    const event = (metric: string, user: Record<string, unknown>, value = 1) => t.call("POST", `/v1/metrics/${metric}/event`, { user, value });
    await t.setClock("2026-05-09T14:00:00Z"); // 10:00 on 9 May in New York
    await event("lessons", { id, tz: "America/New_York" });
    await event("api-calls", { id });
    await t.setClock("2026-05-10T04:05:00Z"); // 00:05 on 10 May in New York
    await event("lessons", { id });
    expect((await event("api-calls", { id })).body.currentStreak).toMatchObject({ length: 2 });
    await t.setClock("2026-05-11T03:00:00Z"); // 23:00 on 10 May in New York
    await extra(id);
    await t.setClock("2026-05-11T10:30:00Z"); // 00:30 on 12 May in Kiritimati
    await event("lessons", { id, tz: "Pacific/Kiritimati" });
    return (await event("api-calls", { id })).body.currentStreak;
  };
  const send = async (t: TestApp, id: string, metric: string, value: number) =>
    expect((await t.call("POST", `/v1/metrics/${metric}/event`, { user: { id }, value })).status).toBe(201);

  it("a -1 then +1 late in a met period is no new work (a lesson there is)", async () => {
    const t = await startTestApp({ yaml: streakYaml("daily"), manualClock: "2026-05-09T14:00:00Z", jobs: false });
    try {
      const played = await historyOfTwo(t, "played", async (id) => {
        for (const value of [-1, 1]) await send(t, id, "lessons", value);
      });
      expect(played).toMatchObject({ length: 1, started: "2026-05-12" });
      // The control: a lesson at 23:00 on 10 May is 17:00 on 11 May in Kiritimati, which it covers.
      expect(await historyOfTwo(t, "control", (id) => send(t, id, "lessons", 1))).toMatchObject({ length: 3 });
    } finally {
      await t.close();
    }
  });

  it("mode any: another metric's full threshold is more work, and moves the instant", async () => {
    const t = await startTestApp({ yaml: lessonsAndCalls("any"), manualClock: "2026-05-09T14:00:00Z", jobs: false });
    try {
      const event = (metric: string, user: Record<string, unknown>) => t.call("POST", `/v1/metrics/${metric}/event`, { user, value: 1 });
      await event("lessons", { id: "u", tz: "America/New_York" }); // 10:00 on 9 May in New York
      await t.setClock("2026-05-10T04:05:00Z"); // 00:05 on 10 May
      expect((await event("lessons", { id: "u" })).body.currentStreak).toMatchObject({ length: 2 });
      await t.setClock("2026-05-11T03:00:00Z"); // 23:00 on 10 May: an API call, a meeting by itself
      expect((await event("api-calls", { id: "u" })).body.currentStreak).toMatchObject({ length: 2, extended: false });
      // 00:30 on 12 May in Kiritimati; the API call was 17:00 on 11 May there: covered, so 12 May extends.
      await t.setClock("2026-05-11T10:30:00Z");
      expect((await event("lessons", { id: "u", tz: "Pacific/Kiritimati" })).body.currentStreak).toMatchObject({ length: 3, extended: true });
    } finally {
      await t.close();
    }
  });

  it("mode all: one metric's further threshold is not a period's work (both metrics' are)", async () => {
    const t = await startTestApp({ yaml: lessonsAndCalls("all"), manualClock: "2026-05-09T14:00:00Z", jobs: false });
    try {
      expect(await historyOfTwo(t, "played", (id) => send(t, id, "api-calls", 1))).toMatchObject({ length: 1, started: "2026-05-12" });
      const both = async (id: string) => {
        await send(t, id, "lessons", 1);
        await send(t, id, "api-calls", 1);
      };
      expect(await historyOfTwo(t, "control", both)).toMatchObject({ length: 3 });
    } finally {
      await t.close();
    }
  });
});

describe("weekly and monthly streaks", () => {
  it("weekly: ISO weeks (Monday to Sunday) in the user's zone", async () => {
    const t = await startTestApp({ yaml: streakYaml("weekly"), manualClock: "2026-03-02T12:00:00Z" });
    try {
      const u = { id: "w", tz: "Europe/Paris" };
      await t.setClock("2026-03-08T22:30:00Z"); // Sunday 23:30 in Paris
      const first = (await t.call("POST", "/v1/metrics/lessons/event", { user: u, value: 1 })).body.currentStreak;
      expect(first).toMatchObject({ length: 1, frequency: "weekly", periodStart: "2026-03-02", periodEnd: "2026-03-08", expires: "2026-03-15" });
      await t.setClock("2026-03-08T23:30:00Z"); // Monday 00:30 in Paris: the next week
      const second = (await t.call("POST", "/v1/metrics/lessons/event", { user: u, value: 1 })).body.currentStreak;
      expect(second).toMatchObject({ length: 2, periodStart: "2026-03-09", periodEnd: "2026-03-15", expires: "2026-03-22", extended: true });
    } finally {
      await t.close();
    }
  });

  it("weekly: `started` is the local day the streak began, in the event response, the streak read and wrapped", async () => {
    const t = await startTestApp({ yaml: streakYaml("weekly"), manualClock: "2026-03-04T10:00:00Z", jobs: false });
    try {
      // Wednesday 4 March in Paris; the week began on Monday 2 March.
      const u = { id: "ws", tz: "Europe/Paris" };
      const first = (await t.call("POST", "/v1/metrics/lessons/event", { user: u, value: 1 })).body.currentStreak;
      expect(first).toMatchObject({ length: 1, started: "2026-03-04", periodStart: "2026-03-02" });
      await t.setClock("2026-03-10T10:00:00Z"); // Tuesday of the next week
      const second = (await t.call("POST", "/v1/metrics/lessons/event", { user: u, value: 1 })).body.currentStreak;
      expect(second).toMatchObject({ length: 2, started: "2026-03-04", periodStart: "2026-03-09" });
      expect((await t.call("GET", "/v1/users/ws/streak")).body).toMatchObject({ length: 2, started: "2026-03-04" });
      const wrapped = (await t.call("GET", "/v1/users/ws/wrapped?year=2026")).body;
      // periodEnd: the last day of the week it reached its length in (Sunday 15 March).
      expect(wrapped.activity.entireYear.longestStreak).toEqual({ length: 2, frequency: "weekly", started: "2026-03-04", periodStart: "2026-03-02", periodEnd: "2026-03-15" });
      // Begun just after Tokyo's midnight (Wednesday 00:30, Tuesday 11:30 in New York), then read
      // in New York the same instant: begun "tomorrow" on the new calendar reads as begun today.
      await t.setClock("2026-03-17T15:30:00Z");
      const east = (await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "wz", tz: "Asia/Tokyo" }, value: 1 })).body.currentStreak;
      expect(east).toMatchObject({ length: 1, started: "2026-03-18", periodStart: "2026-03-16" });
      const west = (await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "wz", tz: "America/New_York" }, value: 0 })).body.currentStreak;
      expect(west).toMatchObject({ length: 1, started: "2026-03-17", periodStart: "2026-03-16" });
      // Begun on a Monday just after Tokyo's midnight (Sunday in New York, the week before), then
      // read in New York: begun next week on the new calendar reads as begun today, not on the
      // Monday of the week before.
      await t.setClock("2026-03-22T15:30:00Z");
      expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "wy", tz: "Asia/Tokyo" }, value: 1 })).body.currentStreak).toMatchObject({ length: 1, started: "2026-03-23", periodStart: "2026-03-23" });
      expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "wy", tz: "America/New_York" }, value: 0 })).body.currentStreak).toMatchObject({ length: 1, started: "2026-03-22", periodStart: "2026-03-16" });
      expect((await t.call("GET", "/v1/users/wy/streak")).body).toMatchObject({ length: 1, started: "2026-03-22" });
      // Lost after two missed weeks, then restored (admin): a restored streak is placed, not begun
      // on a day, so it reads as begun on its first week's Monday.
      await t.setClock("2026-04-01T10:00:00Z");
      expect((await t.call("GET", "/v1/users/ws/streak")).body).toMatchObject({ length: 0, started: null });
      const restored = await t.call("POST", "/admin/v1/streaks/restore", { users: [{ id: "ws" }] }, { "x-api-key": "demo-admin-key" });
      expect(restored.status).toBe(200);
      expect((await t.call("GET", "/v1/users/ws/streak")).body).toMatchObject({ length: 2, started: "2026-03-16", periodStart: "2026-03-30" });
      // Even when the restored streak's first week is the week the user's last streak began (on
      // a Friday): that day belongs to the lost streak of length 1, not to the restored one.
      const rb = (at: string) => t.setClock(at).then(() => t.call("POST", "/v1/metrics/lessons/event", { user: { id: "rb", tz: "UTC" }, value: 1 }));
      for (const monday of ["2026-04-06T10:00:00Z", "2026-04-13T10:00:00Z", "2026-04-20T10:00:00Z"]) await rb(monday);
      expect((await rb("2026-05-08T10:00:00Z")).body.currentStreak).toMatchObject({ length: 1, started: "2026-05-08" });
      await t.setClock("2026-05-25T10:00:00Z");
      expect((await t.call("POST", "/admin/v1/streaks/restore", { users: [{ id: "rb" }] }, { "x-api-key": "demo-admin-key" })).status).toBe(200);
      expect((await t.call("GET", "/v1/users/rb/streak")).body).toMatchObject({ length: 3, started: "2026-05-04", periodStart: "2026-05-25" });
    } finally {
      await t.close();
    }
  });

  it("weekly: a stored start day outside the streak's first week (an older build began the streak) reads as that week's Monday", async () => {
    // An older build began the user's last streak but left the `ssd` slot as it found it (a
    // build from before `ssd` keeps a position it does not know: state-slots.ts), so `ssd` still
    // holds the day an earlier streak began. Only the period check of streakFirstDay
    // (domain/streak.ts) and wrapped's own check (that the longest streak is the stored one)
    // keep that day from being read as the start of another streak. An admin restore clears
    // `ssd`, so only such data reaches these branches.
    const t = await startTestApp({ yaml: streakYaml("weekly"), manualClock: "2026-06-03T10:00:00Z", jobs: false });
    try {
      const tenant = t.tenants[0]!;
      const id = "rolled-back";
      const userKey = `{${tenant.id}:${shardOf(id, tenant.shards)}}:u:${id}`;
      const ssdSlot = Number(await t.redis.hget(`{${tenant.id}}:slots`, "ssd"));
      // The state array `s` (lua/includes/state.lua), one slot read or written in place.
      const readSlot = async () => (await t.redis.eval("local s = cmsgpack.unpack(redis.call('HGET', KEYS[1], 's')); return s[tonumber(ARGV[1])]", 1, userKey, ssdSlot)) as number | null;
      const writeSlot = (value: number) =>
        t.redis.eval("local s = cmsgpack.unpack(redis.call('HGET', KEYS[1], 's')); s[tonumber(ARGV[1])] = tonumber(ARGV[2]); redis.call('HSET', KEYS[1], 's', cmsgpack.pack(s))", 1, userKey, ssdSlot, value);
      const lesson = (at: string) => t.setClock(at).then(() => t.call("POST", "/v1/metrics/lessons/event", { user: { id, tz: "UTC" }, value: 1 }));
      // Three weeks from Wednesday 3 June, then none in the weeks of 22 and 29 June: lost.
      expect((await lesson("2026-06-03T10:00:00Z")).body.currentStreak).toMatchObject({ length: 1, started: "2026-06-03" });
      const earlierStart = await readSlot();
      expect(earlierStart).not.toBeNull();
      await lesson("2026-06-10T10:00:00Z");
      expect((await lesson("2026-06-17T10:00:00Z")).body.currentStreak).toMatchObject({ length: 3, started: "2026-06-03" });
      // Friday 10 July begins the last streak, in the week of Monday 6 July.
      expect((await lesson("2026-07-10T10:00:00Z")).body.currentStreak).toMatchObject({ length: 1, started: "2026-07-10", periodStart: "2026-07-06" });
      await writeSlot(earlierStart!);
      expect(await readSlot()).toBe(earlierStart);

      // The streak read: the stored day is in another week than the streak's first: not its day.
      expect((await t.call("GET", `/v1/users/${id}/streak`)).body).toMatchObject({ length: 1, started: "2026-07-06", periodStart: "2026-07-06" });
      // Wrapped: the longest streak of the year is the earlier one, not the stored one, though the
      // stored day lies in its first week: that week's Monday, not 3 June.
      const wrapped = (await t.call("GET", `/v1/users/${id}/wrapped?year=2026`)).body;
      expect(wrapped.activity.entireYear.longestStreak).toEqual({ length: 3, frequency: "weekly", started: "2026-06-01", periodStart: "2026-06-01", periodEnd: "2026-06-21" });
    } finally {
      await t.close();
    }
  });

  it("monthly: calendar months, a skipped month breaks the streak", async () => {
    const t = await startTestApp({ yaml: streakYaml("monthly"), manualClock: "2026-01-31T12:00:00Z" });
    try {
      const u = { id: "m", tz: "UTC" };
      const send = () => t.call("POST", "/v1/metrics/lessons/event", { user: u, value: 1 });
      // `started` is the day the streak began (trophy-compat §3.3), not its first month's first day.
      expect((await send()).body.currentStreak).toMatchObject({ length: 1, started: "2026-01-31", periodStart: "2026-01-01", periodEnd: "2026-01-31", expires: "2026-02-28" });
      await t.setClock("2026-02-01T00:00:00Z");
      expect((await send()).body.currentStreak).toMatchObject({ length: 2, started: "2026-01-31", periodStart: "2026-02-01", periodEnd: "2026-02-28", expires: "2026-03-31" });
      await t.setClock("2026-04-02T00:00:00Z");
      expect((await send()).body.currentStreak).toMatchObject({ length: 1, started: "2026-04-02" });
    } finally {
      await t.close();
    }
  });
});
