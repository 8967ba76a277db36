import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { portOutsideEphemeralRange } from "../helpers/ports.js";
import { startTestRedis, startTestSentinel } from "../helpers/redis-server.js";
import { runService, waitFor, WORKER, type ServiceProcess } from "../helpers/service-process.js";
import { lessonsTenantYaml } from "../helpers/tenant-yaml.js";
import { OPENSSL_HINT, startTlsRedis, type TlsRedis } from "../helpers/tls-redis.js";
import { startReceiver, type Receiver } from "../helpers/webhook-receiver.js";

/**
 * Redis over TLS (README: Configuration, REDIS_URL `rediss://`; Operations): the built service and
 * `node dist/worker.js` on a redis-server that speaks TLS only, with a certificate from a private
 * CA the processes trust through NODE_EXTRA_CA_CERTS. The event path, the reads, the job queues
 * (BullMQ, their own connections) and the stream worker all reach it. A certificate the process
 * does not trust stops the start at once, saying what to do, instead of waiting LAUREL_REDIS_WAIT
 * and calling Redis "not reachable".
 */

const key = { "x-api-key": "demo-key" };
const admin = { "x-api-key": "demo-admin-key" };

let server: TlsRedis;
let dir: string;
let config: string;
const running: ServiceProcess[] = [];

beforeAll(async () => {
  server = await startTlsRedis();
  dir = mkdtempSync(join(tmpdir(), "laurel-tls-test-"));
});

