import { createPrivateKey } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { portOutsideEphemeralRange } from "../helpers/ports.js";
import { startTestRedis, startTestSentinel } from "../helpers/redis-server.js";
import { runService, waitFor, WORKER, type ServiceProcess } from "../helpers/service-process.js";
import { makeTlsCertificates } from "../helpers/tls-redis.js";
import { startReceiver, type Receiver } from "../helpers/webhook-receiver.js";

/**
 * No credential Laurel holds is written to its output (README: Operations, Logs): not REDIS_URL's
 * user and password, nor a sentinel's password, nor a tenant's API or admin keys (nor a wrong key
 * presented), nor a webhook's signing secret or the token in its URL, nor the contents of
 * LAUREL_REDIS_TLS_KEY, LAUREL_REDIS_PASSWORD_FILE, LAUREL_REDIS_SENTINEL_PASSWORD_FILE or
 * LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE. Real
 * processes (the built service, dist/worker.js, check-config) on a real redis-server that
 * requires a password and an ACL user, over a normal start, a wrong password, a Redis not there,
 * the Redis password changed under the running processes (their reconnects refused, requests and
 * the stream worker failing) and changed back, or rotated in the password file (the sentinels'
 * too, their refusals said), starts during a rotation that give up at their bound, requests with
 * wrong keys, an endpoint failing, an encrypted key's passphrase right and wrong; everything they
 * print is searched for each secret, and the bodies of the answers too.
 */
const USER = "lrl-user-Uq2zK";
const PASS = "redis-pass-Qm8vT3xL";
const ROTATED = "redis-rotated-Hk5sP1";
const WRONG_PASS = "redis-wrong-Zx4cN6";
const DEFAULT_PASS = "redis-default-Jn7wE2";
const SENTINEL_PASS = "sentinel-pass-Rt6yM9";
const SENTINEL_WRONG = "sentinel-wrong-Sp2qL5";
const API_KEY = "tenant-api-key-Vb7nR2";
const ADMIN_KEY = "tenant-admin-key-Wc8mS3";
const WRONG_KEY = "presented-wrong-key-Af2sV6";
const WEBHOOK_SECRET = "webhook-signing-secret-Yd9pT4";
const URL_TOKEN = "url-token-Ze1rU5";
const TLS_KEY_TEXT = "tls-key-contents-Bg3tW7";
const HOOK_PASS = "hook-userinfo-pass-Ch4uX8";
const PATH_TOKEN = "hook-path-token-Di5vY9";
/** Short enough for the stretch of text V8's JSON.parse quotes around an unexpected token. */
const SHORT_KEY = "Jk3Qw9Zp8";
/** The user whose password is in LAUREL_REDIS_PASSWORD_FILE, and what that file holds in turn (the last, a wrong one). */
const PASSWORD_FILE_SECRETS = { FILE_USER: "lrl-file-user-Ek2rB6", FILE_PASS: "file-pass-Fl3sC7", FILE_ROTATED: "file-rotated-Gm4tD8", FILE_WRONG: "file-wrong-Hn5uE9" };
const { FILE_USER, FILE_PASS, FILE_ROTATED, FILE_WRONG } = PASSWORD_FILE_SECRETS;
/** The passphrase of an encrypted LAUREL_REDIS_TLS_KEY, in LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE, and a wrong one. */
const PASSPHRASES = { PASSPHRASE: "key-passphrase-Io6vF1", PASSPHRASE_WRONG: "key-passphrase-wrong-Jp7wG2" };
const { PASSPHRASE, PASSPHRASE_WRONG } = PASSPHRASES;
/** What LAUREL_REDIS_SENTINEL_PASSWORD_FILE holds in turn: the sentinel's password, the rotated one, a wrong one. */
const SENTINEL_FILE_SECRETS = { SENTINEL_FILE_PASS: "sentinel-file-pass-Kq8xH3", SENTINEL_FILE_ROTATED: "sentinel-file-rotated-Lr9yJ4", SENTINEL_FILE_WRONG: "sentinel-file-wrong-Ms1zK5" };
const { SENTINEL_FILE_PASS, SENTINEL_FILE_ROTATED, SENTINEL_FILE_WRONG } = SENTINEL_FILE_SECRETS;
const SECRETS = {
  USER, PASS, ROTATED, WRONG_PASS, DEFAULT_PASS, SENTINEL_PASS, SENTINEL_WRONG, API_KEY, ADMIN_KEY, WRONG_KEY, WEBHOOK_SECRET, URL_TOKEN, TLS_KEY_TEXT, HOOK_PASS, PATH_TOKEN, SHORT_KEY,
  ...PASSWORD_FILE_SECRETS, ...PASSPHRASES, ...SENTINEL_FILE_SECRETS,
};

