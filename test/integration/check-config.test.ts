import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TenantKeys } from "../../src/store/keys.js";
import { portOutsideEphemeralRange } from "../helpers/ports.js";
import { startTestRedis } from "../helpers/redis-server.js";
import { runService } from "../helpers/service-process.js";
import { lessonsXpTenantYaml } from "../helpers/tenant-yaml.js";
import { startTlsRedis, type TlsRedis } from "../helpers/tls-redis.js";

/**
 * `node dist/check-config.js [file]`: a tenant file checked as a start checks it, without
 * starting anything; with REDIS_URL, against the settings the stored data is laid out by, reading
 * only (README: The tenant file, Checking a file before a deploy).
 */
const CHECK = new URL("../../dist/check-config.js", import.meta.url).pathname;
const DEMO = new URL("../../config/demo.yaml", import.meta.url).pathname;

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "laurel-check-config-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the check with `file` as its argument (or none), the test's `env` over this process's (no LAUREL_CONFIG). */
async function runCheck(file: string | null, env: Record<string, string> = {}): Promise<{ code: number | null; output: string }> {
  const proc = runService({ LAUREL_CONFIG: "", ...env }, CHECK, { args: file === null ? [] : [file] });
  return { code: await proc.exited, output: proc.output() };
}

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe("node dist/check-config.js", () => {
  it("passes the demo file (LAUREL_CONFIG's default), saying what each tenant holds", async () => {
    const { code, output } = await runCheck(null);
    expect(code).toBe(0);
    expect(output).toContain("tenant demo: 2 metrics, 3 points systems, 5 achievements, a daily streak, 2 leaderboards, 0 webhook endpoints, 16 shards");
    expect(output).toContain(`configuration ok: ${DEMO}`);
  });

  it("refuses a bad file with the start's message, every bad field named, exit 1", async () => {
    const bad = file("bad.yaml", lessonsXpTenantYaml("bad").replace("threshold: 1", "threshold: -1").replace("name: XP", "name: ''"));
    const { code, output } = await runCheck(bad);
    expect(code).toBe(1);
    expect(output).toContain(`invalid configuration ${bad}: $input.tenants[0].points[0].name`);
    expect(output).toContain("$input.tenants[0].points[0].triggers[0].threshold: expected number & ExclusiveMinimum<0>, got -1");
    expect(output).not.toContain("configuration ok");
  });

  it("refuses an endpoint's secrets listing one secret twice, naming the place, never the secret, exit 1", async () => {
    const secret = "a-plain-secret-listed-twice";
    const hook = `    webhooks:\n      - { key: w, url: "https://x.example/h", secrets: ["${secret}", "${secret}"], events: [points.changed] }\n`;
    const twice = file("twice.yaml", lessonsXpTenantYaml("twice", 1, hook));
    const { code, output } = await runCheck(twice);
    expect(code).toBe(1);
    expect(output).toContain(`invalid configuration ${twice}: $input.tenants[0].webhooks[0].secrets[1]: the same secret as $input.tenants[0].webhooks[0].secrets[0]`);
    expect(output).not.toContain(secret);
  });

  it("refuses the environment the service's start would refuse, every bad variable named", async () => {
    const { code, output } = await runCheck(DEMO, { LAUREL_CLOCK: "manul", LAUREL_READ_TIMEOUT: "2s", PORT: "70000" });
    expect(code).toBe(1);
    expect(output).toContain("invalid environment: PORT must be an integer from 0 to 65535");
    expect(output).toContain('LAUREL_CLOCK must be manual or system (got "manul")');
    expect(output).toContain("LAUREL_READ_TIMEOUT must be a number of seconds");
    expect(output).not.toContain("configuration ok");
  });

  it("refuses LAUREL_REDIS_TLS_* files the start would refuse, naming the variable and the path", async () => {
    const missing = join(dir, "ca.pem");
    const { code, output } = await runCheck(DEMO, { REDIS_URL: "rediss://127.0.0.1:1", LAUREL_REDIS_TLS_CA: missing, LAUREL_REDIS_TLS_KEY: DEMO });
    expect(code).toBe(1);
    expect(output).toContain(`invalid environment: LAUREL_REDIS_TLS_KEY is set without LAUREL_REDIS_TLS_CERT (the client certificate); LAUREL_REDIS_TLS_CA names a file that cannot be read: ${missing} (ENOENT); LAUREL_REDIS_TLS_KEY (${DEMO}) is not a PEM file holding a private key (BEGIN PRIVATE KEY`);
    expect(output).not.toContain("configuration ok");
  });

  it("refuses the demo keys under NODE_ENV=production, as the start does", async () => {
    const { code, output } = await runCheck(DEMO, { NODE_ENV: "production" });
    expect(code).toBe(1);
    expect(output).toContain("the demo keys are refused when NODE_ENV=production");
  });

  describe("with REDIS_URL", () => {
    let server: Awaited<ReturnType<typeof startTestRedis>>;
    let redis: Redis;
    beforeAll(async () => {
      server = await startTestRedis();
      redis = new Redis(server.url);
      // Tenant "kept" has data laid out in 1 shard: its record, and a user counted on shard 0.
      const keys = new TenantKeys("kept");
      await redis.hset(keys.fixed(), "shards", "1");
      await redis.hset(keys.agg(0), "users", "1");
    });
    afterAll(async () => {
      redis?.disconnect();
      await server?.stop();
    });

    const snapshot = async () => {
      const keys = (await redis.keys("*")).sort();
      const fixed = await redis.hgetall(new TenantKeys("kept").fixed());
      return { keys, fixed, functions: await redis.call("FUNCTION", "LIST") };
    };

    it("says what a start would refuse: a setting the stored data cannot be read with; writes nothing", async () => {
      const before = await snapshot();
      const changed = file("changed.yaml", lessonsXpTenantYaml("kept", 2));
      const { code, output } = await runCheck(changed, { REDIS_URL: server.url });
      expect(code).toBe(1);
      expect(output).toContain(`invalid configuration ${changed} for the data in Redis at`);
      expect(output).toContain("$input.tenants[0].shards: is 2, but tenant kept has data stored with 1, which cannot be read with another value; keep 1, or start the tenant afresh under a new id");
      expect(await snapshot()).toEqual(before);
    });

    it("passes a file the data can be read with, a new tenant beside it included, and writes nothing (a start would record the new tenant's settings)", async () => {
      const before = await snapshot();
      const both = file("both.yaml", lessonsXpTenantYaml("kept", 1) + lessonsXpTenantYaml("fresh", 4).replace(/^tenants:\n/, "").replace("[demo-key]", "[fresh-key-0001]").replace("[demo-admin-key]", "[fresh-admin-0001]"));
      const { code, output } = await runCheck(both, { REDIS_URL: server.url });
      expect(output).toContain("tenant fresh:");
      expect(output).toContain("can be read with it");
      expect(code).toBe(0);
      expect(await snapshot()).toEqual(before);
    });

    it("exits 2 when Redis does not answer", async () => {
      const { code, output } = await runCheck(file("ok.yaml", lessonsXpTenantYaml("kept", 1)), { REDIS_URL: "redis://127.0.0.1:1" });
      expect(code).toBe(2);
      expect(output).toContain("cannot check the stored data: Redis at 127.0.0.1:1 did not answer");
    });
  });

  /**
   * What the service's start stops at once for (src/store/redis-first-connection.ts), check-config
   * says with the start's own line, exit 1: each case run through both, at once, on the same
   * environment. One TLS Redis asking for client certificates serves the certificate cases, one
   * with an expired certificate the expired one, one plain Redis with a password the credentials.
   */
  describe("on a Redis the start stops at once for: the start's line, exit 1", () => {
    let mtls: TlsRedis;
    let expired: TlsRedis;
    let locked: Awaited<ReturnType<typeof startTestRedis>>;
    beforeAll(async () => {
      [mtls, expired, locked] = await Promise.all([startTlsRedis({ authClients: true }), startTlsRedis({ expired: true }), startTestRedis()]);
      const admin = new Redis(locked.url);
      try {
        // A user that may not run PING (the first connection's), as an ACL written for another service might leave it.
        await admin.call("ACL", "SETUSER", "noping", "on", ">pw", "~*", "&*", "+@all", "-ping");
        // And one that may not run INFO (the version check's; BullMQ's too).
        await admin.call("ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info");
        await admin.config("SET", "requirepass", "s3cret");
      } finally {
        admin.disconnect();
      }
    });
    afterAll(async () => {
      await Promise.all([mtls?.stop(), expired?.stop(), locked?.stop()]);
    });

    type GaveUp = { code: number | null; line: string | undefined };
    /** The check and the service's start, at once, on `env`: each one's exit code and the line it gave up with. */
    async function checkAndStart(env: Record<string, string>): Promise<{ check: Promise<GaveUp>; start: Promise<GaveUp> }> {
      const PREFIX = "cannot check the stored data: ";
      const check = runService({ LAUREL_CONFIG: "", ...env }, CHECK, { args: [DEMO] });
      const start = runService({ LAUREL_CONFIG: DEMO, LAUREL_WORKER: "off", LAUREL_REDIS_WAIT: "600", PORT: String(await portOutsideEphemeralRange()), ...env });
      return {
        check: check.exited.then((code) => ({ code, line: check.output().split("\n").find((line) => line.startsWith(PREFIX))?.slice(PREFIX.length) })),
        start: start.exited.then((code) => {
          const fatal = start.output().split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line) as { level: number; msg: string }).find((entry) => entry.level === 60);
          return { code, line: fatal?.msg };
        }),
      };
    }

    const cases: { name: string; env: () => Record<string, string>; line: () => string | RegExp }[] = [
      {
        name: "a server certificate from a CA not trusted",
        env: () => ({ REDIS_URL: mtls.url }),
        line: () => new RegExp(`^Redis at localhost:${mtls.port}: TLS certificate not accepted \\(SELF_SIGNED_CERT_IN_CHAIN: [^)]*\\); trust the server's CA with LAUREL_REDIS_TLS_CA=`),
      },
      {
        name: "a host name the server certificate does not carry",
        env: () => ({ REDIS_URL: `rediss://127.0.0.2:${mtls.port}`, LAUREL_REDIS_TLS_CA: mtls.caPath, LAUREL_REDIS_TLS_CERT: mtls.client.cert, LAUREL_REDIS_TLS_KEY: mtls.client.key }),
        line: () => new RegExp(`^Redis at 127\\.0\\.0\\.2:${mtls.port}: TLS certificate not accepted \\(ERR_TLS_CERT_ALTNAME_INVALID: [^)]*\\); .*check the host name in REDIS_URL against the certificate$`),
      },
      {
        name: "an expired server certificate",
        env: () => ({ REDIS_URL: expired.url, LAUREL_REDIS_TLS_CA: expired.caPath }),
        line: () => new RegExp(`^Redis at localhost:${expired.port}: TLS certificate not accepted \\(CERT_HAS_EXPIRED: `),
      },
      {
        name: "no client certificate where the server asks for one",
        env: () => ({ REDIS_URL: mtls.url, LAUREL_REDIS_TLS_CA: mtls.caPath }),
        line: () =>
          `Redis at localhost:${mtls.port} requires a TLS client certificate (ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE: its tls-auth-clients); set LAUREL_REDIS_TLS_CERT and LAUREL_REDIS_TLS_KEY to a certificate signed by a CA the server trusts (its tls-ca-cert-file) and its key`,
      },
      {
        name: "a client certificate from a CA the server does not trust",
        env: () => ({ REDIS_URL: mtls.url, LAUREL_REDIS_TLS_CA: mtls.caPath, LAUREL_REDIS_TLS_CERT: mtls.strangerClient.cert, LAUREL_REDIS_TLS_KEY: mtls.strangerClient.key }),
        line: () => `Redis at localhost:${mtls.port} refused the TLS client certificate in LAUREL_REDIS_TLS_CERT (ERR_SSL_TLSV1_ALERT_UNKNOWN_CA); give one signed by a CA the server trusts (its tls-ca-cert-file), not expired`,
      },
      {
        name: "no password where Redis asks for one (NOAUTH)",
        env: () => ({ REDIS_URL: locked.url }),
        line: () => `Redis at 127.0.0.1:${new URL(locked.url).port} refused the credentials in REDIS_URL (NOAUTH); check the user and password`,
      },
      {
        name: "a wrong password (WRONGPASS)",
        env: () => ({ REDIS_URL: locked.url.replace("redis://", "redis://:wrong@") }),
        line: () => `Redis at 127.0.0.1:${new URL(locked.url).port} refused the credentials in REDIS_URL (WRONGPASS); check the user and password`,
      },
      {
        name: "a user whose ACL forbids PING (NOPERM)",
        env: () => ({ REDIS_URL: locked.url.replace("redis://", "redis://noping:pw@") }),
        line: () => `Redis at 127.0.0.1:${new URL(locked.url).port} accepted the credentials in REDIS_URL, but its user may not run 'ping' (NOPERM, its ACL); allow it (README, Operations)`,
      },
      {
        name: "a user whose ACL forbids INFO (NOPERM)",
        env: () => ({ REDIS_URL: locked.url.replace("redis://", "redis://noinfo:pw@") }),
        line: () => `Redis at 127.0.0.1:${new URL(locked.url).port} accepted the credentials in REDIS_URL, but its user may not run 'info' (NOPERM, its ACL); allow it (README, Operations)`,
      },
    ];

    it.each(cases)("$name", async ({ env, line }) => {
      const both = await checkAndStart(env());
      // check-config first: one that misses the refusal exits 2 at once, where the start would wait
      // (LAUREL_REDIS_WAIT=600: its line must come at once, not after a wait); it is killed after the file.
      const check = await both.check;
      expect(check.line).toMatch(line());
      expect(check.code).toBe(1);
      const start = await both.start;
      expect(start.code).toBe(1);
      expect(start.line).toBe(check.line);
    });

    it("passes with the right password and the client certificate (what the refusals above were about, and nothing else)", async () => {
      const withPassword = await runCheck(DEMO, { REDIS_URL: locked.url.replace("redis://", "redis://:s3cret@") });
      expect(withPassword.code).toBe(0);
      const withCertificate = await runCheck(DEMO, { REDIS_URL: mtls.url, LAUREL_REDIS_TLS_CA: mtls.caPath, LAUREL_REDIS_TLS_CERT: mtls.client.cert, LAUREL_REDIS_TLS_KEY: mtls.client.key });
      expect(withCertificate.code).toBe(0);
    });

    it("names TLS as the suspect of a rediss:// URL on a port without TLS, as the start does, exit 2 (not answering)", async () => {
      const { port } = new URL(locked.url);
      const both = await checkAndStart({ REDIS_URL: `rediss://:s3cret@127.0.0.1:${port}`, LAUREL_REDIS_WAIT: "1" });
      const [check, start] = await Promise.all([both.check, both.start]);
      const advice = "; check REDIS_URL (a rediss:// URL: does that port speak TLS?)";
      expect(start.code).toBe(1);
      expect(start.line).toBe(`Redis at 127.0.0.1:${port} is not reachable (waited 1 s, LAUREL_REDIS_WAIT)${advice}`);
      // Its reason: the 5-s bound, or (a TLS client hello that happens to hold a newline, which
      // plain Redis answers as an inline command) a connection closed on a reply that is no TLS.
      expect(check.line).toMatch(new RegExp(`^Redis at 127\\.0\\.0\\.1:${port} did not answer \\([^)]*\\)`));
      expect(check.line?.endsWith(advice)).toBe(true);
      expect(check.code).toBe(2);
    });
  });
});