afterAll(async () => {
  for (const proc of running) {
    if (proc.child.exitCode === null && proc.child.signalCode === null) {
      proc.child.kill("SIGTERM");
      await proc.exited;
    }
  }
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A process of the built service (or `entry`), its data directory in the test's, started with the test's env. */
function start(env: Record<string, string>, entry?: string): ServiceProcess {
  const proc = runService({ LAUREL_DATA_DIR: join(dir, "data"), ...env }, entry);
  running.push(proc);
  return proc;
}

describe("the service and the worker on a TLS-only Redis", () => {
  let receiver: Receiver;

  beforeAll(async () => {
    // The first attempt (the webhook consumer's own POST) fails; the retry goes through the
    // delivery queue, a BullMQ job taken by a BullMQ worker over its own TLS connections.
    receiver = await startReceiver((_request, index) => (index === 0 ? 500 : 200));
    config = join(dir, "tenant.yaml");
    writeFileSync(config, lessonsTenantYaml("demo", { url: receiver.url, events: ["achievement.completed"] }));
  });

  afterAll(async () => {
    await receiver?.close();
  });

  it("records events, reads them, runs the job queues and the stream worker over TLS", async () => {
    const port = await portOutsideEphemeralRange();
    const tls = { REDIS_URL: server.url, NODE_EXTRA_CA_CERTS: server.caPath, LAUREL_CONFIG: config };
    // The stream worker and the webhook consumer run in dist/worker.js alone (below).
    const service = start({ ...tls, PORT: String(port), LAUREL_WORKER: "off" });
    await waitFor(() => service.output().includes("laurel listening"), "the service to listen", service.exited, service.output);
    const base = `http://127.0.0.1:${port}`;
    const call = async (method: string, path: string, headers: Record<string, string> = key, body?: unknown) => {
      const res = await fetch(`${base}${path}`, { method, headers: { ...headers, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as any };
    };

    const event = await call("POST", "/v1/metrics/lessons/event", key, { user: { id: "tls", tz: "UTC" }, value: 1 });
    expect(event.status).toBe(201);
    expect(event.body.points.xp).toMatchObject({ total: 10, added: 10 });
    const points = await call("GET", "/v1/users/tls/points/xp");
    expect(points.status).toBe(200);
    expect(points.body.total).toBe(10);
    expect(await call("GET", "/healthz", {})).toMatchObject({ status: 200, body: { status: "ok", redis: "ok" } });

    // The worker process on the same URL: it applies the stream records (the event summary's
    // daily buckets) and consumes the hook stream (the first attempt, answered 500).
    const worker = start(tls, WORKER);
    await waitFor(() => worker.output().includes("laurel stream worker running"), "the worker to run", worker.exited, worker.output);
    const today = new Date().toISOString().slice(0, 10);
    const summed = async (): Promise<number> => {
      const days = (await call("GET", `/v1/users/tls/metrics/lessons/event-summary?aggregation=daily&startDate=${today}&endDate=${today}`)).body as { change: number }[];
      return days.reduce((sum, day) => sum + day.change, 0);
    };
    await waitFor(async () => (await summed()) === 1, "the worker to apply the lesson");
    await receiver.waitFor(1);
    let retrying: { id: string }[] = [];
    await waitFor(async () => (retrying = (await call("GET", "/admin/v1/webhooks/deliveries?status=retrying", admin)).body.deliveries).length === 1, "the failed first attempt's delivery to wait for its retry");
    // Sent now, by a BullMQ worker (the service's or the worker process's) over TLS.
    expect(await call("POST", `/admin/v1/webhooks/deliveries/${retrying[0]!.id}/replay`, admin, {})).toMatchObject({ status: 200 });
    const [, second] = await receiver.waitFor(2);
    expect(second!.body.type).toBe("achievement.completed");
    await waitFor(async () => (await call("GET", `/admin/v1/webhooks/deliveries/${retrying[0]!.id}`, admin)).body.status === "delivered", "the retry to be delivered");

    // Nothing reached Redis around TLS: it has no plain port at all.
    const direct = new Redis({ host: "localhost", port: server.port, tls: { ca: readFileSync(server.caPath) } });
    try {
      expect(await direct.config("GET", "port")).toEqual(["port", "0"]);
      expect(await direct.config("GET", "tls-port")).toEqual(["tls-port", String(server.port)]);
    } finally {
      direct.disconnect();
    }
    for (const proc of [service, worker]) expect(proc.output()).not.toMatch(/"level":(50|60)/);
  });
});

describe("through a sentinel, TLS to it and to the primary", () => {
  it("finds the primary and serves, the job queues and the worker too, with a rediss:// REDIS_URL beside REDIS_SENTINELS", async () => {
    const sentinel = await startTestSentinel(server.port, [], "tlsgroup", { tls: server.files });
    try {
      // TLS only: the sentinel has no plain port either, and names the primary by its TLS port.
      const ask = new Redis({ host: "127.0.0.1", port: sentinel.port, tls: { ca: readFileSync(server.caPath) } });
      try {
        expect(await ask.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "tlsgroup")).toEqual(["127.0.0.1", String(server.port)]);
      } finally {
        ask.disconnect();
      }
      // The URL gives TLS; its host and port are not used with sentinels (a port that refuses: a
      // build that took them would fail, not reach another server).
      const env = { REDIS_URL: "rediss://127.0.0.1:1", REDIS_SENTINELS: `127.0.0.1:${sentinel.port}`, REDIS_SENTINEL_NAME: "tlsgroup", NODE_EXTRA_CA_CERTS: server.caPath, LAUREL_CONFIG: config };
      const port = await portOutsideEphemeralRange();
      // The service awaits its job queues' workers before it listens: it listens only if BullMQ got through too.
      const service = start({ ...env, PORT: String(port), LAUREL_WORKER: "off" });
      await waitFor(() => service.output().includes("laurel listening"), "the service to listen", service.exited, service.output);
      const res = await fetch(`http://127.0.0.1:${port}/v1/metrics/lessons/event`, { method: "POST", headers: { ...key, "content-type": "application/json" }, body: JSON.stringify({ user: { id: "tls-sentinel", tz: "UTC" }, value: 1 }) });
      expect(res.status).toBe(201);
      expect(((await res.json()) as any).points.xp.total).toBe(10);
      const worker = start(env, WORKER);
      await waitFor(() => worker.output().includes("laurel stream worker running"), "the worker to run", worker.exited, worker.output);
      for (const proc of [service, worker]) expect(proc.output()).not.toMatch(/"level":(50|60)/);
    } finally {
      await sentinel.stop();
    }
  });
});

describe("a certificate the process does not accept", () => {
  /** The fatal line of a start that gave up on the certificate. */
  const certificateLine = (code: string, address: string): RegExp =>
    new RegExp(`Redis at ${address.replace(/\./g, "\\.")}: TLS certificate not accepted \\(${code}: [^)]*\\); trust the server's CA with NODE_EXTRA_CA_CERTS=<path to the CA's PEM>, or check the host name in REDIS_URL against the certificate`);

  it("stops the service's start at once, naming the address, the cause and what to do: a private CA not trusted", async () => {
    const service = start({ REDIS_URL: server.url, LAUREL_CONFIG: config, PORT: String(await portOutsideEphemeralRange()) });
    expect(await service.exited).toBe(1);
    expect(service.output()).toMatch(certificateLine("SELF_SIGNED_CERT_IN_CHAIN", `localhost:${server.port}`));
    // Neither a wait announced nor "not reachable": the one line says it.
    expect(service.output()).not.toContain("waiting for Redis");
    expect(service.output()).not.toContain("not reachable");
  });

  it("stops dist/worker.js the same way", async () => {
    const worker = start({ REDIS_URL: server.url, LAUREL_CONFIG: config }, WORKER);
    expect(await worker.exited).toBe(1);
    expect(worker.output()).toMatch(certificateLine("SELF_SIGNED_CERT_IN_CHAIN", `localhost:${server.port}`));
  });

  it("stops the start on a host name the certificate does not carry, the CA trusted", async () => {
    const service = start({ REDIS_URL: `rediss://127.0.0.2:${server.port}`, NODE_EXTRA_CA_CERTS: server.caPath, LAUREL_CONFIG: config, PORT: String(await portOutsideEphemeralRange()) });
    expect(await service.exited).toBe(1);
    expect(service.output()).toMatch(certificateLine("ERR_TLS_CERT_ALTNAME_INVALID", `127.0.0.2:${server.port}`));
  });
});

describe("a rediss:// URL on a Redis without TLS", () => {
  it("waits (no error to read: the server waits for the rest of a command), then names TLS as the suspect", async () => {
    const plain = await startTestRedis();
    try {
      const service = start({ REDIS_URL: plain.url.replace("redis://", "rediss://"), LAUREL_REDIS_WAIT: "1", LAUREL_CONFIG: config, PORT: String(await portOutsideEphemeralRange()) });
      expect(await service.exited).toBe(1);
      expect(service.output()).toContain(`Redis at 127.0.0.1:${new URL(plain.url).port} is not reachable (waited 1 s, LAUREL_REDIS_WAIT); check REDIS_URL (a rediss:// URL: does that port speak TLS?)`);
    } finally {
      await plain.stop();
    }
  });
});

describe("startTlsRedis", () => {
  it("says what to install when openssl is missing, instead of a failed command", async () => {
    const path = process.env.PATH;
    process.env.PATH = mkdtempSync(join(tmpdir(), "laurel-no-openssl-")); // an empty directory: no openssl on it
    try {
      await expect(startTlsRedis()).rejects.toThrow(OPENSSL_HINT);
    } finally {
      rmSync(process.env.PATH, { recursive: true, force: true });
      process.env.PATH = path;
    }
  });
});