const CHECK_CONFIG = new URL("../../dist/check-config.js", import.meta.url).pathname;

/** The secrets `text` carries, by name: [] is the answer every test expects. */
const leaked = (text: string): string[] => Object.entries(SECRETS).filter(([, secret]) => text.includes(secret)).map(([name]) => name);
/** The lines of `output` that carry a secret: the secrets' names, the line's msg (a JSON line's) and the text around the first. */
const leakingLines = (output: string): string[] =>
  output
    .split("\n")
    .filter((line) => leaked(line).length > 0)
    .map((line) => {
      const names = leaked(line);
      const at = line.indexOf(SECRETS[names[0] as keyof typeof SECRETS]);
      const msg = /"msg":"([^"]*)"/.exec(line)?.[1] ?? "";
      return `${names.join(",")} in "${msg}": ...${line.slice(Math.max(0, at - 80), at + 40)}...`;
    });

describe("no secret in the output of a Laurel process, nor in its answers", () => {
  let server: Awaited<ReturnType<typeof startTestRedis>>;
  let admin: Redis;
  let receiver: Receiver;
  let dir: string;
  let config: string;
  let port: number;
  let url: string;

  beforeAll(async () => {
    server = await startTestRedis();
    port = Number(new URL(server.url).port);
    admin = new Redis(server.url);
    await admin.call("ACL", "SETUSER", USER, "on", `>${PASS}`, "~*", "&*", "+@all");
    await admin.config("SET", "requirepass", DEFAULT_PASS);
    await admin.auth(DEFAULT_PASS);
    url = `redis://${USER}:${PASS}@127.0.0.1:${port}`;
    // The endpoint fails every delivery (500), and its URL carries a token in its query string.
    receiver = await startReceiver(() => 500);
    dir = mkdtempSync(join(tmpdir(), "laurel-secrets-"));
    config = join(dir, "tenant.yaml");
    writeFileSync(
      config,
      `tenants:
  - id: secrets
    apiKeys: [${API_KEY}]
    adminKeys: [${ADMIN_KEY}]
    shards: 1
    metrics: [{ key: lessons, name: Lessons }]
    points:
      - key: xp
        name: XP
        triggers: [{ key: per-lesson, type: metric, metric: lessons, threshold: 1, points: 10 }]
    webhooks:
      - { key: main, url: "${receiver.url}?token=${URL_TOKEN}", secret: "${WEBHOOK_SECRET}", events: [points.changed] }
`,
    );
  });

  afterAll(async () => {
    await admin?.config("SET", "requirepass", "").catch(() => undefined);
    admin?.disconnect();
    await receiver?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const call = async (servicePort: number, method: string, path: string, key: string | null, body?: unknown) => {
    const res = await fetch(`http://127.0.0.1:${servicePort}${path}`, {
      method,
      headers: { ...(key === null ? {} : { "x-api-key": key }), "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, text: await res.text() };
  };
  const stop = async (p: ServiceProcess) => {
    p.child.kill("SIGTERM");
    await p.exited;
  };
  /** Each of `runs` (starts that must fail) exits 1, saying what it should, with no secret in its output. */
  const expectRefused = async (runs: readonly { p: ServiceProcess; says: string }[]) => {
    for (const { p, says } of runs) {
      expect(await p.exited).toBe(1);
      expect(leakingLines(p.output())).toEqual([]);
      expect(p.output()).toContain(says);
    }
  };
  /**
   * `user`'s password changed to `password` on the server, the user's connections closed: every
   * reconnect's AUTH is refused (WRONGPASS), and `service`'s requests (`send`) with it, until the
   * request's refusal is logged.
   */
  const passwordChanged = async (user: string, password: string, send: () => Promise<unknown>, service: ServiceProcess) => {
    await admin.call("ACL", "SETUSER", user, "resetpass", `>${password}`);
    await admin.client("KILL", "USER", user);
    await waitFor(async () => {
      // Not awaited to its end: a request whose call was written to the connection as it was
      // killed waits in ioredis to be re-sent on a connection Redis accepts, which comes only
      // after this wait (README, Left open). Given up after a second, the next one is refused.
      await Promise.race([send().catch(() => undefined), new Promise((r) => setTimeout(r, 1000))]);
      return service.output().includes('"msg":"redis refused the credentials in REDIS_URL (WRONGPASS');
    }, "an event to be refused on the refused reconnect", service.exited, service.output);
  };

  it("through a start, requests with right and wrong keys, a failing endpoint, the Redis password changed under the service and the worker, and back", async () => {
    const servicePort = await portOutsideEphemeralRange();
    const env = { REDIS_URL: url, LAUREL_CONFIG: config };
    const service = runService({ ...env, PORT: String(servicePort) });
    const worker = runService(env, WORKER);
    try {
      await waitFor(() => service.output().includes("laurel listening"), "the service to listen", service.exited, service.output);
      await waitFor(() => worker.output().includes("laurel stream worker running"), "the worker to run", worker.exited, worker.output);
      const lesson = () => call(servicePort, "POST", "/v1/metrics/lessons/event", API_KEY, { user: { id: "ada", tz: "UTC" }, value: 1 });

      const bodies: string[] = [];
      const answered = async (expected: number, answer: Promise<{ status: number; text: string }>) => {
        const { status, text } = await answer;
        bodies.push(text);
        expect(status).toBe(expected);
      };
      await answered(201, lesson());
      // A wrong key, on an application route and an admin one; each key where the other belongs.
      await answered(401, call(servicePort, "GET", "/v1/users/ada/metrics", WRONG_KEY));
      await answered(401, call(servicePort, "GET", "/admin/v1/points/xp/boosts", WRONG_KEY));
      await answered(401, call(servicePort, "GET", "/admin/v1/points/xp/boosts", API_KEY));
      await answered(401, call(servicePort, "GET", "/v1/users/ada/metrics", ADMIN_KEY));
      await answered(200, call(servicePort, "GET", "/healthz", null));
      await answered(200, call(servicePort, "GET", "/metrics", null));
      // The endpoint answered 500 to the event's delivery.
      await receiver.waitFor(1);

      // The password changed under both processes, their connections closed: every reconnect's
      // AUTH is refused (WRONGPASS), and the commands waiting fail with that refusal, which
      // carries the AUTH it answers (the user and the old password) as ioredis' `command`.
      await passwordChanged(USER, ROTATED, lesson, service);
      await waitFor(() => worker.output().includes("redis not reachable"), "the worker to lose Redis", worker.exited, worker.output);
      // And back: the connections restored.
      await admin.call("ACL", "SETUSER", USER, "resetpass", `>${PASS}`);
      await waitFor(() => service.output().includes("redis connection restored"), "the service back on Redis", service.exited, service.output);
      await waitFor(() => worker.output().includes("redis connection restored"), "the worker back on Redis", worker.exited, worker.output);
      await answered(201, lesson());

      expect(bodies.filter((b) => leaked(b).length > 0)).toEqual([]);
    } finally {
      await stop(service);
      await stop(worker);
    }
    expect({ service: leakingLines(service.output()), worker: leakingLines(worker.output()) }).toEqual({ service: [], worker: [] });
  });

  it("through starts that fail: a wrong password, none, a Redis not there, sentinels not there, a bad TLS key, a URL that does not parse", async () => {
    const closed = await portOutsideEphemeralRange();
    const keyFile = join(dir, "client.key");
    writeFileSync(keyFile, `-----BEGIN PRIVATE KEY-----\n${TLS_KEY_TEXT}\n-----END PRIVATE KEY-----\n`);
    const starts: Array<{ env: Record<string, string>; says: string }> = [
      { env: { REDIS_URL: `redis://${USER}:${WRONG_PASS}@127.0.0.1:${port}` }, says: "refused the credentials in REDIS_URL (WRONGPASS)" },
      { env: { REDIS_URL: `redis://:${WRONG_PASS}@127.0.0.1:${port}` }, says: "refused the credentials in REDIS_URL (WRONGPASS)" },
      { env: { REDIS_URL: `redis://${USER}:${PASS}@127.0.0.1:${closed}`, LAUREL_REDIS_WAIT: "1" }, says: `Redis at 127.0.0.1:${closed} is not reachable` },
      { env: { REDIS_URL: `rediss://${USER}:${PASS}@127.0.0.1:${closed}`, LAUREL_REDIS_WAIT: "1" }, says: `Redis at 127.0.0.1:${closed} is not reachable` },
      {
        env: { REDIS_URL: `redis://${USER}:${PASS}@ignored:1`, REDIS_SENTINELS: `127.0.0.1:${closed}`, REDIS_SENTINEL_PASSWORD: SENTINEL_PASS, LAUREL_REDIS_WAIT: "1" },
        says: `via sentinels 127.0.0.1:${closed} is not reachable`,
      },
      { env: { REDIS_URL: `rediss://${USER}:${PASS}@127.0.0.1:${closed}`, LAUREL_REDIS_TLS_CERT: keyFile, LAUREL_REDIS_TLS_KEY: keyFile }, says: "invalid environment" },
      // URLs Node's parser refuses (a port past 65535, a "%" without its hex digits): its error carries the text.
      { env: { REDIS_URL: `redis://${USER}:${PASS}@127.0.0.1:99999` }, says: "REDIS_URL cannot be read (Invalid URL;" },
      { env: { REDIS_URL: `redis://${USER}:${PASS}%zz@127.0.0.1:${port}` }, says: "REDIS_URL cannot be read (URI malformed;" },
      // Another scheme, which ioredis read as a socket path holding the password, and printed.
      { env: { REDIS_URL: `http://${USER}:${PASS}@127.0.0.1:${port}`, LAUREL_REDIS_WAIT: "1" }, says: "REDIS_URL is not a redis:// or rediss:// URL" },
    ];
    const runs = starts.flatMap(({ env, says }) => [
      { p: runService({ ...env, LAUREL_CONFIG: config, PORT: "0" }), says },
      { p: runService({ ...env, LAUREL_CONFIG: config }, WORKER), says },
    ]);
    await expectRefused(runs);
  });

  it("with the password in LAUREL_REDIS_PASSWORD_FILE: a start, a rotation under the service and the worker (reconnects refused, the file read again), a wrong one, a file of several lines", async () => {
    await admin.call("ACL", "SETUSER", FILE_USER, "on", `>${FILE_PASS}`, "~*", "&*", "+@all");
    mkdirSync(join(dir, "password"));
    const file = join(dir, "password", "redis-password");
    writeFileSync(file, `${FILE_PASS}\n`);
    const env = { REDIS_URL: `redis://${FILE_USER}@127.0.0.1:${port}`, LAUREL_REDIS_PASSWORD_FILE: file, LAUREL_CONFIG: config };
    const servicePort = await portOutsideEphemeralRange();
    const service = runService({ ...env, PORT: String(servicePort) });
    const worker = runService(env, WORKER);
    const lesson = () => call(servicePort, "POST", "/v1/metrics/lessons/event", API_KEY, { user: { id: "grace", tz: "UTC" }, value: 1 });
    try {
      await waitFor(() => service.output().includes("laurel listening"), "the service to listen", service.exited, service.output);
      await waitFor(() => worker.output().includes("laurel stream worker running"), "the worker to run", worker.exited, worker.output);
      expect((await lesson()).status).toBe(201);
      // The server first: each reconnect refused, and the requests with it, until the file holds the new password.
      await passwordChanged(FILE_USER, FILE_ROTATED, lesson, service);
      writeFileSync(`${file}.new`, `${FILE_ROTATED}\n`);
      renameSync(`${file}.new`, file);
      await waitFor(async () => (await lesson()).status === 201, "events served with the rotated password", service.exited, service.output);
      await waitFor(() => worker.output().includes("read the new Redis password"), "the worker to read the rotated password", worker.exited, worker.output);
    } finally {
      await stop(service);
      await stop(worker);
    }
    // Starts refused: a password Redis refuses (waited for within LAUREL_REDIS_WAIT, the file read
    // again at each refusal; check-config's check of it at once), a file of several lines. The
    // bound is waited out, not raced: the refusal comes at the first connection, in milliseconds.
    const wrong = join(dir, "password", "wrong");
    writeFileSync(wrong, `${FILE_WRONG}\n`);
    const lines = join(dir, "password", "lines");
    writeFileSync(lines, `${FILE_PASS}\n${FILE_ROTATED}\n`);
    const refusal = `Redis at 127.0.0.1:${port} refused the password in LAUREL_REDIS_PASSWORD_FILE (WRONGPASS); check it, and the user in REDIS_URL`;
    const starts = [
      { p: runService({ ...env, LAUREL_REDIS_PASSWORD_FILE: wrong, LAUREL_REDIS_WAIT: "10", PORT: "0" }), says: `${refusal} (still refused after 10 s` },
      { p: runService({ ...env, LAUREL_REDIS_PASSWORD_FILE: wrong, LAUREL_REDIS_WAIT: "10" }, WORKER), says: `${refusal} (still refused after 10 s` },
      { p: runService({ ...env, LAUREL_REDIS_PASSWORD_FILE: wrong }, CHECK_CONFIG), says: `cannot check the stored data: ${refusal}` },
      { p: runService({ ...env, LAUREL_REDIS_PASSWORD_FILE: lines, PORT: "0" }), says: `LAUREL_REDIS_PASSWORD_FILE (${lines}) holds more than one line` },
      { p: runService({ ...env, LAUREL_REDIS_PASSWORD_FILE: lines }, CHECK_CONFIG), says: `LAUREL_REDIS_PASSWORD_FILE (${lines}) holds more than one line` },
    ];
    await expectRefused(starts);
    expect({ service: leakingLines(service.output()), worker: leakingLines(worker.output()) }).toEqual({ service: [], worker: [] });
  });

  it("with the sentinels' password in LAUREL_REDIS_SENTINEL_PASSWORD_FILE: a start, a rotation under the service and the worker (their questions to the sentinel refused, the file read again), a wrong one, a file of several lines", async () => {
    const sentinel = await startTestSentinel(port);
    const asSentinel = new Redis(sentinel.port, "127.0.0.1");
    const servicePort = await portOutsideEphemeralRange();
    mkdirSync(join(dir, "sentinel-password"));
    const file = join(dir, "sentinel-password", "password");
    writeFileSync(file, `${SENTINEL_FILE_PASS}\n`);
    // The sentinel reaches the primary as the service's user, and asks its own clients for the file's password.
    const env = { REDIS_URL: `redis://${USER}:${PASS}@ignored:1`, REDIS_SENTINELS: `127.0.0.1:${sentinel.port}`, LAUREL_REDIS_SENTINEL_PASSWORD_FILE: file, LAUREL_CONFIG: config };
    let service: ServiceProcess | undefined;
    let worker: ServiceProcess | undefined;
    try {
      await asSentinel.call("SENTINEL", "SET", "mymaster", "auth-user", USER, "auth-pass", PASS);
      await asSentinel.call("ACL", "SETUSER", "default", "resetpass", `>${SENTINEL_FILE_PASS}`);
      await asSentinel.auth(SENTINEL_FILE_PASS);
      service = runService({ ...env, PORT: String(servicePort), LAUREL_WORKER: "off" });
      worker = runService(env, WORKER);
      const lesson = () => call(servicePort, "POST", "/v1/metrics/lessons/event", API_KEY, { user: { id: "hopper", tz: "UTC" }, value: 1 });
      await waitFor(() => service!.output().includes("laurel listening"), "the service to listen through the sentinel", service.exited, service.output);
      await waitFor(() => worker!.output().includes("laurel stream worker running"), "the worker to run", worker.exited, worker.output);
      expect((await lesson()).status).toBe(201);
      // The sentinel first: the processes' connections to the primary closed, each question to the
      // sentinel refused (WRONGPASS, its AUTH carrying the password) and said, until the file holds the new one.
      await asSentinel.call("ACL", "SETUSER", "default", "resetpass", `>${SENTINEL_FILE_ROTATED}`);
      await admin.client("KILL", "USER", USER);
      for (const proc of [service, worker]) {
        await waitFor(() => proc.output().includes(`"msg":"sentinel 127.0.0.1:${sentinel.port} refused the password in LAUREL_REDIS_SENTINEL_PASSWORD_FILE (WRONGPASS)`), "the sentinel's refusal to be said", proc.exited, proc.output);
      }
      writeFileSync(`${file}.new`, `${SENTINEL_FILE_ROTATED}\n`);
      renameSync(`${file}.new`, file);
      await waitFor(async () => (await lesson()).status === 201, "events served with the rotated password", service.exited, service.output);
      await waitFor(() => worker!.output().includes("read the new sentinels' password"), "the worker to read the rotated password", worker.exited, worker.output);
    } finally {
      if (service) await stop(service);
      if (worker) await stop(worker);
    }
    try {
      // Starts refused: a password the sentinel refuses (waited for within LAUREL_REDIS_WAIT, the
      // file read again at each refusal; check-config's check of it, within its own 5 s), a file of several lines.
      const wrong = join(dir, "sentinel-password", "wrong");
      writeFileSync(wrong, `${SENTINEL_FILE_WRONG}\n`);
      const lines = join(dir, "sentinel-password", "lines");
      writeFileSync(lines, `${SENTINEL_FILE_PASS}\n${SENTINEL_FILE_ROTATED}\n`);
      const refusal = `Sentinel at 127.0.0.1:${sentinel.port} refused the password in LAUREL_REDIS_SENTINEL_PASSWORD_FILE (WRONGPASS); check it`;
      await expectRefused([
        { p: runService({ ...env, LAUREL_REDIS_SENTINEL_PASSWORD_FILE: wrong, LAUREL_REDIS_WAIT: "10", PORT: "0" }), says: `${refusal} (still refused after 10 s` },
        { p: runService({ ...env, LAUREL_REDIS_SENTINEL_PASSWORD_FILE: wrong, LAUREL_REDIS_WAIT: "10" }, WORKER), says: `${refusal} (still refused after 10 s` },
        { p: runService({ ...env, LAUREL_REDIS_SENTINEL_PASSWORD_FILE: wrong }, CHECK_CONFIG), says: `cannot check the stored data: ${refusal}` },
        { p: runService({ ...env, LAUREL_REDIS_SENTINEL_PASSWORD_FILE: lines, PORT: "0" }), says: `LAUREL_REDIS_SENTINEL_PASSWORD_FILE (${lines}) holds more than one line` },
        { p: runService({ ...env, LAUREL_REDIS_SENTINEL_PASSWORD_FILE: lines }, CHECK_CONFIG), says: `LAUREL_REDIS_SENTINEL_PASSWORD_FILE (${lines}) holds more than one line` },
      ]);
    } finally {
      asSentinel.disconnect();
      await sentinel.stop();
    }
    expect({ service: leakingLines(service!.output()), worker: leakingLines(worker!.output()) }).toEqual({ service: [], worker: [] });
  });

  it("with an encrypted TLS key: a start with its passphrase (Redis not there), one with a wrong passphrase, and check-config's", async () => {
    const tlsDir = join(dir, "tls");
    mkdirSync(tlsDir);
    const made = makeTlsCertificates(tlsDir);
    const key = join(tlsDir, "encrypted.key");
    writeFileSync(key, createPrivateKey(readFileSync(made.client.key)).export({ type: "pkcs8", format: "pem", cipher: "aes-256-cbc", passphrase: PASSPHRASE }));
    const right = join(tlsDir, "passphrase");
    writeFileSync(right, `${PASSPHRASE}\n`);
    const wrong = join(tlsDir, "wrong-passphrase");
    writeFileSync(wrong, `${PASSPHRASE_WRONG}\n`);
    const closed = await portOutsideEphemeralRange();
    const env = { REDIS_URL: `rediss://127.0.0.1:${closed}`, LAUREL_REDIS_TLS_CERT: made.client.cert, LAUREL_REDIS_TLS_KEY: key, LAUREL_CONFIG: config, LAUREL_REDIS_WAIT: "1" };
    const decrypts = `LAUREL_REDIS_TLS_KEY (${key}) cannot be decrypted with the passphrase in LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE (${wrong})`;
    const runs = [
      { p: runService({ ...env, LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE: right, PORT: "0" }), says: `Redis at 127.0.0.1:${closed} is not reachable` },
      { p: runService({ ...env, LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE: right }, WORKER), says: `Redis at 127.0.0.1:${closed} is not reachable` },
      { p: runService({ ...env, LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE: wrong, PORT: "0" }), says: decrypts },
      { p: runService({ ...env, LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE: wrong }, WORKER), says: decrypts },
      { p: runService({ ...env, LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE: wrong }, CHECK_CONFIG), says: decrypts },
    ];
    await expectRefused(runs);
  });

  it("through a sentinel with a password: a start, and one with the sentinel's password wrong", async () => {
    const sentinel = await startTestSentinel(port);
    const asSentinel = new Redis(sentinel.port, "127.0.0.1");
    try {
      // The sentinel reaches the primary as the service's user, and asks its own clients for a password.
      await asSentinel.call("SENTINEL", "SET", "mymaster", "auth-user", USER, "auth-pass", PASS);
      await asSentinel.call("ACL", "SETUSER", "default", "resetpass", `>${SENTINEL_PASS}`);
      const env = { REDIS_URL: `redis://${USER}:${PASS}@ignored:1`, REDIS_SENTINELS: `127.0.0.1:${sentinel.port}`, LAUREL_CONFIG: config };
      const right = runService({ ...env, REDIS_SENTINEL_PASSWORD: SENTINEL_PASS, PORT: String(await portOutsideEphemeralRange()), LAUREL_WORKER: "off" });
      // The sentinel refuses the first question, in milliseconds: the bound is waited out, not raced.
      const wrong = runService({ ...env, REDIS_SENTINEL_PASSWORD: SENTINEL_WRONG, PORT: "0", LAUREL_REDIS_WAIT: "10" });
      await waitFor(() => right.output().includes("laurel listening"), "the service to listen through the sentinel", right.exited, right.output);
      await stop(right);
      expect(await wrong.exited).toBe(1);
      expect({ right: leakingLines(right.output()), wrong: leakingLines(wrong.output()) }).toEqual({ right: [], wrong: [] });
      expect(wrong.output()).toContain(`via sentinels 127.0.0.1:${sentinel.port} is not reachable`);
      // The refusal named, where ioredis says only "All sentinels are unreachable".
      expect(wrong.output()).toContain(`; Sentinel at 127.0.0.1:${sentinel.port} refused the password in REDIS_SENTINEL_PASSWORD (WRONGPASS); check it"`);
    } finally {
      asSentinel.disconnect();
      await sentinel.stop();
    }
  });

  it("npm run check-config with the URL: the data readable, a wrong password, a bad TLS key, a URL that does not parse", async () => {
    const keyFile = join(dir, "client.key");
    writeFileSync(keyFile, `-----BEGIN PRIVATE KEY-----\n${TLS_KEY_TEXT}\n-----END PRIVATE KEY-----\n`);
    const cases: Array<{ env: Record<string, string>; code: number; says: string }> = [
      { env: { REDIS_URL: url }, code: 0, says: `the data in Redis at 127.0.0.1:${port} can be read with it` },
      { env: { REDIS_URL: `redis://${USER}:${WRONG_PASS}@127.0.0.1:${port}` }, code: 1, says: `cannot check the stored data: Redis at 127.0.0.1:${port} refused the credentials in REDIS_URL (WRONGPASS)` },
      { env: { REDIS_URL: `rediss://${USER}:${PASS}@127.0.0.1:${port}`, LAUREL_REDIS_TLS_CERT: keyFile, LAUREL_REDIS_TLS_KEY: keyFile }, code: 1, says: "invalid environment" },
      { env: { REDIS_URL: `redis://${USER}:${PASS}@127.0.0.1:99999` }, code: 1, says: "REDIS_URL cannot be read (Invalid URL;" },
      { env: { REDIS_URL: `valkey://${USER}:${PASS}@127.0.0.1:${port}` }, code: 1, says: "REDIS_URL is not a redis:// or rediss:// URL" },
    ];
    const runs = cases.map((c) => ({ ...c, p: runService({ ...c.env, LAUREL_CONFIG: config }, CHECK_CONFIG) }));
    for (const { p, code, says } of runs) {
      expect(await p.exited).toBe(code);
      expect(leakingLines(p.output())).toEqual([]);
      expect(p.output()).toContain(says);
    }
  });

  it("a tenant file refused: a key too short, a secret too short, shown by their length only", async () => {
    const bad = join(dir, "bad.yaml");
    // An 8-character minimum: a 7-character key and a 15-character secret are refused.
    const shortKey = "Kx7-abc";
    const shortSecret = "whs-short-Lp4q1";
    writeFileSync(bad, `tenants:\n  - id: bad\n    apiKeys: [${shortKey}]\n    adminKeys: [${ADMIN_KEY}]\n    metrics: [{ key: lessons, name: Lessons }]\n    webhooks:\n      - { key: main, url: "${receiver.url}", secret: "${shortSecret}", events: [points.changed] }\n`);
    for (const p of [runService({ LAUREL_CONFIG: bad, PORT: "0" }), runService({}, CHECK_CONFIG, { args: [bad] })]) {
      expect(await p.exited).toBe(1);
      expect(p.output()).toContain("not shown: a credential");
      expect(p.output()).not.toContain(shortKey);
      expect(p.output()).not.toContain(shortSecret);
      expect(leakingLines(p.output())).toEqual([]);
    }
  });

  it("a tenant file refused for a webhook URL: its scheme and host shown, not its userinfo, path or query", async () => {
    const tail = `services/${PATH_TOKEN}?token=${URL_TOKEN}`;
    const urls: Array<[url: string, says: string]> = [
      // The schema's pattern (one slash), WHATWG's parse (an unclosed IPv6 bracket), the host not right after the //.
      [`https:/hookuser:${HOOK_PASS}@example.com/${tail}`, "https:/<userinfo not shown>@example.com"],
      [`http://hookuser:${HOOK_PASS}@[::1/${tail}`, "http://<userinfo not shown>@[::1"],
      [`http:///hookuser:${HOOK_PASS}@example.com/${tail}`, "http:///<userinfo not shown>@example.com"],
    ];
    const runs = urls.flatMap(([url, says], i) => {
      const file = join(dir, `bad-url-${i}.yaml`);
      writeFileSync(file, `tenants:\n  - id: bad\n    apiKeys: [${API_KEY}]\n    adminKeys: [${ADMIN_KEY}]\n    metrics: [{ key: lessons, name: Lessons }]\n    webhooks:\n      - { key: main, url: "${url}", secret: "${WEBHOOK_SECRET}", events: [points.changed] }\n`);
      return [runService({ LAUREL_CONFIG: file, PORT: "0" }), runService({}, CHECK_CONFIG, { args: [file] })].map((p) => ({ p, says }));
    });
    for (const { p, says } of runs) {
      expect(await p.exited).toBe(1);
      expect(p.output()).toContain(".webhooks[0].url: ");
      expect(p.output()).toContain(says);
      expect(p.output()).toContain("characters not shown (a path or query may hold a credential)");
      expect(leakingLines(p.output())).toEqual([]);
    }
  });

  it("a tenant file that is not YAML or JSON: where the fault is, not the lines around it", async () => {
    const files: Array<[name: string, text: string, says: string]> = [
      // The keys on the lines yaml quotes around the fault (an unclosed quote, a bad indentation).
      ["quote.yaml", `tenants:\n  - id: bad\n    apiKeys: [${API_KEY}, "${WEBHOOK_SECRET}\n    adminKeys: [${ADMIN_KEY}]\n`, "quote at line 5, column 1"],
      ["indent.yaml", `tenants:\n  - id: bad\n    apiKeys: [${API_KEY}]\n      adminKeys: [${ADMIN_KEY}]\n`, "is not valid YAML: All mapping items must start at the same column at line 4, column 1"],
      // V8 quotes the text around an unexpected token.
      ["bare.json", `{"tenants": [{"id": "bad", "apiKeys": [${SHORT_KEY}], "adminKeys": ["${ADMIN_KEY}"]}]}`, "' (the text around it not shown: it may hold a credential)"],
    ];
    const runs = files.flatMap(([name, text, says]) => {
      const file = join(dir, name);
      writeFileSync(file, text);
      return [runService({ LAUREL_CONFIG: file, PORT: "0" }), runService({}, CHECK_CONFIG, { args: [file] })].map((p) => ({ p, says }));
    });
    await expectRefused(runs);
  });
});
