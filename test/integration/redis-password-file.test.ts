import { Redis } from "ioredis";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { createRedisClient } from "../../src/store/redis-client.js";
import { passwordFileCheck, rereadOnRefusal } from "../../src/store/redis-password-reload.js";
import { redisPassword } from "../../src/store/redis-password.js";
import { portOutsideEphemeralRange } from "../helpers/ports.js";
import { startTestRedis, startTestSentinel } from "../helpers/redis-server.js";
import { callService, waitFor, WORKER } from "../helpers/service-process.js";
import { linesStarting, passwordFileFixture, served, stopsCleanly, withCopyAndQueue, type RefusedStart } from "../helpers/password-files.js";
import { startReceiver } from "../helpers/webhook-receiver.js";

type TestRedis = Awaited<ReturnType<typeof startTestRedis>>;

/**
 * LAUREL_REDIS_PASSWORD_FILE (README: Configuration; Operations, Rotating the Redis password):
 * the built service and dist/worker.js on a real redis-server that asks for a password (the
 * default user's `requirepass`, an ACL user named in REDIS_URL, the primary behind a sentinel).
 * The password is rotated under the running processes, the server first or the file first, and
 * their connections are closed (CLIENT KILL): every connection comes back with the new one, and
 * events and reads are served again, without a restart. A process started in between (the server
 * changed, the file not yet) waits for the file within LAUREL_REDIS_WAIT, and says the refusal
 * when that passes. Files that cannot be used stop the start, naming the variable. No password is
 * ever in the output.
 */

const fixture = passwordFileFixture("pwfile", "redis-password");
const { start, passwordFile, rotate } = fixture;

/** A redis-server of the test's own, and the operator's connection to it, both gone after `test`. */
async function withRedis(test: (server: TestRedis, admin: Redis) => Promise<void>): Promise<void> {
  const server = await startTestRedis();
  const admin = new Redis(server.url);
  try {
    await test(server, admin);
  } finally {
    admin.disconnect();
    await server.stop();
  }
}

/** How many of the process's output's JSON lines have a msg that starts with `start`. */
describe("the default user's password (requirepass) from the file", () => {
  it("is rotated under the service without a restart: the server first (its reconnects refused meanwhile), then the file first", async () => {
    const [first, second, third] = ["pw-first-Ka8mQ2", "pw-second-Lb9nR3", "pw-third-Mc1oS4"];
    await withRedis(async (server, admin) => {
      await admin.config("SET", "requirepass", first);
      await admin.auth(first);
      const file = passwordFile("requirepass", first);
      const port = await portOutsideEphemeralRange();
      const service = start({ REDIS_URL: `redis://127.0.0.1:${new URL(server.url).port}`, LAUREL_REDIS_PASSWORD_FILE: file, PORT: String(port) });
      await waitFor(() => service.output().includes("laurel listening"), "the service to listen", service.exited, service.output);
      expect(await served(port, "before")).toBe(true);

      // The server first: every connection of the service closed, each reconnect refused (WRONGPASS) until the file holds the new password.
      await admin.config("SET", "requirepass", second);
      await admin.client("KILL", "TYPE", "normal", "SKIPME", "yes");
      await waitFor(() => service.output().includes('"msg":"redis not reachable; retrying"'), "the service's reconnects to be refused", service.exited, service.output);
      expect((await callService(port, "POST", "/v1/metrics/lessons/event", { user: { id: "refused" }, value: 1 })).status).toBe(503);
      rotate(file, second);
      await waitFor(() => served(port, "server-first"), "events and reads served with the second password", service.exited, service.output);
      expect(linesStarting(service, "read the new Redis password from LAUREL_REDIS_PASSWORD_FILE")).toBe(1);

      // The file first: taken for the next connections (read once its change is seen), then the server.
      rotate(file, third);
      await waitFor(() => linesStarting(service, "read the new Redis password") === 2, "the third password to be read", service.exited, service.output);
      await admin.config("SET", "requirepass", third);
      await admin.client("KILL", "TYPE", "normal", "SKIPME", "yes");
      await waitFor(() => served(port, "file-first"), "events and reads served with the third password", service.exited, service.output);
      expect((await callService(port, "GET", "/healthz")).status).toBe(200);

      service.child.kill("SIGTERM");
      expect(await service.exited).toBe(0);
      for (const password of [first, second, third]) expect(service.output()).not.toContain(password);
    });
  });
});

