import { spawnSync } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { createServer, type AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../src/embedded-redis.js";
import { portOutsideEphemeralRange } from "../helpers/ports.js";
import { startTestRedis, startTestSentinel } from "../helpers/redis-server.js";
import { callService, runService, waitFor, WORKER, type ServiceProcess } from "../helpers/service-process.js";
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
const CHECK = new URL("../../dist/check-config.js", import.meta.url).pathname;
const admin = { "x-api-key": "demo-admin-key" };

let server: TlsRedis;
/** A TLS-only Redis that asks its clients for a certificate signed by its CA (tls-auth-clients yes). */
let mtls: TlsRedis;
let dir: string;
let config: string;
const running: ServiceProcess[] = [];

beforeAll(async () => {
  server = await startTlsRedis();
  mtls = await startTlsRedis({ authClients: true });
  dir = mkdtempSync(join(tmpdir(), "laurel-tls-test-"));
  // The tenant file of the tests without webhooks to deliver (those above write their own).
  config = join(dir, "tenant.yaml");
  writeFileSync(config, lessonsTenantYaml("demo"));
});

afterAll(async () => {
  for (const proc of running) {
    if (proc.child.exitCode === null && proc.child.signalCode === null) {
      proc.child.kill("SIGTERM");
      await proc.exited;
    }
  }
  await server?.stop();
  await mtls?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A process of the built service (or `entry`), its data directory in the test's, started with the test's env. */
function start(env: Record<string, string>, entry?: string): ServiceProcess {
  const proc = runService({ LAUREL_DATA_DIR: join(dir, "data"), ...env }, entry);
  running.push(proc);
  return proc;
}

/**
 * The two ways a process trusts the server and is known to it: a private CA added to Node's with
 * NODE_EXTRA_CA_CERTS on a server that asks for no client certificate; and on one that asks
 * (`tls-auth-clients yes`, Redis's default), a client certificate and key, and the CA given
 * with LAUREL_REDIS_TLS_CA alone.
 */
const ways: { name: string; server: () => TlsRedis; env: (server: TlsRedis) => Record<string, string> }[] = [
  { name: "a private CA in NODE_EXTRA_CA_CERTS", server: () => server, env: (s) => ({ NODE_EXTRA_CA_CERTS: s.caPath }) },
  {
    name: "a client certificate (tls-auth-clients yes) and LAUREL_REDIS_TLS_CA",
    server: () => mtls,
    env: (s) => ({ LAUREL_REDIS_TLS_CERT: s.client.cert, LAUREL_REDIS_TLS_KEY: s.client.key, LAUREL_REDIS_TLS_CA: s.caPath }),
  },
];

describe.each(ways)("the service and the worker on a TLS-only Redis: $name", (way) => {
  let receiver: Receiver;
  let config: string;

  beforeAll(async () => {
    // The first attempt (the webhook consumer's own POST) fails; the retry goes through the
    // delivery queue, a BullMQ job taken by a BullMQ worker over its own TLS connections.
    receiver = await startReceiver((_request, index) => (index === 0 ? 500 : 200));
    config = join(dir, `tenant-${ways.indexOf(way)}.yaml`);
    writeFileSync(config, lessonsTenantYaml("demo", { url: receiver.url, events: ["achievement.completed"] }));
  });

  afterAll(async () => {
    await receiver?.close();
  });

  it("records events, reads them, runs the job queues and the stream worker over TLS", async () => {
    const redis = way.server();
    const port = await portOutsideEphemeralRange();
    const tls = { REDIS_URL: redis.url, ...way.env(redis), LAUREL_CONFIG: config };
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
    // The days around today: UTC midnight may pass between the event and this read.
    const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
    const summed = async (): Promise<number> => {
      const days = (await call("GET", `/v1/users/tls/metrics/lessons/event-summary?aggregation=daily&startDate=${day(-1)}&endDate=${day(1)}`)).body as { change: number }[];
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
    const direct = new Redis({ host: "localhost", port: redis.port, tls: { ca: readFileSync(redis.caPath), cert: readFileSync(redis.client.cert), key: readFileSync(redis.client.key) } });
    try {
      expect(await direct.config("GET", "port")).toEqual(["port", "0"]);
      expect(await direct.config("GET", "tls-port")).toEqual(["tls-port", String(redis.port)]);
      expect(await direct.config("GET", "tls-auth-clients")).toEqual(["tls-auth-clients", redis === mtls ? "yes" : "no"]);
    } finally {
      direct.disconnect();
    }
    for (const proc of [service, worker]) expect(proc.output()).not.toMatch(/"level":(50|60)/);
  });
});

describe("npm run check-config on a Redis that asks for a client certificate", () => {
  it("reads the stored data with the LAUREL_REDIS_TLS_* files, as the start does", async () => {
    const check = runService({ REDIS_URL: mtls.url, ...ways[1]!.env(mtls), LAUREL_CONFIG: config }, CHECK);
    expect(await check.exited).toBe(0);
    expect(check.output()).toContain(`the data in Redis at localhost:${mtls.port} can be read with it`);
  });
});

describe.each(ways)("through a sentinel, TLS to it and to the primary: $name", (way) => {
  it("finds the primary and serves, the job queues and the worker too, with a rediss:// REDIS_URL beside REDIS_SENTINELS", async () => {
    const server = way.server();
    // With a client certificate, the sentinel asks for one too (its own tls-auth-clients yes).
    const sentinel = await startTestSentinel(server.port, [], "tlsgroup", { tls: { ...server.files, authClients: server === mtls } });
    try {
      // TLS only: the sentinel has no plain port either, and names the primary by its TLS port.
      const ask = new Redis({ host: "127.0.0.1", port: sentinel.port, tls: { ca: readFileSync(server.caPath), cert: readFileSync(server.client.cert), key: readFileSync(server.client.key) } });
      try {
        expect(await ask.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "tlsgroup")).toEqual(["127.0.0.1", String(server.port)]);
      } finally {
        ask.disconnect();
      }
      // The URL gives TLS; its host and port are not used with sentinels (a port that refuses: a
      // build that took them would fail, not reach another server).
      const env = { REDIS_URL: "rediss://127.0.0.1:1", REDIS_SENTINELS: `127.0.0.1:${sentinel.port}`, REDIS_SENTINEL_NAME: "tlsgroup", ...way.env(server), LAUREL_CONFIG: config };
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
    new RegExp(`Redis at ${address.replace(/\./g, "\\.")}: TLS certificate not accepted \\(${code}: [^)]*\\); trust the server's CA with LAUREL_REDIS_TLS_CA=<path to the CA's PEM> \\(or NODE_EXTRA_CA_CERTS\\), or check the host name in REDIS_URL against the certificate`);

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

  it("stops the start on an expired certificate, the CA trusted", async () => {
    const expired = await startTlsRedis({ expired: true });
    try {
      const service = start({ REDIS_URL: expired.url, NODE_EXTRA_CA_CERTS: expired.caPath, LAUREL_CONFIG: config, PORT: String(await portOutsideEphemeralRange()) });
      expect(await service.exited).toBe(1);
      expect(service.output()).toMatch(certificateLine("CERT_HAS_EXPIRED", `localhost:${expired.port}`));
      expect(service.output()).not.toContain("not reachable");
    } finally {
      await expired.stop();
    }
  });
});

describe("a client certificate the server refuses (tls-auth-clients yes)", () => {
  /** The last line a process wrote: a start that gave up says why there. */
  const lastLine = (proc: ServiceProcess): string => (JSON.parse(proc.output().trim().split("\n").at(-1)!) as { msg: string }).msg;
  // Over TLS 1.3 the server's alert (certificate_required) mostly loses the race with a reset;
  // the start asks again over TLS 1.2, whose word for it is handshake_failure, always.
  const missing = (address: string): string =>
    `Redis at ${address} requires a TLS client certificate (ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE: its tls-auth-clients); set LAUREL_REDIS_TLS_CERT and LAUREL_REDIS_TLS_KEY to a certificate signed by a CA the server trusts (its tls-ca-cert-file) and its key`;

  it("stops the service's start when none is given, at once (LAUREL_REDIS_WAIT is not waited), saying what to set", async () => {
    const service = start({ REDIS_URL: mtls.url, LAUREL_REDIS_TLS_CA: mtls.caPath, LAUREL_CONFIG: config, PORT: String(await portOutsideEphemeralRange()) });
    expect(await service.exited).toBe(1);
    expect(lastLine(service)).toBe(missing(`localhost:${mtls.port}`));
  });

  it("stops dist/worker.js the same way", async () => {
    const worker = start({ REDIS_URL: mtls.url, NODE_EXTRA_CA_CERTS: mtls.caPath, LAUREL_CONFIG: config }, WORKER);
    expect(await worker.exited).toBe(1);
    expect(lastLine(worker)).toBe(missing(`localhost:${mtls.port}`));
  });

  it("stops the start on a certificate from a CA the server does not trust, naming the variable", async () => {
    const service = start({
      REDIS_URL: mtls.url, LAUREL_REDIS_TLS_CA: mtls.caPath, LAUREL_REDIS_TLS_CERT: mtls.strangerClient.cert, LAUREL_REDIS_TLS_KEY: mtls.strangerClient.key,
      LAUREL_CONFIG: config, PORT: String(await portOutsideEphemeralRange()),
    });
    expect(await service.exited).toBe(1);
    expect(lastLine(service)).toBe(
      `Redis at localhost:${mtls.port} refused the TLS client certificate in LAUREL_REDIS_TLS_CERT (ERR_SSL_TLSV1_ALERT_UNKNOWN_CA); give one signed by a CA the server trusts (its tls-ca-cert-file), not expired`,
    );
    // The key's contents are nowhere in the output.
    const keyLine = readFileSync(mtls.strangerClient.key, "utf8").split("\n")[1]!;
    expect(service.output()).not.toContain(keyLine);
  });
});

describe("a client certificate renewed in place (store/redis-tls-reload.ts)", () => {
  it("is presented from the next connection on, without a restart; a pair half written is not taken", async () => {
    const renewing = await startTlsRedis({ authClients: true });
    // The certificate and key the service reads, in a directory of their own (as a secret volume).
    const files = join(dir, "renewing");
    mkdirSync(files);
    const cert = join(files, "client.pem");
    const keyFile = join(files, "client.key");
    copyFileSync(renewing.client.cert, cert);
    copyFileSync(renewing.client.key, keyFile);
    // The renewal: a certificate from the second CA (the stranger one), ending a day before the first.
    const caDir = dirname(renewing.caPath);
    const renewed = { cert: join(files, "renewed.pem"), key: join(files, "renewed.key") };
    for (const args of [
      ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", renewed.key, "-out", join(files, "renewed.csr"), "-subj", "/CN=laurel-renewed"],
      ["x509", "-req", "-in", join(files, "renewed.csr"), "-CA", join(caDir, "stranger-ca.pem"), "-CAkey", join(caDir, "stranger-ca.key"), "-CAcreateserial", "-out", renewed.cert, "-days", "1"],
    ]) {
      expect(spawnSync("openssl", args).status).toBe(0);
    }
    // A connection of the test's, opened while the server trusts the first CA: it moves the server to the second.
    const operator = new Redis({ host: "localhost", port: renewing.port, tls: { ca: readFileSync(renewing.caPath), cert: readFileSync(cert), key: readFileSync(keyFile) }, maxRetriesPerRequest: 0 });
    try {
      const port = await portOutsideEphemeralRange();
      const service = start({
        REDIS_URL: renewing.url, LAUREL_REDIS_TLS_CA: renewing.caPath, LAUREL_REDIS_TLS_CERT: cert, LAUREL_REDIS_TLS_KEY: keyFile,
        LAUREL_CONFIG: config, PORT: String(port), LAUREL_WORKER: "off",
      });
      await waitFor(() => service.output().includes("laurel listening"), "the service to listen", service.exited, service.output);
      const lesson = () => callService(port, "POST", "/v1/metrics/lessons/event", { user: { id: "renewed" }, value: 1 });
      expect((await lesson()).status).toBe(201);
      // GET /metrics: when the certificate presented now ends, to alert on before it does.
      const certificateEnd = async () => {
        const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
        return Number(/^laurel_redis_tls_not_after_seconds\{process="[^"]*",file="LAUREL_REDIS_TLS_CERT"\} (\S+)$/m.exec(text)?.[1]);
      };
      const endOf = (path: string) => Date.parse(new X509Certificate(readFileSync(path)).validTo) / 1000;
      expect(await certificateEnd()).toBe(endOf(renewing.client.cert));
      // Half a renewal: the new certificate beside the old key. Not taken, said once; the service
      // reconnects (its connections killed) with the pair it has.
      copyFileSync(renewed.cert, cert);
      await waitFor(() => service.output().includes("the Redis TLS files changed but cannot be used"), "the half renewal to be refused", service.exited, service.output);
      expect(await certificateEnd()).toBe(endOf(renewing.client.cert));
      await operator.client("KILL", "TYPE", "normal", "SKIPME", "yes");
      expect((await lesson()).status).toBe(201);
      // The whole renewal, then the server trusts the new certificate's CA alone and drops every
      // connection: the service's reconnects present the new certificate, or Redis is lost.
      copyFileSync(renewed.key, keyFile);
      await waitFor(() => service.output().includes("read the renewed Redis TLS files"), "the renewal to be read", service.exited, service.output);
      expect(endOf(renewing.client.cert) - endOf(renewed.cert)).toBeGreaterThan(86_000);
      expect(await certificateEnd()).toBe(endOf(renewed.cert));
      // The service's connections (its client, the webhook queues' BullMQ ones): all come back.
      const connections = async () => ((await operator.call("CLIENT", "LIST", "TYPE", "normal")) as string).trim().split("\n").length - 1;
      const before = await connections();
      expect(before).toBeGreaterThan(1);
      await operator.config("SET", "tls-ca-cert-file", join(caDir, "stranger-ca.pem"));
      await operator.client("KILL", "TYPE", "normal", "SKIPME", "yes");
      expect((await lesson()).body).toMatchObject({ total: 3 });
      // At least as many (not exactly: \`before\` may have been counted while BullMQ's connections,
      // which reconnect a second or more after the first kill, were still coming back, and a
      // count above it then never falls to it).
      await waitFor(async () => (await connections()) >= before, `the service's ${before} connections back`, service.exited, service.output);
      const lines = service.output().trim().split("\n").map((line) => JSON.parse(line) as { msg: string; subject?: string; problems?: string[] });
      expect(lines.filter((line) => line.msg.startsWith("the Redis TLS files changed but cannot be used"))).toHaveLength(1);
      expect(lines.find((line) => line.msg.startsWith("read the renewed Redis TLS files"))!.subject).toBe("CN=laurel-renewed");
      // The key's contents are nowhere in the output.
      expect(service.output()).not.toContain(readFileSync(keyFile, "utf8").split("\n")[1]!);
    } finally {
      operator.disconnect();
      await renewing.stop();
    }
  });
});

describe("a TLS Redis that takes the connection but does not answer (paused)", () => {
  it("is waited for, not asked about a client certificate: its TLS 1.2 refusal there is no word on one", async () => {
    // TLS 1.2 ciphers Node does not offer: asked over TLS 1.2 (redis-tls.ts askClientCertificate),
    // this server answers handshake_failure, the word a Redis that asks for a client certificate
    // uses. Only a connection closed right after its handshake is asked about; this one stays
    // open, waiting for its first answer.
    const quiet = await startTlsRedis({ serverArgs: ["--tls-ciphers", "PSK-AES128-CBC-SHA"] });
    const admin = new Redis({ host: "localhost", port: quiet.port, tls: { ca: readFileSync(quiet.caPath) } });
    try {
      await admin.call("CLIENT", "PAUSE", "600000", "ALL");
      const service = start({ REDIS_URL: quiet.url, NODE_EXTRA_CA_CERTS: quiet.caPath, LAUREL_REDIS_WAIT: "1", LAUREL_CONFIG: config, PORT: String(await portOutsideEphemeralRange()) });
      expect(await service.exited).toBe(1);
      expect(JSON.parse(service.output().trim().split("\n").at(-1)!).msg).toBe(
        `Redis at localhost:${quiet.port} is not reachable (waited 1 s, LAUREL_REDIS_WAIT); check REDIS_URL (a rediss:// URL: does that port speak TLS?)`,
      );
    } finally {
      // No CLIENT UNPAUSE: it would wait for the pause like any other command; a stop ends it.
      admin.disconnect();
      await quiet.stop();
    }
  });
});

describe("sentinels over TLS that refuse the process", () => {
  // ioredis keeps the sentinels' connection errors to itself: the start asks each sentinel as
  // ioredis would connect to it (store/redis-first-connection.ts), and stops at once, as it does
  // for a data node (LAUREL_REDIS_WAIT, 60 s by default, is not waited).
  const lastLine = (proc: ServiceProcess): string => (JSON.parse(proc.output().trim().split("\n").at(-1)!) as { msg: string }).msg;

  it("stops the start at once on a sentinel that asks for a client certificate, none given", async () => {
    const sentinel = await startTestSentinel(mtls.port, [], "tlsgroup", { tls: { ...mtls.files, authClients: true } });
    try {
      const service = start({
        REDIS_URL: "rediss://127.0.0.1:1", REDIS_SENTINELS: `127.0.0.1:${sentinel.port}`, REDIS_SENTINEL_NAME: "tlsgroup",
        LAUREL_REDIS_TLS_CA: mtls.caPath, LAUREL_CONFIG: config, PORT: String(await portOutsideEphemeralRange()),
      });
      expect(await service.exited).toBe(1);
      expect(lastLine(service)).toBe(
        `Sentinel at 127.0.0.1:${sentinel.port} requires a TLS client certificate (ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE: its tls-auth-clients); set LAUREL_REDIS_TLS_CERT and LAUREL_REDIS_TLS_KEY to a certificate signed by a CA the server trusts (its tls-ca-cert-file) and its key`,
      );
    } finally {
      await sentinel.stop();
    }
  });

  it("stops the start at once on a sentinel whose certificate the process does not accept, and names every sentinel", async () => {
    const sentinels = [await startTestSentinel(mtls.port, [], "tlsgroup", { tls: { ...mtls.files } }), await startTestSentinel(mtls.port, [], "tlsgroup", { tls: { ...mtls.files } })];
    try {
      // The client certificate the data node asks for, but no CA: the sentinels' certificates are the private CA's.
      const service = start({
        REDIS_URL: "rediss://127.0.0.1:1", REDIS_SENTINELS: sentinels.map((s) => `127.0.0.1:${s.port}`).join(","), REDIS_SENTINEL_NAME: "tlsgroup",
        LAUREL_REDIS_TLS_CERT: mtls.client.cert, LAUREL_REDIS_TLS_KEY: mtls.client.key, LAUREL_CONFIG: config, PORT: String(await portOutsideEphemeralRange()),
      });
      expect(await service.exited).toBe(1);
      expect(lastLine(service)).toMatch(
        new RegExp(`^Sentinel at 127\\.0\\.0\\.1:${sentinels[0]!.port} \\(and the 1 other in REDIS_SENTINELS alike\\): TLS certificate not accepted \\((UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT_LOCALLY|SELF_SIGNED_CERT_IN_CHAIN): .+\\); trust the sentinel's CA with LAUREL_REDIS_TLS_CA=<path to the CA's PEM> \\(or NODE_EXTRA_CA_CERTS\\), or check the host in REDIS_SENTINELS against the certificate$`),
      );
    } finally {
      for (const s of sentinels) await s.stop();
    }
  });

  it("waits while one sentinel takes the process, then names the sentinels as the suspects", async () => {
    // One sentinel refuses (it asks for a client certificate), the other takes the process but
    // names a primary that does not answer (a port nothing listens on).
    const refusing = await startTestSentinel(mtls.port, [], "tlsgroup", { tls: { ...mtls.files, authClients: true } });
    const nowhere = await startTestSentinel(1, [], "tlsgroup", { tls: { ...mtls.files } });
    try {
      const service = start({
        REDIS_URL: "rediss://127.0.0.1:1", REDIS_SENTINELS: `127.0.0.1:${refusing.port},127.0.0.1:${nowhere.port}`, REDIS_SENTINEL_NAME: "tlsgroup",
        LAUREL_REDIS_TLS_CA: mtls.caPath, LAUREL_REDIS_WAIT: "1", LAUREL_CONFIG: config, PORT: String(await portOutsideEphemeralRange()),
      });
      expect(await service.exited).toBe(1);
      expect(lastLine(service)).toBe(
        `Redis at primary "tlsgroup" via sentinels 127.0.0.1:${refusing.port},127.0.0.1:${nowhere.port} is not reachable (waited 1 s, LAUREL_REDIS_WAIT); check REDIS_SENTINELS (over TLS: a sentinel that refuses the client certificate, LAUREL_REDIS_TLS_CERT, or asks for one, or whose certificate is not accepted, looks the same)`,
      );
    } finally {
      await refusing.stop();
      await nowhere.stop();
    }
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
  it("starts on another port when the one found free is taken before the server binds it, as the embedded server does (src/redis-child.ts)", async () => {
    // A listener that takes connections and answers nothing; it reads them, so that it sees the
    // probe that reached it close (its own close waits for that).
    const holder = createServer((socket) => socket.resume());
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    const taken = (holder.address() as AddressInfo).port;
    const ports = [taken];
    const moved = await startTlsRedis({ pickPort: async () => ports.shift() ?? (await freePort()) });
    const client = new Redis({ host: "localhost", port: moved.port, tls: { ca: readFileSync(moved.caPath) } });
    try {
      expect(moved.port).not.toBe(taken);
      expect(moved.url).toBe(`rediss://localhost:${moved.port}`);
      expect(await client.ping()).toBe("PONG");
    } finally {
      client.disconnect();
      await moved.stop();
      await new Promise((resolve) => holder.close(resolve));
    }
  });

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
