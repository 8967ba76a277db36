import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { pino } from "pino";
import { startEmbeddedRedis, type EmbeddedRedis } from "../../src/embedded-redis.js";
import { logConnectionErrors } from "../../src/store/redis-client.js";
import { startTestApp, type TestApp } from "../helpers/app.js";
import { portOutsideEphemeralRange } from "../helpers/ports.js";
import { waitFor } from "../helpers/service-process.js";

/**
 * "Never lose an acknowledged event": Redis killed outright (SIGKILL, as a crash or the OOM
 * killer ends it) in the middle of a flood of events, then started again on its AOF. With
 * `appendfsync always` (LAUREL_FSYNC=always for the embedded server) Redis writes and syncs the
 * AOF before it answers, so every event answered 201 is there after the restart; and the events
 * whose answer was lost (503: unknown whether applied) sent again with their Idempotency-Key are
 * each counted once. Whenever the kill lands, the same must hold: nothing here depends on timing.
 * It runs with `always`, the one setting under which the guarantee holds whatever the disk does.
 * `everysec` passes it too on a quiet disk, but may hold an AOF write back for up to 2 s while a
 * slow fsync runs, and still answers (README, Operations, Persistence): a test cannot make that
 * window happen on demand, so this one guards AOF across a crash, not the choice of `always`.
 */
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

const USERS = 20;
const EVENTS = 600;
const IN_FLIGHT = 40;
const KILL_AT = 200; // the batch sent from this event on is in flight when Redis is killed

describe("Redis killed during a flood of events, then restarted on its AOF (appendfsync always)", () => {
  it("keeps every acknowledged event, and counts each event sent again with its key exactly once", async () => {
    const dir = mkdtempSync(join(tmpdir(), "laurel-crash-"));
    dirs.push(dir);
    // Restarted on this port below: outside the range other tests' ports and connections come from.
    const port = await portOutsideEphemeralRange();
    let server: EmbeddedRedis = await startEmbeddedRedis({ dir, port, fsync: "always" });
    let t: TestApp | undefined;
    try {
      t = await startTestApp({ redisUrl: server.url, jobs: false, manualClock: "2026-03-02T12:00:00Z" });
      // The outage's connection errors go to a silent log, as the service's go to its own (main.ts).
      logConnectionErrors(t.redis, pino({ level: "silent" }));
      const probe = new Redis(server.url);
      const redisPid = Number(/process_id:(\d+)/.exec(await probe.info("server"))![1]);
      probe.disconnect();
      expect(((await t.redis.config("GET", "appendfsync")) as string[])[1]).toBe("always");

      const events = Array.from({ length: EVENTS }, (_, i) => ({ user: `crash-${i % USERS}`, key: `key-${i}` }));
      const send = (e: { user: string; key: string }) => t!.call("POST", "/v1/metrics/lessons/event", { user: { id: e.user, tz: "UTC" }, value: 1 }, { "idempotency-key": e.key });
      const first = new Map<string, number>();
      for (let i = 0; i < EVENTS; i += IN_FLIGHT) {
        const batch = events.slice(i, i + IN_FLIGHT).map((e) => send(e).then((r) => first.set(e.key, r.status)));
        if (i === KILL_AT) process.kill(redisPid, "SIGKILL");
        await Promise.all(batch);
      }
      const acknowledged = [...first].filter(([, status]) => status === 201).map(([key]) => key);
      // Every answer is an acknowledgement or a 503 saying the outcome is unknown; the first
      // KILL_AT were answered before the kill.
      expect([...first.values()].every((s) => s === 201 || s === 503)).toBe(true);
      expect(acknowledged.length).toBeGreaterThanOrEqual(KILL_AT);
      expect([...first.values()].filter((s) => s === 503).length).toBeGreaterThan(0);

      // The same server again, on its AOF and port: the service's client reconnects by itself.
      server = await startEmbeddedRedis({ dir, port, fsync: "always" });
      await waitFor(async () => (await t!.call("GET", "/healthz", undefined, {})).status === 200, "the service to reach Redis again");

      // Every acknowledged event is there: sent again, it is a replay.
      const again = new Map<string, number>();
      for (let i = 0; i < EVENTS; i += IN_FLIGHT) {
        await Promise.all(events.slice(i, i + IN_FLIGHT).map((e) => send(e).then((r) => again.set(e.key, r.status))));
      }
      for (const key of acknowledged) expect(again.get(key), key).toBe(202);
      expect([...again.values()].every((s) => s === 201 || s === 202)).toBe(true);
      // And each event counts once: 10 xp a lesson, EVENTS / USERS lessons a user.
      for (let u = 0; u < USERS; u++) {
        const points = await t.call("GET", `/v1/users/crash-${u}/points/xp`);
        expect(points.body.total, `crash-${u}`).toBe((EVENTS / USERS) * 10);
      }
    } finally {
      await t?.close();
      await server.stop();
    }
  });
});
