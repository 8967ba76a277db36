import { createPrivateKey } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { portOutsideEphemeralRange } from "../helpers/ports.js";
import { callService, runService, stopRunning, waitFor, WORKER, type ServiceProcess } from "../helpers/service-process.js";
import { lessonsXpTenantYaml } from "../helpers/tenant-yaml.js";
import { startTlsRedis, type TlsRedis } from "../helpers/tls-redis.js";

/**
 * An encrypted client key (README: Configuration, LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE; Operations,
 * Redis over TLS): the built service and dist/worker.js on a TLS-only redis-server that asks for
 * a client certificate (test/helpers/tls-redis.ts), the certificate's key encrypted with
 * node:crypto. With its passphrase's file the processes start and serve; a wrong passphrase, or
 * none, stops the start naming the files and never the passphrase; a key renewed with a new
 * passphrase is taken with it, not beside the old one.
 */

const PASSPHRASE = "key-passphrase-Gm6zE1";
const RENEWED = "renewed-passphrase-Hn7aF2";
const WRONG = "wrong-passphrase-Jo8bG3";

let mtls: TlsRedis;
let dir: string;
let config: string;
const running: ServiceProcess[] = [];

beforeAll(async () => {
  mtls = await startTlsRedis({ authClients: true });
  dir = mkdtempSync(join(tmpdir(), "laurel-tls-passphrase-"));
  config = join(dir, "tenant.yaml");
  writeFileSync(config, lessonsXpTenantYaml("passphrase"));
});

