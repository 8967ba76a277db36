import { spawnSync } from "node:child_process";
import { createPrivateKey, X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkEnvironmentOrExit, envMilliseconds, environmentProblems, listenPort, workerPort } from "../../src/boot.js";
import { MAX_AWARD_ID_SLOTS } from "../../src/domain/award-ids.js";
import { sentinelOptions, sentinelPasswordSetting } from "../../src/store/redis-sentinel.js";
import { firstEnd } from "../../src/store/redis-tls.js";
import { makeTlsCertificates, type TlsCertificates } from "../helpers/tls-redis.js";

// boot.ts checkEnvironmentOrExit: the refusals are tested on the built service (startup.test.ts,
// "refuses a switch set to a value it does not take"); here, the values at the edge of what it
// takes, which must start. A refusal would call process.exit, which vitest reports as a failure.
describe("the environment check", () => {
  const check = (env: NodeJS.ProcessEnv) => {
    const lines: unknown[] = [];
    checkEnvironmentOrExit(pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) }), env, { port: true });
    return lines;
  };

  it("takes every value at the edge of what it accepts, and says nothing", () => {
    const edges: NodeJS.ProcessEnv[] = [
      { PORT: "65535", LAUREL_WORKER_PORT: "65535", LAUREL_REDIS_WAIT: "0.5", LAUREL_DRAIN: "0", LAUREL_AWARD_IDS: String(MAX_AWARD_ID_SLOTS), LOG_LEVEL: "silent" },
      { PORT: "0", LAUREL_WORKER_PORT: "0", LAUREL_REDIS_WAIT: "0", LAUREL_DRAIN: "2.5", LAUREL_AWARD_IDS: "0", LOG_LEVEL: "trace" },
      { LAUREL_AWARD_IDS: "1", LOG_LEVEL: "fatal", LAUREL_HEALTH_TIMEOUT: "0.001" },
      { LAUREL_HEALTH_TIMEOUT: "3600" },
      { LAUREL_HEALTH_TIMEOUT: "3600.000" },
      { LAUREL_REDIS_WAIT: "86400", LAUREL_DRAIN: "86400.0", LAUREL_READ_TIMEOUT: "86400", LAUREL_RESEND_WAIT: "86400" },
      { LAUREL_RESEND_WAIT: "0" },
      // Each switch's values, both of them.
      { LAUREL_CLOCK: "manual", LAUREL_WORKER: "on", LAUREL_DELIVERIES: "on", LAUREL_COALESCE: "on", LAUREL_LUA: "function", LAUREL_AUTOPIPELINE: "0", LAUREL_REUSE_PORT: "0", LAUREL_FSYNC: "everysec" },
      { LAUREL_CLOCK: "system", LAUREL_WORKER: "off", LAUREL_DELIVERIES: "off", LAUREL_COALESCE: "off", LAUREL_LUA: "eval", LAUREL_AUTOPIPELINE: "1", LAUREL_REUSE_PORT: "1", LAUREL_FSYNC: "always" },
      // Empty is unset (a compose file's ${VAR} of an unset variable).
      { PORT: "", LAUREL_WORKER_PORT: "", LOG_LEVEL: "", LAUREL_CLOCK: "", LAUREL_REDIS_WAIT: "", LAUREL_DRAIN: "", LAUREL_AWARD_IDS: "", LAUREL_HEALTH_TIMEOUT: "" },
    ];
    for (const env of edges) expect(check(env), JSON.stringify(env)).toEqual([]);
  });

  it("listens on the port given, 65535 and 0 (any free port) included, and on 3000 when PORT is unset", () => {
    expect(listenPort("65535")).toBe(65535);
    expect(listenPort("0")).toBe(0);
    const saved = process.env.PORT;
    try {
      delete process.env.PORT;
      expect(listenPort()).toBe(3000);
      process.env.PORT = "";
      expect(listenPort()).toBe(3000);
    } finally {
      if (saved === undefined) delete process.env.PORT;
      else process.env.PORT = saved;
    }
  });
});

