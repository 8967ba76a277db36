import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callOrderOf } from "../../src/store/call-order.js";
import { preloadScripts, setScriptMode, type ScriptMode } from "../../src/store/redis-script.js";
import { demoConfig, dumpKeys, startAppOnOwnRedis, startTestApp, type TestApp } from "../helpers/app.js";
import { waitFor } from "../helpers/service-process.js";

/**
 * A connection to Redis can drop after Redis ran an event's script and before its reply reached
 * the service (a network blip, a proxy restart). ioredis then re-sends every command that had no
 * reply on the new connection (autoResendUnfulfilledCommands), and a script run twice would
 * count the event twice although the client got one 201. Each event call carries its Redis
 * client's writer key and a call number that grows with every call; the script keeps, per shard,
 * the last number each writer applied and answers a call it has already applied without applying
 * it again (lua/event-2.lua, step 1; the admin freeze grant the same way, src/store/call-order.ts).
 *
 * Only a call that may have run reads the record: the service marks the calls ioredis re-sends,
 * in both modes (each sends its command encoded by the service, which sees the re-send).
 *
 * The drop is made exact, not timed: the service's socket stops reading, the test waits until
 * Redis has run every call (INFO commandstats on another connection), then destroys the socket.
 */

let t: TestApp;
/** A second service on the same Redis and tenant: another process, as far as Redis can tell. */
let other: TestApp;
let close: () => Promise<void>;
let observer: Redis;

beforeAll(async () => {
  const { yaml } = demoConfig();
  ({ t, close } = await startAppOnOwnRedis({ yaml, manualClock: "2026-03-02T12:00:00Z" }));
  other = await startTestApp({ yaml, redisUrl: `redis://127.0.0.1:${t.redis.options.port}`, jobs: false, manualClock: "2026-03-02T12:00:00Z" });
  observer = new Redis(t.redis.options);
});
afterAll(async () => {
  observer?.disconnect();
  await other?.close();
  await close?.();
});

const lessonVia = (app: TestApp, user: string, headers: Record<string, string> = {}) =>
  app.call("POST", "/v1/metrics/lessons/event", { user: { id: user, tz: "UTC" }, value: 1 }, headers);
const lesson = (user: string, headers: Record<string, string> = {}) => lessonVia(t, user, headers);

/** Script calls Redis ran (FCALL, or EVALSHA with LAUREL_LUA=eval; a re-sent call goes as EVAL) since the last RESETSTAT. */
async function scriptCalls(): Promise<number> {
  const stats = await observer.info("commandstats");
  const calls = (command: string) => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
  return calls("fcall") + calls("evalsha") + calls("eval");
}

/** Script calls Redis answered, run or refused (NOSCRIPT, "Function not found"), since the last RESETSTAT (EVAL: a re-send). */
async function scriptAttempts(): Promise<number> {
  const stats = await observer.info("commandstats");
  let n = 0;
  for (const command of ["fcall", "evalsha", "eval"]) {
    const line = new RegExp(`cmdstat_${command}:([^\\r\\n]*)`).exec(stats)?.[1] ?? "";
    for (const field of ["calls", "rejected_calls", "failed_calls"]) n += Number(new RegExp(`(?:^|,)${field}=(\\d+)`).exec(line)?.[1] ?? 0);
  }
  return n;
}

const socketOf = (app: TestApp) => (app.redis as unknown as { stream: import("node:net").Socket }).stream;

/** The last call number this service's writer applied on `user`'s shard (its record, {t:s}:wr:<writer>). */
function writerRecordOf(user: string): () => Promise<number> {
  const { store } = t.app.tenants.all[0]!;
  const record = store.keys.writer(store.shard(user), callOrderOf(t.redis).writer);
  return async () => (await observer.getBuffer(record))!.readDoubleLE(0);
}

/** Loads both services' scripts into Redis, through `via` (another client, while a service's socket is held) or each service's own client. */
async function loadScripts(via?: Redis): Promise<void> {
  for (const app of [t, other]) for (const { store } of app.app.tenants.all) await preloadScripts(via ?? app.redis, store.scripts());
}