describe("an ACL user's password from the file, the user in REDIS_URL", () => {
  it("is rotated with ACL SETUSER under the service and dist/worker.js: every connection of the user comes back, the job queues' too", async () => {
    const [first, second, third] = ["acl-first-Nd2pT5", "acl-second-Oe3qU6", "acl-third-Pf4rV7"];
    // A webhook endpoint: its delivery queues are BullMQ's, each with connections of its own. The
    // first event after the rotation is answered 500, for a retry through them.
    const receiver = await startReceiver((_request, index) => (index === 1 ? 500 : 200));
    const hooked = fixture.hookedConfig("pwhooks", receiver.url);
    await withRedis(async (server, admin) => {
      await admin.call("ACL", "SETUSER", "laurel", "on", `>${first}`, "~*", "&*", "+@all");
      const file = passwordFile("acl", first);
      const port = await portOutsideEphemeralRange();
      const env = { REDIS_URL: `redis://laurel@127.0.0.1:${new URL(server.url).port}`, LAUREL_REDIS_PASSWORD_FILE: file, LAUREL_CONFIG: hooked };
      const workerPort = await portOutsideEphemeralRange();
      const service = start({ ...env, PORT: String(port), LAUREL_WORKER: "off" });
      const worker = start({ ...env, LAUREL_WORKER_PORT: String(workerPort) }, WORKER);
      await waitFor(() => service.output().includes("laurel listening"), "the service to listen", service.exited, service.output);
      await waitFor(() => worker.output().includes("laurel stream worker running"), "the worker to run", worker.exited, worker.output);
      expect(await served(port, "acl-before")).toBe(true);
      // The connections authenticated as the user (one refused its password stays the default user's until closed).
      const connections = async () => ((await admin.call("CLIENT", "LIST", "TYPE", "normal")) as string).split("\n").filter((line) => line.includes(" user=laurel ")).length;
      // Both processes' clients, and their delivery queues' (BullMQ) connections.
      let before = 0;
      await waitFor(async () => (before = await connections()) > 4, "the processes' connections, their job queues' too", service.exited, service.output);
      const adminCall = async (method: string, path: string) => {
        const res = await fetch(`http://127.0.0.1:${port}${path}`, { method, headers: { "x-api-key": "demo-admin-key", "content-type": "application/json" }, body: method === "POST" ? "{}" : undefined });
        return { status: res.status, body: (await res.json()) as any };
      };
      // The worker's probe: its client answers a PING within a second.
      const workerHealthy = async () => (await fetch(`http://127.0.0.1:${workerPort}/healthz`)).status === 200;

      await admin.call("ACL", "SETUSER", "laurel", "resetpass", `>${second}`);
      await admin.client("KILL", "USER", "laurel");
      rotate(file, second);
      await waitFor(() => served(port, "acl-rotated"), "events and reads served with the second password", service.exited, service.output);
      // At least as many (BullMQ's connections may still have been coming up when `before` was counted).
      await waitFor(async () => (await connections()) >= before, `the processes' ${before} connections back`, service.exited, service.output);
      await waitFor(workerHealthy, "the worker back on Redis", worker.exited, worker.output);
      // The job queues work: the event's delivery, answered 500, waits for its retry in a BullMQ
      // queue; replayed now, a BullMQ worker sends it.
      let retrying: { id: string }[] = [];
      await waitFor(async () => (retrying = (await adminCall("GET", "/admin/v1/webhooks/deliveries?status=retrying")).body.deliveries).length === 1, "the refused delivery to wait for its retry");
      expect((await adminCall("POST", `/admin/v1/webhooks/deliveries/${retrying[0]!.id}/replay`)).status).toBe(200);
      await waitFor(async () => (await adminCall("GET", `/admin/v1/webhooks/deliveries/${retrying[0]!.id}`)).body.status === "delivered", "the replay to be delivered");

      // Without a refusal: the user given the new password beside the old, the file, then the old removed.
      await admin.call("ACL", "SETUSER", "laurel", `>${third}`);
      rotate(file, third);
      await waitFor(() => linesStarting(service, "read the new Redis password") === 2 && linesStarting(worker, "read the new Redis password") === 2, "both processes to read the third password");
      await admin.call("ACL", "SETUSER", "laurel", `<${second}`);
      await admin.client("KILL", "USER", "laurel");
      await waitFor(() => served(port, "acl-third"), "events and reads served with the third password", service.exited, service.output);
      await waitFor(async () => (await connections()) >= before, `the processes' ${before} connections back again`, service.exited, service.output);
      await waitFor(workerHealthy, "the worker back on Redis again", worker.exited, worker.output);

      await stopsCleanly([service, worker], [first, second, third]);
    }).finally(() => receiver.close());
  });
});

