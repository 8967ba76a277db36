import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { freePort, setprivDeathSignal } from "../../src/embedded-redis.js";

export interface TlsRedis {
  /** `rediss://localhost:<port>`: the name the server's certificate carries (and 127.0.0.1). */
  url: string;
  port: number;
  /** The PEM of the CA that signed the server's certificate (for NODE_EXTRA_CA_CERTS). */
  caPath: string;
  /** The server's certificate and key, and the CA: for a sentinel over TLS beside it (redis-server.ts startTestSentinel). */
  files: TlsFiles;
  stop(): Promise<void>;
}

export interface TlsFiles {
  cert: string;
  key: string;
  ca: string;
}

export const OPENSSL_HINT = "openssl was not found on PATH: the TLS tests make their certificates with it (Debian/Ubuntu: sudo apt-get install -y openssl; .ci/run installs it)";

/**
 * A throwaway redis-server that speaks TLS only (`--port 0`: no plain listener, so nothing can
 * reach it around TLS), on a free port of 127.0.0.1, with a certificate for `localhost` and
 * 127.0.0.1 signed by a CA made for it (openssl, in a temporary directory removed at stop()).
 * It listens on 127.0.0.2 too (Linux routes all of 127.0.0.0/8 to loopback): an address the
 * certificate does not name, for a host name mismatch. Clients need not present a certificate.
 * Takes the death signal as the other test servers do (src/embedded-redis.ts).
 */
export async function startTlsRedis(): Promise<TlsRedis> {
  if (spawnSync("openssl", ["version"], { stdio: "ignore" }).error) throw new Error(OPENSSL_HINT);
  const dir = mkdtempSync(join(tmpdir(), "laurel-tls-"));
  const file = (name: string): string => join(dir, name);
  const openssl = (...args: string[]): void => {
    const run = spawnSync("openssl", args, { cwd: dir, encoding: "utf8" });
    if (run.status !== 0) throw new Error(`openssl ${args.join(" ")} failed: ${run.stderr}`);
  };
  openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=laurel-test-ca");
  openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost");
  writeFileSync(file("ext.cnf"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
  openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf");

  const port = await freePort();
  const args = [
    "--port", "0", "--tls-port", String(port), "--bind", "127.0.0.1", "127.0.0.2",
    "--tls-cert-file", file("server.pem"), "--tls-key-file", file("server.key"), "--tls-ca-cert-file", file("ca.pem"), "--tls-auth-clients", "no",
    "--dir", dir, "--save", "", "--appendonly", "no", "--loglevel", "warning",
  ];
  const child = setprivDeathSignal() ? spawn("setpriv", ["--pdeathsig", "TERM", "--", "redis-server", ...args], { stdio: "ignore" }) : spawn("redis-server", args, { stdio: "ignore" });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  // Ready once it answers PING over TLS, trusting the CA made above.
  const probe = new Redis({ host: "localhost", port, tls: { ca: readFileSync(file("ca.pem")) }, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on("error", () => undefined);
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`redis-server (TLS) exited with code ${child.exitCode}`);
      const answered = await probe.connect().then(() => probe.ping()).then(() => true, () => false);
      if (answered) break;
      probe.disconnect();
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } catch (err) {
    await stop();
    throw err;
  } finally {
    probe.disconnect();
  }
  return { url: `rediss://localhost:${port}`, port, caPath: file("ca.pem"), files: { cert: file("server.pem"), key: file("server.key"), ca: file("ca.pem") }, stop };
}