describe("REDIS_URL", () => {
  const PASS = "Url-Pass-Q7v2";
  it("refuses another scheme, which ioredis would read as a socket path, password and all, without showing it", () => {
    // Each was read as the socket path "//:<password>@host:port" (or "/:<password>@..."), which the
    // start's "waiting for Redis at ..." and check-config's "Redis at ... did not answer" printed.
    for (const url of [`http://:${PASS}@127.0.0.1:6379`, `valkey://laurel:${PASS}@redis:6379`, `redis:/:${PASS}@redis:6379`, `redis//:${PASS}@redis:6379`, `unix://:${PASS}@/run/redis.sock`]) {
      const problems = environmentProblems({ REDIS_URL: url });
      expect(problems.join("\n"), url).toContain("REDIS_URL is not a redis:// or rediss:// URL");
      expect(problems.join("\n"), url).not.toContain(PASS);
    }
  });

  it("does not quote a *_FILE or TLS value that names no file and is not written as a path (the secret pasted in its place)", () => {
    const pasted = "Pasted-Secret-w8K";
    const envs: NodeJS.ProcessEnv[] = [
      { REDIS_URL: "redis://127.0.0.1:6379", LAUREL_REDIS_PASSWORD_FILE: pasted },
      { REDIS_SENTINELS: "127.0.0.1:26379", LAUREL_REDIS_SENTINEL_PASSWORD_FILE: pasted },
      { REDIS_URL: "rediss://127.0.0.1:6379", LAUREL_REDIS_TLS_CERT: `-----BEGIN CERTIFICATE-----\n${pasted}`, LAUREL_REDIS_TLS_KEY: `-----BEGIN PRIVATE KEY-----\n${pasted}` },
    ];
    for (const env of envs) {
      const problems = environmentProblems(env).join("\n");
      expect(problems, JSON.stringify(env)).toContain("names a file that cannot be read: a value of");
      expect(problems, JSON.stringify(env)).not.toContain(pasted);
    }
    // A path is quoted, relative ones written from ./ or ../ too.
    for (const path of ["/nonexistent/laurel-pw", "./nonexistent-laurel-pw", "../nonexistent-laurel-pw"]) {
      expect(environmentProblems({ REDIS_URL: "redis://127.0.0.1:6379", LAUREL_REDIS_PASSWORD_FILE: path })).toEqual([`LAUREL_REDIS_PASSWORD_FILE names a file that cannot be read: ${path} (ENOENT)`]);
    }
  });

  it("takes redis:// and rediss:// (any case), a socket's path and unix:///path", () => {
    for (const url of [`redis://:${PASS}@127.0.0.1:6379/2`, `REDIS://u:${PASS}@h:1`, "redis://h", "/run/redis/redis.sock", "/run/redis/redis.sock?db=3", "unix:///run/redis/redis.sock", "127.0.0.1:6379"]) {
      expect(environmentProblems({ REDIS_URL: url }), url).toEqual([]);
    }
  });
});

describe("LAUREL_HEALTH_TIMEOUT (/healthz's and /metrics's bound on Redis)", () => {
  it("is read in seconds, as the other timeouts are", () => {
    expect(envMilliseconds("LAUREL_HEALTH_TIMEOUT", { LAUREL_HEALTH_TIMEOUT: "0.25" })).toBe(250);
    expect(envMilliseconds("LAUREL_HEALTH_TIMEOUT", { LAUREL_HEALTH_TIMEOUT: "" })).toBeUndefined();
  });

  it("refuses 0, more than an hour, and anything not written as digits, named", () => {
    // 0 would answer every probe "down"; 9999999 s is past Node's timer range (fired at once).
    for (const bad of ["0", "0.0", "3600.001", "9999999", "1s", "-1", "1e3", " 1", "0x10", ".5"]) {
      expect(environmentProblems({ LAUREL_HEALTH_TIMEOUT: bad }), bad).toEqual([`LAUREL_HEALTH_TIMEOUT must be a number of seconds above 0 and up to 3600, in digits (got ${JSON.stringify(bad)})`]);
    }
  });
});

