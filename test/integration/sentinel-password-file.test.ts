import { Redis } from "ioredis";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { answeredWithin } from "../../src/deadline.js";
import { createRedisClient } from "../../src/store/redis-client.js";
import { passwordFileCheck, rereadOnSentinelRefusal } from "../../src/store/redis-password-reload.js";
import { sentinelOptions, sentinelPassword } from "../../src/store/redis-sentinel.js";
import { portOutsideEphemeralRange } from "../helpers/ports.js";
import { startTestRedis, startTestSentinel } from "../helpers/redis-server.js";
import { callService, waitFor, WORKER } from "../helpers/service-process.js";
import { linesStarting, passwordFileFixture, served, stopsCleanly, withCopyAndQueue, type RefusedStart } from "../helpers/password-files.js";
import { startReceiver } from "../helpers/webhook-receiver.js";

/**
 * LAUREL_REDIS_SENTINEL_PASSWORD_FILE (README: Configuration; Operations, Rotating the Redis
 * password): the sentinels' own password from a file, as LAUREL_REDIS_PASSWORD_FILE is the data
 * nodes'. A real redis-sentinel asks its clients for a password (its default user's, which is
 * what `requirepass` in a sentinel's config sets; changed here at run time with ACL SETUSER, as
 * Sentinel takes no CONFIG SET), in front of a real redis-server. The password is rotated under
 * the built service and dist/worker.js, the sentinel first or the file first, and their
 * connections to the primary are closed (CLIENT KILL): each reconnect asks the sentinel again
 * (ioredis opens a new connection to a sentinel for every question), with the password the file
 * holds then. A process started while the sentinel already takes a new password and the file
 * still holds the old one waits for the file within LAUREL_REDIS_WAIT, and says the refusal when
 * that passes. No password is ever in the output.
 */

const fixture = passwordFileFixture("spwfile", "sentinel-password");
const { start, passwordFile, rotate } = fixture;

interface Setup {
  /** The primary's port, and the operator's connection to it (named test-admin in its CLIENT LIST). */
  primaryPort: number;
  primary: Redis;
  /** The sentinel's port, and the operator's connection to it, authenticated with `first`. */
  sentinelPort: number;
  sentinel: Redis;
  /** Sets the sentinel's password (its default user's, as `requirepass` does), the operator's connection staying authenticated. */
  setSentinelPassword(password: string): Promise<void>;
  /** Closes every connection of the processes to the primary: each reconnect asks the sentinel for it again. */
  closeConnections(): Promise<void>;
  /** How many connections the processes hold to the primary. */
  connections(): Promise<number>;
}

/** A primary and a sentinel watching it that asks for `first`, both gone after `test`. */
async function withSentinel(first: string, test: (setup: Setup) => Promise<void>): Promise<void> {
  const server = await startTestRedis();
  const primaryPort = Number(new URL(server.url).port);
  const sentinelServer = await startTestSentinel(primaryPort);
  const primary = new Redis(server.url, { connectionName: "test-admin" });
  const sentinel = new Redis(sentinelServer.port, "127.0.0.1");
  const setSentinelPassword = async (password: string): Promise<void> => {
    await sentinel.call("ACL", "SETUSER", "default", "resetpass", `>${password}`);
  };
  try {
    await setSentinelPassword(first);
    await sentinel.auth(first);
    await test({
      primaryPort,
      primary,
      sentinelPort: sentinelServer.port,
      sentinel,
      setSentinelPassword,
      closeConnections: async () => {
        await primary.client("KILL", "TYPE", "normal", "SKIPME", "yes");
      },
      connections: async () => ((await primary.call("CLIENT", "LIST", "TYPE", "normal")) as string).split("\n").filter((line) => line.startsWith("id=") && !line.includes(" name=test-admin ")).length,
    });
  } finally {
    primary.disconnect();
    sentinel.disconnect();
    await sentinelServer.stop();
    await server.stop();
  }
}

/** What a process logs when it takes a new sentinels' password from the file. */
const READ_NEW = "read the new sentinels' password from LAUREL_REDIS_SENTINEL_PASSWORD_FILE";

