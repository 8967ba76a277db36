import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../src/embedded-redis.js";
import { startRedisChild, type RedisChild } from "../../src/redis-child.js";

export interface TlsRedis extends TlsCertificates {
  /** `rediss://localhost:<port>`: the name the server's certificate carries (and 127.0.0.1). */
  url: string;
  port: number;
  stop(): Promise<void>;
}

export interface ClientFiles {
  cert: string;
  key: string;
}

export interface TlsRedisOptions {
  /** Redis's `tls-auth-clients yes` (its own default): a client must present a certificate signed by the CA. */
  authClients?: boolean;
  /** A server certificate whose validity ended in 2020 (signed by the CA, names localhost): CERT_HAS_EXPIRED. */
  expired?: boolean;
  /** More redis-server arguments (e.g. `--tls-ciphers`). */
  serverArgs?: readonly string[];
  /** How a free port is found (freePort; a test gives one that first finds a taken port). */
  pickPort?: () => Promise<number>;
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
 * certificate does not name, for a host name mismatch. Clients need not present a certificate
 * unless `authClients`; a client certificate from the CA, and one from a stranger CA, are made
 * either way. Started as the embedded server is (src/redis-child.ts): with the death signal, and
 * on another port when the one found free is taken before it binds it.
 */
export async function startTlsRedis(opts: TlsRedisOptions = {}): Promise<TlsRedis> {
  const dir = mkdtempSync(join(tmpdir(), "laurel-tls-"));
  const file = (name: string): string => join(dir, name);
  let made: TlsCertificates;
  try {
    made = makeTlsCertificates(dir, opts);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const args = (port: number): string[] => [
    "--port", "0", "--tls-port", String(port), "--bind", "127.0.0.1", "127.0.0.2",
    "--tls-cert-file", file("server.pem"), "--tls-key-file", file("server.key"), "--tls-ca-cert-file", file("ca.pem"), "--tls-auth-clients", opts.authClients ? "yes" : "no",
    "--dir", dir, "--save", "", "--appendonly", "no", "--loglevel", "warning", ...(opts.serverArgs ?? []),
  ];
  // Ready once it answers over TLS as itself, trusting the CA made above (any certificate, when
  // it is made expired), with the client certificate it may ask for; on another port when the
  // one found free is taken before it binds it (src/redis-child.ts).
  const tls = { ca: readFileSync(file("ca.pem")), cert: readFileSync(file("client.pem")), key: readFileSync(file("client.key")), rejectUnauthorized: !opts.expired };
  let server: RedisChild;
  try {
    server = await startRedisChild({ args, pickPort: opts.pickPort ?? freePort, probe: { tls } });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const stop = async (): Promise<void> => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  return { url: `rediss://localhost:${server.port}`, port: server.port, ...made, stop };
}

/** What makeTlsCertificates writes: the CA, the server's files, and two client certificates. */
export interface TlsCertificates {
  /** The PEM of the CA that signed the server's certificate and `client`'s (for NODE_EXTRA_CA_CERTS, LAUREL_REDIS_TLS_CA). */
  caPath: string;
  /** The server's certificate and key, and the CA: for a sentinel over TLS beside it (redis-server.ts startTestSentinel). */
  files: TlsFiles;
  /** A client certificate and key signed by the CA: one the server accepts. */
  client: ClientFiles;
  /** A client certificate and key signed by another CA (one made for it alone): one the server refuses. */
  strangerClient: ClientFiles;
}

/**
 * Makes, with openssl in `dir`, a CA, a server certificate for `localhost` and 127.0.0.1 signed
 * by it (`expired`: valid in January 2020 only), a client certificate signed by it, and one
 * signed by a stranger CA made for it alone.
 */
export function makeTlsCertificates(dir: string, opts: { expired?: boolean } = {}): TlsCertificates {
  if (spawnSync("openssl", ["version"], { stdio: "ignore" }).error) throw new Error(OPENSSL_HINT);
  const file = (name: string): string => join(dir, name);
  const openssl = (...args: string[]): void => {
    const run = spawnSync("openssl", args, { cwd: dir, encoding: "utf8" });
    if (run.status !== 0) throw new Error(`openssl ${args.join(" ")} failed: ${run.stderr}`);
  };
  openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=laurel-test-ca");
  openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost");
  writeFileSync(file("ext.cnf"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
  if (opts.expired) {
    // OpenSSL 3.0's `x509 -req` dates a certificate from now only; `ca` takes any dates, from a
    // configuration naming its (empty) database.
    writeFileSync(file("index.txt"), "");
    writeFileSync(file("serial"), "01\n");
    writeFileSync(file("ca.cnf"), "[ca]\ndefault_ca=test\n[test]\ndatabase=index.txt\nnew_certs_dir=.\nserial=serial\ndefault_md=sha256\npolicy=any\n[any]\ncommonName=supplied\n");
    openssl("ca", "-batch", "-notext", "-config", "ca.cnf", "-cert", "ca.pem", "-keyfile", "ca.key", "-in", "server.csr", "-out", "server.pem", "-startdate", "20200101000000Z", "-enddate", "20200102000000Z", "-extfile", "ext.cnf");
  } else {
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf");
  }
  // Client certificates: one from the CA, one from a CA the server does not know.
  openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "stranger-ca.key", "-out", "stranger-ca.pem", "-days", "2", "-subj", "/CN=laurel-stranger-ca");
  for (const [name, ca] of [["client", "ca"], ["stranger-client", "stranger-ca"]] as const) {
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=laurel-${name}`);
    openssl("x509", "-req", "-in", `${name}.csr`, "-CA", `${ca}.pem`, "-CAkey", `${ca}.key`, "-CAcreateserial", "-out", `${name}.pem`, "-days", "2");
  }

  return {
    caPath: file("ca.pem"),
    files: { cert: file("server.pem"), key: file("server.key"), ca: file("ca.pem") },
    client: { cert: file("client.pem"), key: file("client.key") },
    strangerClient: { cert: file("stranger-client.pem"), key: file("stranger-client.key") },
  };
}