describe("LAUREL_REDIS_WAIT, LAUREL_DRAIN, LAUREL_READ_TIMEOUT and LAUREL_RESEND_WAIT", () => {
  it("refuse more than a day (past 2^31 ms Node's timers fire at once) and anything not written as digits, named", () => {
    for (const name of ["LAUREL_REDIS_WAIT", "LAUREL_DRAIN", "LAUREL_READ_TIMEOUT", "LAUREL_RESEND_WAIT"]) {
      for (const bad of ["86400.001", "9999999", "1s", "-1", "1e3", " 1", ".5"]) {
        expect(environmentProblems({ [name]: bad }), `${name}=${bad}`).toEqual([`${name} must be a number of seconds from 0 to 86400, in digits (got ${JSON.stringify(bad)})`]);
      }
    }
  });
});

describe("LAUREL_WORKER_PORT (dist/worker.js's /healthz and /metrics)", () => {
  it("is a port from 0 to 65535, or none when unset or empty", () => {
    expect(workerPort({ LAUREL_WORKER_PORT: "9464" })).toBe(9464);
    expect(workerPort({ LAUREL_WORKER_PORT: "0" })).toBe(0);
    expect(workerPort({})).toBeNull();
    expect(workerPort({ LAUREL_WORKER_PORT: "" })).toBeNull();
  });

  it("refuses anything else, named, in the worker's check and the service's alike", () => {
    for (const bad of ["70000", "9464x", "-1", " 9464"]) {
      const message = `LAUREL_WORKER_PORT must be an integer from 0 to 65535 (got ${JSON.stringify(bad)})`;
      expect(environmentProblems({ LAUREL_WORKER_PORT: bad })).toEqual([message]);
      expect(environmentProblems({ LAUREL_WORKER_PORT: bad }, { port: true })).toEqual([message]);
    }
  });
});