/** Another user on `user`'s shard: its calls move the same writer record. */
function sameShardUser(user: string): string {
  const { store } = t.app.tenants.all[0]!;
  let other = `${user}-later`;
  for (let i = 0; store.shard(other) !== store.shard(user); i++) other = `${user}-later-${i}`;
  return other;
}

/**
 * Sends the requests, lets Redis run all `calls` of them, runs `meanwhile` (with the replies
 * still held), and drops the connection before any reply is read.
 */
async function withLostReplies<T>(calls: number, send: () => Promise<T>[], meanwhile: () => Promise<void> = async () => {}): Promise<T[]> {
  await observer.config("RESETSTAT");
  const socket = socketOf(t);
  socket.pause();
  const pending = send();
  await waitFor(async () => (await scriptCalls()) >= calls, `Redis to run ${calls} script call(s)`);
  await meanwhile();
  socket.destroy();
  return Promise.all(pending);
}

describe.each(["function", "eval"] as ScriptMode[])("LAUREL_LUA=%s", (mode) => {
  beforeAll(async () => {
    setScriptMode(mode);
    // The services started in function mode: load the scripts for EVALSHA, so that no NOSCRIPT
    // and reload blurs the count of script calls.
    await loadScripts();
  });
  afterAll(() => setScriptMode("function"));

  describe("an event whose first send found no script (SCRIPT/FUNCTION FLUSH, a restarted Redis)", () => {
    it("is retried under a new number: counted once, and the writer's record not set back", async () => {
      const user = `${mode}-noscript`;
      expect((await lesson(user)).status).toBe(201);
      const recorded = writerRecordOf(user);
      await observer.call(mode === "eval" ? "SCRIPT" : "FUNCTION", "FLUSH");
      await observer.config("RESETSTAT");
      const socket = socketOf(t);
      socket.pause();
      try {
        // The first send finds no script; before the service reads that answer, the script is
        // back and a later call of the same writer (a higher number) runs: what calls sent during
        // the reload used to do. Retried under its first number, the call was then taken for
        // applied (eval mode: acknowledged, never counted) or set the record back (function mode).
        const first = lesson(user, { "idempotency-key": `${mode}-noscript-key` });
        await waitFor(async () => (await scriptAttempts()) >= 1, "Redis to answer the first send");
        await loadScripts(observer);
        // Another user of the same shard: the record is the writer's on the shard.
        const laterUser = sameShardUser(user);
        const before = await recorded();
        const later = lesson(laterUser);
        await waitFor(async () => (await recorded()) !== before, "the later call to run");
        const laterNumber = await recorded();
        socket.resume();
        expect(await later).toMatchObject({ status: 201, body: { total: 1 } });
        const reply = await first;
        expect(reply).toMatchObject({ status: 201, body: { total: 2 } });
        expect(reply.body.points.xp).toMatchObject({ added: 10, total: 20 });
        expect((await t.call("GET", `/v1/users/${user}/metrics/lessons`)).body.current).toBe(2);
        expect(await recorded()).toBeGreaterThan(laterNumber);
      } finally {
        socket.resume();
        await loadScripts();
      }
    });
  });

  describe("an event whose reply was lost with the connection", () => {
    it("is counted once when ioredis re-sends it, and answered 201 with its event id and the current total", async () => {
      const replies = await withLostReplies(3, () => [lesson(`${mode}-lost-a`), lesson(`${mode}-lost-a`), lesson(`${mode}-lost-b`)]);
      expect(replies.map((r) => r.status)).toEqual([201, 201, 201]);
      // Redis ran the three scripts once each before the drop, and the re-sent three again.
      expect(await scriptCalls()).toBe(6);
      // The changes went with the lost replies: each answer carries the total as it stands.
      expect(replies.map((r) => r.body.total)).toEqual([2, 2, 1]);
      expect(replies.map((r) => [r.body.points, r.body.achievements])).toEqual([[{}, []], [{}, []], [{}, []]]);
      for (const r of replies) expect(r.body.eventId).toMatch(/^[0-9a-f-]{36}$/);
      expect((await t.call("GET", `/v1/users/${mode}-lost-a/metrics/lessons`)).body.current).toBe(2);
      expect((await t.call("GET", `/v1/users/${mode}-lost-a/points/xp`)).body.total).toBe(20);
      expect((await t.call("GET", `/v1/users/${mode}-lost-b/points/xp`)).body.total).toBe(10);
      // One first identification each: the welcome energy was paid once.
      const energy = await t.call("GET", `/v1/users/${mode}-lost-a/points/energy?awards=100`);
      expect(energy.body.awards.filter((a: { trigger: { type: string } }) => a.trigger.type === "user_creation")).toHaveLength(1);
    });

    it("with an Idempotency-Key, is answered as the first request (201, not a replay)", async () => {
      const [reply] = await withLostReplies(1, () => [lesson(`${mode}-lost-k`, { "idempotency-key": "k-1" })]);
      expect(reply!.status).toBe(201);
      expect(reply!.body).toMatchObject({ total: 1, idempotencyKey: "k-1", idempotentReplayed: false });
      const again = await lesson(`${mode}-lost-k`, { "idempotency-key": "k-1" });
      expect(again.status).toBe(202);
      expect(again.body.eventId).toBe(reply!.body.eventId);
    });

    it("an admin freeze grant whose reply was lost grants once", async () => {
      expect((await lesson(`${mode}-lost-f`)).status).toBe(201);
      const admin = { "x-api-key": t.adminKey };
      const [reply] = await withLostReplies(1, () => [t.call("POST", "/admin/v1/streaks/freezes", { freezes: [{ userId: `${mode}-lost-f` }] }, admin)]);
      expect(reply).toEqual({ status: 200, body: { issues: [] } });
      expect((await t.call("GET", `/v1/users/${mode}-lost-f/streak`)).body.freezes).toBe(1);
      // A new grant is a new call: it applies.
      expect((await t.call("POST", "/admin/v1/streaks/freezes", { freezes: [{ userId: `${mode}-lost-f` }] }, admin)).status).toBe(200);
      expect((await t.call("GET", `/v1/users/${mode}-lost-f/streak`)).body.freezes).toBe(2);
    });

    it("an API completion whose reply was lost is answered 201 once, and completes once", async () => {
      const user = `${mode}-lost-c`;
      const complete = () => t.call("POST", "/v1/achievements/complete-profile/complete", { user: { id: user } });
      const [reply] = await withLostReplies(1, () => [complete()]);
      expect(reply!.status).toBe(201);
      expect(reply!.body.points).toEqual({});
      expect(reply!.body.achievements.map((a: { key: string }) => a.key)).toEqual(["complete-profile"]);
      // A new request for the same completion is a repeat: 200, the same completion.
      const again = await complete();
      expect([again.status, again.body.completionId, again.body.achievement.achievedAt]).toEqual([200, reply!.body.completionId, reply!.body.achievement.achievedAt]);
      // Its achievement trigger (profile-bonus, 50 coins) paid once.
      expect((await t.call("GET", `/v1/users/${user}/points/coins`)).body.total).toBe(50);
    });

    it("a repeated API completion whose reply was lost behind a later call is answered 200, as the repeat it was", async () => {
      const user = `${mode}-lost-repeat`;
      const complete = () => t.call("POST", "/v1/achievements/complete-profile/complete", { user: { id: user } });
      const first = await complete();
      expect(first.status).toBe(201);
      // A second later: the repeat's `now` is not the first completion's.
      await t.setClock(new Date(t.clock.now() + 1000).toISOString());
      // The repeat writes nothing; the event behind it, on the same shard, moves the writer's
      // record past the repeat's number, so the re-sent repeat reads as applied: it was taken
      // for a first completion whose reply was lost (201) before.
      const [repeat, later] = await withLostReplies(2, () => [complete(), lesson(sameShardUser(user))]);
      expect(later!.status).toBe(201);
      expect(repeat!.status).toBe(200);
      expect(repeat!.body).toMatchObject({ completionId: first.body.completionId, points: {}, achievements: [] });
      expect(repeat!.body.achievement.achievedAt).toBe(first.body.achievement.achievedAt);
      expect((await t.call("GET", `/v1/users/${user}/points/coins`)).body.total).toBe(50);
    });

    it("does not hold back the events that follow on the new connection", async () => {
      expect((await lesson(`${mode}-lost-a`)).body.total).toBe(3);
      expect((await lesson(`${mode}-lost-c`)).body.total).toBe(1);
      expect((await t.call("GET", `/v1/users/${mode}-lost-a/points/xp`)).body.total).toBe(30);
    });

    it("is counted once when another process wrote the same user before the re-send", async () => {
      // The other service's event lands between the lost reply and the re-send: a record kept per
      // user (the last writer only) would have forgotten this service's call and applied it again.
      let between: { status: number; body: any } | undefined;
      const [reply] = await withLostReplies(1, () => [lesson(`${mode}-lost-shared`)], async () => {
        between = await lessonVia(other, `${mode}-lost-shared`);
      });
      expect(between).toMatchObject({ status: 201, body: { total: 2 } });
      expect(reply).toMatchObject({ status: 201, body: { total: 2, points: {} } });
      expect((await t.call("GET", `/v1/users/${mode}-lost-shared/metrics/lessons`)).body.current).toBe(2);
      expect((await t.call("GET", `/v1/users/${mode}-lost-shared/points/xp`)).body.total).toBe(20);
    });
  });

  describe("a call whose reply was lost, re-sent to a Redis that no longer holds its script (a restart that loaded its data)", () => {
    // The re-send goes as EVAL, carrying its script: it runs under the call's number, which its
    // first send applied, and is answered as applied (under a new number, a retry after NOSCRIPT
    // was taken for a new call).
    const flushScripts = () => observer.call(mode === "eval" ? "SCRIPT" : "FUNCTION", "FLUSH").then(() => undefined);
    const reload = () => loadScripts();

    it("an event is counted once and answered 201 with the current total", async () => {
      const user = `${mode}-lost-noscript`;
      try {
        const [reply] = await withLostReplies(1, () => [lesson(user)], flushScripts);
        expect(reply).toMatchObject({ status: 201, body: { total: 1 } });
        expect((await t.call("GET", `/v1/users/${user}/metrics/lessons`)).body.current).toBe(1);
      } finally {
        await reload();
      }
    });

    it("an event that never ran, whose re-send finds no script while a later call of the same writer runs, is counted (bench/chaos.mjs)", async () => {
      // The call goes with its connection unsent (Redis never ran it, as after a SHUTDOWN or a
      // crash with the call still in Redis's input); ioredis re-sends it, marked may-have-run, to
      // a Redis without the script (a restart: EVALSHA's cache is empty; FUNCTION FLUSH). Before
      // the service reads that NOSCRIPT, another process loads the script and a later call of
      // this writer on the same shard runs (the calls sent behind the re-send on the new
      // connection). The retry under the call's first number then read as applied before: 201
      // with the total as it stood, and the acknowledged event was never counted.
      const user = `${mode}-unrun-noscript`;
      expect((await lesson(user)).status).toBe(201);
      const recorded = writerRecordOf(user);
      const laterUser = sameShardUser(user);
      const socket = socketOf(t);
      let resent: import("node:net").Socket | undefined;
      try {
        await flushScripts();
        await observer.config("RESETSTAT");
        socket.cork(); // the call waits in its socket's buffer and goes with the socket, unsent
        const first = lesson(user, { "idempotency-key": `${mode}-unrun-noscript-key` });
        await waitFor(() => socket.writableLength > 0, "the call in the socket's buffer");
        // ioredis re-sends in its ready handler, before the 'ready' event: the new socket stops
        // reading before the NOSCRIPT can be read.
        const ready = new Promise<void>((resolve) =>
          t.redis.once("ready", () => {
            resent = socketOf(t);
            resent.pause();
            resolve();
          }),
        );
        socket.destroy();
        await ready;
        await waitFor(async () => (await scriptAttempts()) >= 1, "Redis to answer the first send");
        // Another process (or another client) loads the scripts: this service's socket is held.
        await loadScripts(observer);
        const before = await recorded();
        const later = lesson(laterUser);
        await waitFor(async () => (await recorded()) !== before, "the later call to run");
        resent!.resume();
        expect(await later).toMatchObject({ status: 201, body: { total: 1 } });
        const reply = await first;
        expect(reply.status).toBe(201);
        expect((await t.call("GET", `/v1/users/${user}/metrics/lessons`)).body.current).toBe(2);
        expect((await t.call("GET", `/v1/users/${user}/points/xp`)).body.total).toBe(20);
        expect(reply.body.total).toBe(2);
      } finally {
        resent?.resume();
        await reload();
      }
    });

    it("an API completion is answered 201 as the first, and completes once", async () => {
      const user = `${mode}-lost-c-noscript`;
      try {
        const [reply] = await withLostReplies(1, () => [t.call("POST", "/v1/achievements/complete-profile/complete", { user: { id: user } })], flushScripts);
        expect(reply!.status).toBe(201);
        expect(reply!.body.achievements.map((a: { key: string }) => a.key)).toEqual(["complete-profile"]);
        expect((await t.call("GET", `/v1/users/${user}/points/coins`)).body.total).toBe(50);
      } finally {
        await reload();
      }
    });
  });

  describe("two Redis clients of one process", () => {
    it("number their calls apart: a call overtaken on the other connection is still applied", async () => {
      // Both services run in this test process. If they shared one writer and one sequence of
      // numbers, this service's call (sent first, so numbered lower) reaching Redis after the
      // other's would look re-sent, and the event would be lost.
      const socket = socketOf(t);
      socket.cork(); // this service's call waits in its socket's buffer
      const first = lesson(`${mode}-two-clients`);
      await waitFor(() => socket.writableLength > 0, "the call in the socket's buffer");
      const second = await lessonVia(other, `${mode}-two-clients`);
      expect(second).toMatchObject({ status: 201, body: { total: 1 } });
      socket.uncork();
      const reply = await first;
      expect(reply).toMatchObject({ status: 201, body: { total: 2 } });
      expect(reply.body.points.xp).toMatchObject({ added: 10, total: 20 });
      expect((await t.call("GET", `/v1/users/${mode}-two-clients/metrics/lessons`)).body.current).toBe(2);
    });
  });

  describe("two Redis clients of one process, a call re-sent", () => {
    it("is applied when it never reached Redis and the other client's later call did (the record is per client)", async () => {
      // This service's call is lost with its connection before Redis read it; the other
      // service's call runs meanwhile. ioredis re-sends the first one marked as may-have-run:
      // with one writer for both clients, its number (below the other's) would read as applied,
      // and the event, never recorded, would be answered as if it had been.
      const user = `${mode}-resent-unrun`;
      const socket = socketOf(t);
      socket.cork();
      const first = lesson(user);
      await waitFor(() => socket.writableLength > 0, "the call in the socket's buffer");
      expect(await lessonVia(other, user)).toMatchObject({ status: 201, body: { total: 1 } });
      socket.destroy(); // the corked call goes with the socket, unsent
      expect(await first).toMatchObject({ status: 201, body: { total: 2 } });
      expect((await t.call("GET", `/v1/users/${user}/metrics/lessons`)).body.current).toBe(2);
    });
  });

  it("leaves every writer's record with an expiry of a day (README: a re-send may come after Redis restarted and loaded its data)", async () => {
    expect((await lesson(`${mode}-expiry`)).status).toBe(201);
    const records = Object.keys(await dumpKeys(observer, "*:wr:*"));
    expect(records.length).toBeGreaterThan(0);
    const day = 86_400_000;
    // Set by a call of this file, minutes ago at most: far above 23 hours, and not past a day.
    for (const key of records) {
      const ttl = await observer.pttl(key);
      expect(ttl, key).toBeGreaterThan(day - 3_600_000);
      expect(ttl, key).toBeLessThanOrEqual(day);
    }
  });
});

describe("the expiry of a writer's record", () => {
  it("is asked for on a record's first call, then once an hour of wall clock", () => {
    const order = callOrderOf(new Redis({ lazyConnect: true }));
    const hour = 3_600_000;
    expect(order.expiryDue("{t:1}:wr:9", 0)).toBe(true);
    expect(order.expiryDue("{t:1}:wr:9", hour - 1)).toBe(false);
    expect(order.expiryDue("{t:2}:wr:9", hour - 1)).toBe(true); // another shard's record
    expect(order.expiryDue("{t:1}:wr:9", hour)).toBe(true);
    expect(order.expiryDue("{t:1}:wr:9", hour + 1)).toBe(false);
    expect(order.expiryDue("{t:1}:wr:9", 5)).toBe(true); // the wall clock went back
  });
});