afterAll(async () => {
  await stopRunning(running);
  await mtls?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function start(env: Record<string, string>, entry?: string): ServiceProcess {
  const proc = runService({ LAUREL_CONFIG: config, ...env }, entry);
  running.push(proc);
  return proc;
}

/** The client certificate's key (or `keyPath`'s) encrypted with `passphrase` (PKCS#8, AES-256-CBC). */
const encryptedKey = (passphrase: string, keyPath = mtls.client.key): string =>
  createPrivateKey(readFileSync(keyPath)).export({ type: "pkcs8", format: "pem", cipher: "aes-256-cbc", passphrase }) as string;

/** Writes `text` at `path` as a renewal tool does: beside it, then renamed over it. */
function replace(path: string, text: string): void {
  writeFileSync(`${path}.new`, text);
  renameSync(`${path}.new`, path);
}

/** The files of a client whose key is encrypted with PASSPHRASE, in a directory of their own; `passphrase` is what its file holds. */
function clientFiles(name: string, passphrase: string): { env: Record<string, string>; key: string; passphraseFile: string } {
  const files = join(dir, name);
  mkdirSync(files);
  const key = join(files, "client.key");
  const passphraseFile = join(files, "passphrase");
  writeFileSync(key, encryptedKey(PASSPHRASE));
  writeFileSync(passphraseFile, `${passphrase}\n`);
  return {
    key,
    passphraseFile,
    env: { REDIS_URL: mtls.url, LAUREL_REDIS_TLS_CA: mtls.caPath, LAUREL_REDIS_TLS_CERT: mtls.client.cert, LAUREL_REDIS_TLS_KEY: key, LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE: passphraseFile },
  };
}

describe("an encrypted client key with LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE", () => {
  it("opens with its passphrase: the service serves over TLS; renewed with a new passphrase, the key is taken with it", async () => {
    const { env, key, passphraseFile } = clientFiles("right", PASSPHRASE);
    const port = await portOutsideEphemeralRange();
    const service = start({ ...env, PORT: String(port) });
    await waitFor(() => service.output().includes("laurel listening"), "the service to listen", service.exited, service.output);
    const lesson = async (user: string) => (await callService(port, "POST", "/v1/metrics/lessons/event", { user: { id: user }, value: 1 })).status;
    expect(await lesson("encrypted")).toBe(201);
    expect((await callService(port, "GET", "/v1/users/encrypted/points/xp")).body.total).toBe(10);

    const operator = new Redis({ host: "localhost", port: mtls.port, tls: { ca: readFileSync(mtls.caPath), cert: readFileSync(mtls.client.cert), key: readFileSync(mtls.client.key) }, maxRetriesPerRequest: 0 });
    try {
      // Half a renewal: the key encrypted with a new passphrase, beside the old passphrase. Not
      // taken, said once; the service's connections closed come back with the pair it has.
      replace(key, encryptedKey(RENEWED));
      await waitFor(() => service.output().includes("the Redis TLS files changed but cannot be used"), "the half renewal to be refused", service.exited, service.output);
      await operator.client("KILL", "TYPE", "normal", "SKIPME", "yes");
      expect(await lesson("half-renewed")).toBe(201);
      // The new passphrase: the pair taken, and every new connection opens the key with it (with
      // the old one, or the old key beside the new one, its TLS handshake would fail).
      replace(passphraseFile, `${RENEWED}\n`);
      await waitFor(() => service.output().includes("read the renewed Redis TLS files"), "the renewal to be read", service.exited, service.output);
      await operator.client("KILL", "TYPE", "normal", "SKIPME", "yes");
      expect(await lesson("renewed")).toBe(201);
    } finally {
      operator.disconnect();
    }
    service.child.kill("SIGTERM");
    expect(await service.exited).toBe(0);
    const lines = service.output().trim().split("\n").map((line) => JSON.parse(line) as { msg: string; problems?: string[] });
    expect(lines.filter((line) => line.msg.startsWith("the Redis TLS files changed but cannot be used"))).toEqual([
      expect.objectContaining({ problems: [`LAUREL_REDIS_TLS_KEY (${key}) cannot be decrypted with the passphrase in LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE (${passphraseFile}): is it this key's passphrase (and the key whole)?`] }),
    ]);
    for (const secret of [PASSPHRASE, RENEWED]) expect(service.output()).not.toContain(secret);
  });

  it("stops the service's and dist/worker.js's start on a wrong passphrase, or none, naming the files, never the passphrase", async () => {
    const wrong = clientFiles("wrong", WRONG);
    const { LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE: _none, ...without } = clientFiles("none", PASSPHRASE).env;
    const starts = [
      { env: wrong.env, says: `LAUREL_REDIS_TLS_KEY (${wrong.key}) cannot be decrypted with the passphrase in LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE (${wrong.passphraseFile})` },
      { env: without, says: `LAUREL_REDIS_TLS_KEY (${without.LAUREL_REDIS_TLS_KEY}) is encrypted: give the path of a file holding its passphrase as LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE` },
    ];
    const runs = starts.flatMap(({ env, says }) => [start({ ...env, PORT: "0" }), start(env, WORKER)].map((proc) => ({ proc, says })));
    for (const { proc, says } of runs) {
      expect(await proc.exited).toBe(1);
      expect(proc.output()).toContain(`invalid environment: ${says}`);
      for (const secret of [PASSPHRASE, WRONG]) expect(proc.output()).not.toContain(secret);
    }
  });

  it("names a certificate the server refuses as it does with a plain key (the start's question over TLS 1.2 opens the key too)", async () => {
    const { env, key } = clientFiles("stranger", PASSPHRASE);
    writeFileSync(key, encryptedKey(PASSPHRASE, mtls.strangerClient.key));
    const service = start({ ...env, LAUREL_REDIS_TLS_CERT: mtls.strangerClient.cert, PORT: "0" });
    expect(await service.exited).toBe(1);
    expect(JSON.parse(service.output().trim().split("\n").at(-1)!).msg).toBe(
      `Redis at localhost:${mtls.port} refused the TLS client certificate in LAUREL_REDIS_TLS_CERT (ERR_SSL_TLSV1_ALERT_UNKNOWN_CA); give one signed by a CA the server trusts (its tls-ca-cert-file), not expired`,
    );
    expect(service.output()).not.toContain(PASSPHRASE);
  });
});