// redis-tls.ts redisTlsProblems, through environmentProblems (the start's check and npm run
// check-config's): real PEM files made by openssl (test/helpers/tls-redis.ts).
describe("the LAUREL_REDIS_TLS_* files", () => {
  let dir: string;
  let made: TlsCertificates;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "laurel-tls-env-"));
    made = makeTlsCertificates(dir);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const url = "rediss://redis.example:6380";
  const client = (): NodeJS.ProcessEnv => ({ LAUREL_REDIS_TLS_CERT: made.client.cert, LAUREL_REDIS_TLS_KEY: made.client.key });

  it("gives a PEM file's end as its certificate's, a bundle's as its first to end (laurel_redis_tls_not_after_seconds)", () => {
    // A certificate that ends a day before the CA made above (two days).
    const made1 = spawnSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", join(dir, "short.key"), "-out", join(dir, "short.pem"), "-days", "1", "-subj", "/CN=short"]);
    expect(made1.status).toBe(0);
    const ca = readFileSync(made.caPath);
    const short = readFileSync(join(dir, "short.pem"));
    const end = (pem: Buffer) => Date.parse(new X509Certificate(pem).validTo) / 1000;
    expect(end(ca) - end(short)).toBeGreaterThan(86_000);
    expect(firstEnd(ca)).toBe(end(ca));
    expect(firstEnd(Buffer.concat([ca, short]))).toBe(end(short));
    expect(firstEnd(Buffer.concat([short, ca]))).toBe(end(short));
    expect(firstEnd(readFileSync(made.client.key))).toBeNaN();
  });

  it("takes a certificate with its key, and a CA, on a rediss:// URL (through sentinels too); empty is unset", () => {
    expect(environmentProblems({ REDIS_URL: url, ...client(), LAUREL_REDIS_TLS_CA: made.caPath })).toEqual([]);
    expect(environmentProblems({ REDIS_URL: url, LAUREL_REDIS_TLS_CA: made.caPath })).toEqual([]);
    expect(environmentProblems({ REDIS_URL: "rediss://:pw@sentinels/0", REDIS_SENTINELS: "127.0.0.1:26379", ...client() })).toEqual([]);
    expect(environmentProblems({ REDIS_URL: "redis://127.0.0.1:6379", LAUREL_REDIS_TLS_CERT: "", LAUREL_REDIS_TLS_KEY: "", LAUREL_REDIS_TLS_CA: "" })).toEqual([]);
  });

  it("refuses them without a rediss:// URL: a plain one, none (the embedded Redis), sentinels without one", () => {
    const plain = "LAUREL_REDIS_TLS_CERT, LAUREL_REDIS_TLS_KEY are set but REDIS_URL is not a rediss:// URL (the files are for TLS to Redis; with REDIS_SENTINELS too, a rediss:// REDIS_URL turns TLS on)";
    expect(environmentProblems({ REDIS_URL: "redis://127.0.0.1:6379", ...client() })).toEqual([plain]);
    expect(environmentProblems({ ...client() })).toEqual([plain]);
    expect(environmentProblems({ REDIS_SENTINELS: "127.0.0.1:26379", LAUREL_REDIS_TLS_CA: made.caPath })).toEqual([
      "LAUREL_REDIS_TLS_CA is set but REDIS_URL is not a rediss:// URL (the files are for TLS to Redis; with REDIS_SENTINELS too, a rediss:// REDIS_URL turns TLS on)",
    ]);
  });

  it("refuses a certificate without its key, and a key without its certificate", () => {
    expect(environmentProblems({ REDIS_URL: url, LAUREL_REDIS_TLS_CERT: made.client.cert })).toEqual(["LAUREL_REDIS_TLS_CERT is set without LAUREL_REDIS_TLS_KEY (the client certificate's private key)"]);
    expect(environmentProblems({ REDIS_URL: url, LAUREL_REDIS_TLS_KEY: made.client.key })).toEqual(["LAUREL_REDIS_TLS_KEY is set without LAUREL_REDIS_TLS_CERT (the client certificate)"]);
  });

  it("names the variable and the path of a file it cannot read, or that holds no PEM of its kind, never the key's contents", () => {
    const missing = join(dir, "nowhere.pem");
    expect(environmentProblems({ REDIS_URL: url, LAUREL_REDIS_TLS_CA: missing })).toEqual([`LAUREL_REDIS_TLS_CA names a file that cannot be read: ${missing} (ENOENT)`]);
    expect(environmentProblems({ REDIS_URL: url, LAUREL_REDIS_TLS_CERT: dir, LAUREL_REDIS_TLS_KEY: made.client.key })).toEqual([`LAUREL_REDIS_TLS_CERT names a file that cannot be read: ${dir} (EISDIR)`]);
    const text = join(dir, "text.pem");
    writeFileSync(text, "not a certificate\n");
    // The key and the certificate swapped: each named, and the key's lines in no message.
    const swapped = environmentProblems({ REDIS_URL: url, LAUREL_REDIS_TLS_CERT: made.client.key, LAUREL_REDIS_TLS_KEY: made.client.cert, LAUREL_REDIS_TLS_CA: text });
    expect(swapped).toEqual([
      `LAUREL_REDIS_TLS_CERT (${made.client.key}) is not a PEM file holding a certificate (BEGIN CERTIFICATE)`,
      `LAUREL_REDIS_TLS_CA (${text}) is not a PEM file holding a certificate (BEGIN CERTIFICATE)`,
      `LAUREL_REDIS_TLS_KEY (${made.client.cert}) is not a PEM file holding a private key (BEGIN PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY; BEGIN ENCRYPTED PRIVATE KEY with LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE)`,
    ]);
    const keyLines = readFileSync(made.client.key, "utf8").split("\n").filter((line) => line.length > 0 && !line.startsWith("-----"));
    for (const line of keyLines) expect(swapped.join("\n")).not.toContain(line);
  });

  it("refuses a key that is not the certificate's", () => {
    expect(environmentProblems({ REDIS_URL: url, LAUREL_REDIS_TLS_CERT: made.client.cert, LAUREL_REDIS_TLS_KEY: made.strangerClient.key })).toEqual([
      `LAUREL_REDIS_TLS_KEY (${made.strangerClient.key}) is not the private key of the certificate in LAUREL_REDIS_TLS_CERT (${made.client.cert})`,
    ]);
  });

  describe("an encrypted key and LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE", () => {
    const passphrase = "key-passphrase-Vd3xB7";
    /** The client key encrypted with `passphrase`, as PKCS#8 or as OpenSSL's traditional PEM (Proc-Type: 4,ENCRYPTED). */
    const encrypted = (type: "pkcs8" | "pkcs1"): string => {
      const path = join(dir, `encrypted-${type}.key`);
      writeFileSync(path, createPrivateKey(readFileSync(made.client.key)).export({ type, format: "pem", cipher: "aes-256-cbc", passphrase }));
      return path;
    };
    const secretFile = (name: string, text: string): string => {
      const path = join(dir, name);
      writeFileSync(path, text);
      return path;
    };

    it("takes an encrypted key, of either PEM kind, with its passphrase (a trailing newline is not part of it)", () => {
      const file = secretFile("passphrase", `${passphrase}\n`);
      for (const type of ["pkcs8", "pkcs1"] as const) {
        expect(environmentProblems({ REDIS_URL: url, LAUREL_REDIS_TLS_CERT: made.client.cert, LAUREL_REDIS_TLS_KEY: encrypted(type), LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE: file })).toEqual([]);
      }
      // A passphrase beside a key that is not encrypted does no harm.
      expect(environmentProblems({ REDIS_URL: url, ...client(), LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE: file })).toEqual([]);
    });

    it("refuses an encrypted key without its passphrase, or with a wrong one, naming both files, never the passphrase", () => {
      const key = encrypted("pkcs8");
      const env = { REDIS_URL: url, LAUREL_REDIS_TLS_CERT: made.client.cert, LAUREL_REDIS_TLS_KEY: key };
      expect(environmentProblems(env)).toEqual([`LAUREL_REDIS_TLS_KEY (${key}) is encrypted: give the path of a file holding its passphrase as LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE`]);
      const wrong = secretFile("wrong-passphrase", "wrong-passphrase-Ew4yC8\n");
      const problems = environmentProblems({ ...env, LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE: wrong });
      expect(problems).toEqual([`LAUREL_REDIS_TLS_KEY (${key}) cannot be decrypted with the passphrase in LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE (${wrong}): is it this key's passphrase (and the key whole)?`]);
      expect(problems.join("\n")).not.toContain("wrong-passphrase-Ew4yC8");
    });

    it("refuses a passphrase file that cannot be read, is empty or holds several lines, and one without a key or without TLS", () => {
      const key = encrypted("pkcs8");
      const env = { REDIS_URL: url, LAUREL_REDIS_TLS_CERT: made.client.cert, LAUREL_REDIS_TLS_KEY: key };
      const missing = join(dir, "no-passphrase");
      expect(environmentProblems({ ...env, LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE: missing })).toEqual([`LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE names a file that cannot be read: ${missing} (ENOENT)`]);
      const empty = secretFile("empty-passphrase", "\r\n");
      expect(environmentProblems({ ...env, LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE: empty })).toEqual([`LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE (${empty}) is empty`]);
      const lines = secretFile("lines-passphrase", `${passphrase}\nmore\n`);
      expect(environmentProblems({ ...env, LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE: lines })).toEqual([`LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE (${lines}) holds more than one line (it must hold the secret alone, on one line)`]);
      const file = secretFile("passphrase", `${passphrase}\n`);
      expect(environmentProblems({ REDIS_URL: url, LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE: file })).toEqual(["LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE is set without LAUREL_REDIS_TLS_KEY (the encrypted key it opens)"]);
      expect(environmentProblems({ REDIS_URL: "redis://127.0.0.1:6379", LAUREL_REDIS_TLS_CERT: made.client.cert, LAUREL_REDIS_TLS_KEY: key, LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE: file })).toEqual([
        "LAUREL_REDIS_TLS_CERT, LAUREL_REDIS_TLS_KEY, LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE are set but REDIS_URL is not a rediss:// URL (the files are for TLS to Redis; with REDIS_SENTINELS too, a rediss:// REDIS_URL turns TLS on)",
      ]);
    });
  });
});