describe("the sentinels' password from the file", () => {
  it("is rotated under the service and dist/worker.js without a restart: the sentinel first (their reconnects refused meanwhile), then the file first; the job queues' connections come back too", async () => {
    const [first, second, third] = ["sentinel-first-Ax3kQ7", "sentinel-second-By4lR8", "sentinel-third-Cz5mS9"];
    // A webhook endpoint: its delivery queues are BullMQ's, each with connections of its own. The
    // first event after the rotation is answered 500, for a retry through them.
    const receiver = await startReceiver((_request, index) => (index === 1 ? 500 : 200));
    const hooked = fixture.hookedConfig("spwhooks", receiver.url);
    await withSentinel(first, async (setup) => {
      const file = passwordFile("rotation", first);
      const port = await portOutsideEphemeralRange();
      const workerPort = await portOutsideEphemeralRange();
      const env = { REDIS_SENTINELS: `127.0.0.1:${setup.sentinelPort}`, LAUREL_REDIS_SENTINEL_PASSWORD_FILE: file, LAUREL_CONFIG: hooked };
      const service = start({ ...env, PORT: String(port), LAUREL_WORKER: "off" });
      const worker = start({ ...env, LAUREL_WORKER_PORT: String(workerPort) }, WORKER);
      await waitFor(() => service.output().includes("laurel listening"), "the service to listen through the sentinel", service.exited, service.output);
      await waitFor(() => worker.output().includes("laurel stream worker running"), "the worker to run", worker.exited, worker.output);
      expect(await served(port, "before")).toBe(true);
      // Both processes' clients, and their delivery queues' (BullMQ) connections, each found through the sentinel.
      let before = 0;
      await waitFor(async () => (before = await setup.connections()) > 4, "the processes' connections, their job queues' too", service.exited, service.output);
      const adminCall = (method: string, path: string) => callService(port, method, path, method === "POST" ? {} : undefined, "demo-admin-key");
      // The worker's probe: its client answers a PING within a second.
      const workerHealthy = async () => (await fetch(`http://127.0.0.1:${workerPort}/healthz`)).status === 200;

      // The sentinel first: every connection to the primary closed, each reconnect's question to
      // the sentinel refused (WRONGPASS) until the file holds the new password.
      await setup.setSentinelPassword(second);
      await setup.closeConnections();
      for (const proc of [service, worker]) {
        const refused = `"msg":"sentinel 127.0.0.1:${setup.sentinelPort} refused the password in LAUREL_REDIS_SENTINEL_PASSWORD_FILE (WRONGPASS); retrying, the file read again at each refusal"`;
        await waitFor(() => proc.output().includes(refused), "the reconnects to be refused by the sentinel", proc.exited, proc.output);
      }
      // A read is answered 503 at its bound (LAUREL_READ_TIMEOUT): the client waits for a primary the sentinel does not name it.
      expect((await callService(port, "GET", "/v1/users/before/points/xp")).status).toBe(503);
      rotate(file, second);
      await waitFor(() => served(port, "sentinel-first"), "events and reads served with the second password", service.exited, service.output);
      await waitFor(workerHealthy, "the worker back on Redis", worker.exited, worker.output);
      // At least as many (BullMQ's connections may still have been coming up when `before` was counted).
      await waitFor(async () => (await setup.connections()) >= before, `the processes' ${before} connections back`, service.exited, service.output);
      for (const proc of [service, worker]) expect(linesStarting(proc, READ_NEW)).toBe(1);
      // The job queues work: the event's delivery, answered 500, waits for its retry in a BullMQ
      // queue; replayed now, a BullMQ worker sends it.
      let retrying: { id: string }[] = [];
      await waitFor(async () => (retrying = (await adminCall("GET", "/admin/v1/webhooks/deliveries?status=retrying")).body.deliveries).length === 1, "the refused delivery to wait for its retry");
      expect((await adminCall("POST", `/admin/v1/webhooks/deliveries/${retrying[0]!.id}/replay`)).status).toBe(200);
      await waitFor(async () => (await adminCall("GET", `/admin/v1/webhooks/deliveries/${retrying[0]!.id}`)).body.status === "delivered", "the replay to be delivered");

      // The file first: taken for the next connections (read once its change is seen), then the sentinel.
      rotate(file, third);
      await waitFor(() => linesStarting(service, READ_NEW) === 2 && linesStarting(worker, READ_NEW) === 2, "both processes to read the third password");
      await setup.setSentinelPassword(third);
      await setup.closeConnections();
      await waitFor(() => served(port, "file-first"), "events and reads served with the third password", service.exited, service.output);
      await waitFor(async () => (await setup.connections()) >= before, `the processes' ${before} connections back again`, service.exited, service.output);
      await waitFor(workerHealthy, "the worker back on Redis again", worker.exited, worker.output);

      await stopsCleanly([service, worker], [first, second, third]);
    }).finally(() => receiver.close());
  });

  it("is read again at the sentinel's first refusal, with no watcher running; the client's copies and BullMQ's connections send it too", async () => {
    const [first, second] = ["inproc-sentinel-first-Dq6nT1", "inproc-sentinel-second-Er7oU2"];
    const lines: { msg: string }[] = [];
    const logger = pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) });
    await withSentinel(first, async (setup) => {
      const file = passwordFile("in-process", first);
      const env = { REDIS_SENTINELS: `127.0.0.1:${setup.sentinelPort}`, LAUREL_REDIS_SENTINEL_PASSWORD_FILE: file };
      const redis = createRedisClient(undefined, sentinelOptions(env), env);
      redis.on("error", () => undefined);
      // The refusal's reread alone: the directory is not watched, and the minute's check is not started.
      const stopRereading = rereadOnSentinelRefusal(redis, passwordFileCheck(sentinelPassword(env)!, logger));
      const release = async () => {
        await setup.sentinel.call("ACL", "SETUSER", "default", "nopass");
        stopRereading();
      };
      await withCopyAndQueue(redis, `sentinel-password-file-${process.pid}`, async ({ copy, doubled }) => {
        expect(await redis.ping()).toBe("PONG");
        expect(await copy.ping()).toBe("PONG");
        expect(await doubled(1)).toBe(2);

        // The sentinel first, then the file (unseen: nothing watches it), then every connection to the primary closed.
        await setup.setSentinelPassword(second);
        rotate(file, second);
        await setup.closeConnections();
        // The client's question to the sentinel is refused, which reads the file: the next question
        // sends the new password. (Each PING bounded: while the sentinel refuses, the client holds
        // it without end, and a failure would say nothing but the test's timeout.)
        const pong = (client: Redis) => answeredWithin(client.ping(), 1000).catch(() => "no answer");
        await waitFor(async () => (await pong(redis)) === "PONG", "the client back through the sentinel with the file's password");
        expect(lines.filter((line) => line.msg.startsWith(READ_NEW))).toHaveLength(1);
        // Its copy and BullMQ's connections share the password: they ask the sentinel with it too.
        await waitFor(async () => (await pong(copy)) === "PONG", "the copy back");
        expect(await doubled(2)).toBe(4);
        // The client, its copy, the queue's connection, the worker's and its blocking one.
        await waitFor(async () => (await setup.connections()) >= 4, "every connection back on the primary");
        expect(JSON.stringify(lines)).not.toContain(second);
      }, release);
    });
  });
});