describe("the refused password read again (no watcher running)", () => {
  it("is taken at the first refusal, before the next reconnect; the client's copies and BullMQ's connections send it too", async () => {
    const [first, second] = ["inproc-first-Qg5sW8", "inproc-second-Rh6tX9"];
    const lines: { msg: string }[] = [];
    const logger = pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) });
    await withRedis(async (server, admin) => {
      await admin.call("ACL", "SETUSER", "jobs", "on", `>${first}`, "~*", "&*", "+@all");
      const file = passwordFile("in-process", first);
      const env = { REDIS_URL: `redis://jobs@127.0.0.1:${new URL(server.url).port}`, LAUREL_REDIS_PASSWORD_FILE: file };
      const redis = createRedisClient(env.REDIS_URL, {}, env);
      redis.on("error", () => undefined);
      // The refusal's reread alone: the directory is not watched, and the minute's check is not started.
      const stopRereading = rereadOnRefusal(redis, passwordFileCheck(redisPassword(env)!, logger));
      const release = async () => {
        await admin.call("ACL", "SETUSER", "jobs", "nopass");
        stopRereading();
      };
      await withCopyAndQueue(redis, `password-file-${process.pid}`, async ({ copy, doubled }) => {
        expect(await redis.ping()).toBe("PONG");
        expect(await copy.ping()).toBe("PONG");
        expect(await doubled(1)).toBe(2);

        // The server first, then the file (unseen: nothing watches it), then every connection closed.
        await admin.call("ACL", "SETUSER", "jobs", "resetpass", `>${second}`);
        rotate(file, second);
        await admin.client("KILL", "USER", "jobs");
        // The client's reconnect is refused, which reads the file: the next one sends the new password.
        await waitFor(async () => (await redis.ping().catch(() => "refused")) === "PONG", "the client back with the file's password");
        expect(lines.filter((line) => line.msg.startsWith("read the new Redis password"))).toHaveLength(1);
        // Its copy and BullMQ's connections share the password: they reconnect with it too.
        await waitFor(async () => (await copy.ping().catch(() => "refused")) === "PONG", "the copy back");
        expect(await doubled(2)).toBe(4);
        const clients = ((await admin.call("CLIENT", "LIST", "TYPE", "normal")) as string).split("\n").filter((line) => line.includes(" user=jobs "));
        // The client, its copy, the queue's connection, the worker's and its blocking one.
        expect(clients.length).toBeGreaterThanOrEqual(4);
        expect(JSON.stringify(lines)).not.toContain(second);
      }, release);
    });
  });
});