// redis-password.ts redisPasswordProblems, through environmentProblems.
describe("LAUREL_REDIS_PASSWORD_FILE", () => {
  let dir: string;
  const password = "file-password-Fz5aD9";
  const file = (name: string, text: string): string => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "laurel-password-env-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("takes a file of one line, with a REDIS_URL without userinfo or with a user alone, or with sentinels; empty is unset", () => {
    for (const text of [password, `${password}\n`, `${password}\r\n`, ` ${password} with spaces \n`]) {
      const path = file("password", text);
      expect(environmentProblems({ REDIS_URL: "redis://127.0.0.1:6379", LAUREL_REDIS_PASSWORD_FILE: path })).toEqual([]);
      expect(environmentProblems({ REDIS_URL: "rediss://laurel@redis.example:6380/2", LAUREL_REDIS_PASSWORD_FILE: path })).toEqual([]);
      expect(environmentProblems({ REDIS_URL: "/run/redis/redis.sock", LAUREL_REDIS_PASSWORD_FILE: path })).toEqual([]);
      expect(environmentProblems({ REDIS_SENTINELS: "127.0.0.1:26379", LAUREL_REDIS_PASSWORD_FILE: path })).toEqual([]);
    }
    expect(environmentProblems({ REDIS_URL: "redis://:pw@127.0.0.1:6379", LAUREL_REDIS_PASSWORD_FILE: "" })).toEqual([]);
  });

  it("refuses a file that cannot be read, is empty or holds several lines, naming the variable and the path, never the contents", () => {
    const env = { REDIS_URL: "redis://127.0.0.1:6379" };
    const missing = join(dir, "missing");
    expect(environmentProblems({ ...env, LAUREL_REDIS_PASSWORD_FILE: missing })).toEqual([`LAUREL_REDIS_PASSWORD_FILE names a file that cannot be read: ${missing} (ENOENT)`]);
    expect(environmentProblems({ ...env, LAUREL_REDIS_PASSWORD_FILE: dir })).toEqual([`LAUREL_REDIS_PASSWORD_FILE names a file that cannot be read: ${dir} (EISDIR)`]);
    for (const text of ["", "\n", "\n\r\n"]) {
      const empty = file("empty", text);
      expect(environmentProblems({ ...env, LAUREL_REDIS_PASSWORD_FILE: empty })).toEqual([`LAUREL_REDIS_PASSWORD_FILE (${empty}) is empty`]);
    }
    const lines = file("lines", `REDIS_PASSWORD=${password}\nREDIS_HOST=redis\n`);
    const problems = environmentProblems({ ...env, LAUREL_REDIS_PASSWORD_FILE: lines });
    expect(problems).toEqual([`LAUREL_REDIS_PASSWORD_FILE (${lines}) holds more than one line (it must hold the secret alone, on one line)`]);
    expect(problems.join("\n")).not.toContain(password);
  });

  it("refuses it beside a password in REDIS_URL (which one would be sent?), and without a Redis to send it to", () => {
    const path = file("password", password);
    for (const url of ["redis://:url-pw@127.0.0.1:6379", "rediss://laurel:url-pw@redis.example:6380"]) {
      const problems = environmentProblems({ REDIS_URL: url, LAUREL_REDIS_PASSWORD_FILE: path });
      expect(problems).toEqual(["LAUREL_REDIS_PASSWORD_FILE is set and REDIS_URL holds a password too: give the password in one place (REDIS_URL may keep the user: redis://user@host:port)"]);
      expect(problems.join("\n")).not.toContain("url-pw");
    }
    expect(environmentProblems({ LAUREL_REDIS_PASSWORD_FILE: path })).toEqual([
      "LAUREL_REDIS_PASSWORD_FILE is set without REDIS_URL or REDIS_SENTINELS (it is the password of the Redis they lead to; the embedded Redis has none)",
    ]);
  });
});

