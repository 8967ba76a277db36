import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TenantKeys } from "../../src/store/keys.js";
import { startTestRedis } from "../helpers/redis-server.js";
import { runService } from "../helpers/service-process.js";
import { lessonsXpTenantYaml } from "../helpers/tenant-yaml.js";

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
    expect(output).toContain(`invalid environment: LAUREL_REDIS_TLS_KEY is set without LAUREL_REDIS_TLS_CERT (the client certificate); LAUREL_REDIS_TLS_CA names a file that cannot be read: ${missing} (ENOENT); LAUREL_REDIS_TLS_KEY (${DEMO}) is not a PEM file holding an unencrypted private key`);
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
});