describe("a start during a rotation of the sentinels' password (the sentinel takes the new one, the file still holds the old)", () => {
  const refused = (sentinelPort: number, file: string, secrets: string[]): RefusedStart => ({
    env: { REDIS_SENTINELS: `127.0.0.1:${sentinelPort}`, LAUREL_REDIS_SENTINEL_PASSWORD_FILE: file },
    refusal: `Sentinel at 127.0.0.1:${sentinelPort} refused the password in LAUREL_REDIS_SENTINEL_PASSWORD_FILE (WRONGPASS); check it`,
    prefix: "Sentinel at ",
    variable: "LAUREL_REDIS_SENTINEL_PASSWORD_FILE",
    secrets,
  });

  it("waits for the file, the service and dist/worker.js alike, and starts once it is written", async () => {
    const [old, rotated] = ["start-old-Fs8pV3", "start-rotated-Gt9qW4"];
    await withSentinel(rotated, async (setup) => {
      const file = passwordFile("start-waits", old);
      await fixture.startsOnceWritten(refused(setup.sentinelPort, file, [old, rotated]), () => rotate(file, rotated));
    });
  });

  it("exits 1 naming the sentinel, the variable and the bound once LAUREL_REDIS_WAIT has passed without the file written", async () => {
    const [old, rotated] = ["bound-old-Hu1rX5", "bound-rotated-Iv2sY6"];
    await withSentinel(rotated, async (setup) => {
      await fixture.givesUpAtTheBound(refused(setup.sentinelPort, passwordFile("start-gives-up", old), [old, rotated]));
    });
  });
});

describe("a sentinels' password file the start cannot use", () => {
  it("stops the service and dist/worker.js, naming the variable and the file, never its contents", async () => {
    const secret = "bad-sentinel-file-secret-Jw3tZ7";
    const { empty, lines, missing } = fixture.unusableFiles(secret);
    const sentinels = "127.0.0.1:26379";
    const beside = passwordFile("beside-variable", "file-pw");
    const starts: { env: Record<string, string>; says: string }[] = [
      { env: { REDIS_SENTINELS: sentinels, LAUREL_REDIS_SENTINEL_PASSWORD_FILE: empty }, says: `LAUREL_REDIS_SENTINEL_PASSWORD_FILE (${empty}) is empty` },
      { env: { REDIS_SENTINELS: sentinels, LAUREL_REDIS_SENTINEL_PASSWORD_FILE: lines }, says: `LAUREL_REDIS_SENTINEL_PASSWORD_FILE (${lines}) holds more than one line` },
      { env: { REDIS_SENTINELS: sentinels, LAUREL_REDIS_SENTINEL_PASSWORD_FILE: missing }, says: `LAUREL_REDIS_SENTINEL_PASSWORD_FILE names a file that cannot be read: ${missing} (ENOENT)` },
      { env: { REDIS_SENTINELS: sentinels, REDIS_SENTINEL_PASSWORD: secret, LAUREL_REDIS_SENTINEL_PASSWORD_FILE: beside }, says: "LAUREL_REDIS_SENTINEL_PASSWORD_FILE is set and REDIS_SENTINEL_PASSWORD too" },
      { env: { REDIS_URL: "redis://127.0.0.1:6379", LAUREL_REDIS_SENTINEL_PASSWORD_FILE: beside }, says: "LAUREL_REDIS_SENTINEL_PASSWORD_FILE is set without REDIS_SENTINELS" },
    ];
    await fixture.refusedAtStart(starts, secret);
  });
});