// redis-sentinel.ts sentinelProblems, through environmentProblems; sentinelOptions for what a client is given.
describe("LAUREL_REDIS_SENTINEL_PASSWORD_FILE", () => {
  let dir: string;
  const password = "sentinel-file-password-Nt2aL6";
  const sentinels = "127.0.0.1:26379";
  const file = (name: string, text: string): string => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "laurel-sentinel-password-env-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("takes a file of one line with REDIS_SENTINELS, beside the data nodes' LAUREL_REDIS_PASSWORD_FILE too; empty is unset", () => {
    for (const text of [password, `${password}\n`, `${password}\r\n`]) {
      const path = file("password", text);
      expect(environmentProblems({ REDIS_SENTINELS: sentinels, LAUREL_REDIS_SENTINEL_PASSWORD_FILE: path })).toEqual([]);
      expect(environmentProblems({ REDIS_SENTINELS: sentinels, REDIS_URL: "redis://laurel@ignored:1", LAUREL_REDIS_SENTINEL_PASSWORD_FILE: path, LAUREL_REDIS_PASSWORD_FILE: path })).toEqual([]);
    }
    expect(environmentProblems({ REDIS_SENTINELS: sentinels, REDIS_SENTINEL_PASSWORD: "pw", LAUREL_REDIS_SENTINEL_PASSWORD_FILE: "" })).toEqual([]);
  });

  it("gives the client the file's password as one object the copies of its options share, printed as [REDACTED]", () => {
    const path = file("shared", `${password}\n`);
    const env = { REDIS_SENTINELS: sentinels, LAUREL_REDIS_SENTINEL_PASSWORD_FILE: path };
    const options = sentinelOptions(env);
    // The same object for every client of the process (the reload changes it for all of them).
    expect(sentinelOptions(env).sentinelPassword).toBe(options.sentinelPassword);
    expect(String(options.sentinelPassword)).toBe(password);
    expect(JSON.stringify(options)).not.toContain(password);
    expect(inspect(options)).not.toContain(password);
    expect(sentinelPasswordSetting(options)).toBe("LAUREL_REDIS_SENTINEL_PASSWORD_FILE");
    expect(sentinelPasswordSetting(sentinelOptions({ REDIS_SENTINELS: sentinels, REDIS_SENTINEL_PASSWORD: "pw" }))).toBe("REDIS_SENTINEL_PASSWORD");
    expect(sentinelPasswordSetting(sentinelOptions({ REDIS_SENTINELS: sentinels }))).toBeNull();
  });

  it("refuses a file that cannot be read, is empty or holds several lines, naming the variable and the path, never the contents", () => {
    const env = { REDIS_SENTINELS: sentinels };
    const missing = join(dir, "missing");
    expect(environmentProblems({ ...env, LAUREL_REDIS_SENTINEL_PASSWORD_FILE: missing })).toEqual([`LAUREL_REDIS_SENTINEL_PASSWORD_FILE names a file that cannot be read: ${missing} (ENOENT)`]);
    expect(environmentProblems({ ...env, LAUREL_REDIS_SENTINEL_PASSWORD_FILE: dir })).toEqual([`LAUREL_REDIS_SENTINEL_PASSWORD_FILE names a file that cannot be read: ${dir} (EISDIR)`]);
    for (const text of ["", "\n"]) {
      const empty = file("empty", text);
      expect(environmentProblems({ ...env, LAUREL_REDIS_SENTINEL_PASSWORD_FILE: empty })).toEqual([`LAUREL_REDIS_SENTINEL_PASSWORD_FILE (${empty}) is empty`]);
    }
    const lines = file("lines", `SENTINEL_PASSWORD=${password}\nSENTINEL_HOST=sentinel\n`);
    const problems = environmentProblems({ ...env, LAUREL_REDIS_SENTINEL_PASSWORD_FILE: lines });
    expect(problems).toEqual([`LAUREL_REDIS_SENTINEL_PASSWORD_FILE (${lines}) holds more than one line (it must hold the secret alone, on one line)`]);
    expect(problems.join("\n")).not.toContain(password);
  });

  it("refuses it beside REDIS_SENTINEL_PASSWORD (which one would be sent?), and without sentinels to send it to", () => {
    const path = file("password", password);
    const problems = environmentProblems({ REDIS_SENTINELS: sentinels, REDIS_SENTINEL_PASSWORD: "variable-pw", LAUREL_REDIS_SENTINEL_PASSWORD_FILE: path });
    expect(problems).toEqual(["LAUREL_REDIS_SENTINEL_PASSWORD_FILE is set and REDIS_SENTINEL_PASSWORD too: give the sentinels' password in one place"]);
    expect(problems.join("\n")).not.toContain("variable-pw");
    expect(environmentProblems({ REDIS_URL: "redis://127.0.0.1:6379", LAUREL_REDIS_SENTINEL_PASSWORD_FILE: path })).toEqual(["LAUREL_REDIS_SENTINEL_PASSWORD_FILE is set without REDIS_SENTINELS"]);
  });
});