describe("the primary's password from the file, through a sentinel", () => {
  it("finds the primary with it, and after a rotation reconnects with the new one", async () => {
    const [first, second] = ["sentinel-data-first-Si7uY1", "sentinel-data-second-Tj8vZ2"];
    await withRedis(async (primary, admin) => {
      const sentinel = await startTestSentinel(Number(new URL(primary.url).port));
      const asSentinel = new Redis(sentinel.port, "127.0.0.1");
      try {
        await admin.config("SET", "requirepass", first);
        await admin.auth(first);
        await asSentinel.call("SENTINEL", "SET", "mymaster", "auth-pass", first);
        const file = passwordFile("sentinel", first);
        const port = await portOutsideEphemeralRange();
        const service = start({ REDIS_SENTINELS: `127.0.0.1:${sentinel.port}`, LAUREL_REDIS_PASSWORD_FILE: file, PORT: String(port) });
        await waitFor(() => service.output().includes("laurel listening"), "the service to listen through the sentinel", service.exited, service.output);
        expect(await served(port, "via-sentinel")).toBe(true);

        await admin.config("SET", "requirepass", second);
        await asSentinel.call("SENTINEL", "SET", "mymaster", "auth-pass", second);
        await admin.client("KILL", "TYPE", "normal", "SKIPME", "yes");
        rotate(file, second);
        await waitFor(() => served(port, "via-sentinel-rotated"), "events and reads served with the second password", service.exited, service.output);
        service.child.kill("SIGTERM");
        expect(await service.exited).toBe(0);
        for (const password of [first, second]) expect(service.output()).not.toContain(password);
      } finally {
        asSentinel.disconnect();
        await sentinel.stop();
      }
    });
  });
});

describe("a start during a rotation (the server takes the new password, the file still holds the old)", () => {
  const refused = (server: TestRedis, file: string, secrets: string[]): RefusedStart => {
    const address = `127.0.0.1:${new URL(server.url).port}`;
    return {
      env: { REDIS_URL: `redis://${address}`, LAUREL_REDIS_PASSWORD_FILE: file },
      refusal: `Redis at ${address} refused the password in LAUREL_REDIS_PASSWORD_FILE (WRONGPASS); check it, and the user in REDIS_URL`,
      prefix: "Redis at ",
      variable: "LAUREL_REDIS_PASSWORD_FILE",
      secrets,
    };
  };

  it("waits for the file, the service and dist/worker.js alike, and starts once it is written", async () => {
    const [old, rotated] = ["start-old-Vl1xB4", "start-rotated-Wm2yC5"];
    await withRedis(async (server, admin) => {
      await admin.config("SET", "requirepass", rotated);
      await admin.auth(rotated);
      const file = passwordFile("start-waits", old);
      await fixture.startsOnceWritten(refused(server, file, [old, rotated]), () => rotate(file, rotated));
    });
  });

  it("exits 1 naming the refusal and the bound once LAUREL_REDIS_WAIT has passed without the file written", async () => {
    const [old, rotated] = ["bound-old-Xn3zD6", "bound-rotated-Yo4aE7"];
    await withRedis(async (server, admin) => {
      await admin.config("SET", "requirepass", rotated);
      await fixture.givesUpAtTheBound(refused(server, passwordFile("start-gives-up", old), [old, rotated]));
    });
  });
});

describe("a password file the start cannot use", () => {
  it("stops the service and dist/worker.js, naming the variable and the file, never its contents", async () => {
    const secret = "bad-file-secret-Uk9wA3";
    const { empty, lines, missing } = fixture.unusableFiles(secret);
    const url = "redis://127.0.0.1:6379";
    const starts: { env: Record<string, string>; says: string }[] = [
      { env: { REDIS_URL: url, LAUREL_REDIS_PASSWORD_FILE: empty }, says: `LAUREL_REDIS_PASSWORD_FILE (${empty}) is empty` },
      { env: { REDIS_URL: url, LAUREL_REDIS_PASSWORD_FILE: lines }, says: `LAUREL_REDIS_PASSWORD_FILE (${lines}) holds more than one line` },
      { env: { REDIS_URL: url, LAUREL_REDIS_PASSWORD_FILE: missing }, says: `LAUREL_REDIS_PASSWORD_FILE names a file that cannot be read: ${missing} (ENOENT)` },
      { env: { REDIS_URL: `redis://laurel:${secret}@127.0.0.1:6379`, LAUREL_REDIS_PASSWORD_FILE: passwordFile("beside-url", "file-pw") }, says: "LAUREL_REDIS_PASSWORD_FILE is set and REDIS_URL holds a password too" },
    ];
    await fixture.refusedAtStart(starts, secret);
  });
});
