import { createPrivateKey, X509Certificate, type KeyObject } from "node:crypto";
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { connect, type ConnectionOptions } from "node:tls";
import { deadline } from "../deadline.js";
import { secretText, secretTextProblem, unreadableFile } from "../secret-file.js";

/**
 * TLS files for Redis (a rediss:// REDIS_URL), for every connection of the process: its client,
 * the job queues' (BullMQ takes the client's options: redis-client.ts queueConnection), and
 * through Sentinel the sentinels' and the data nodes'. Environment (PEM file paths):
 *   LAUREL_REDIS_TLS_CERT  the client certificate, for a Redis that asks for one (`tls-auth-clients
 *                          yes`, Redis's default); with LAUREL_REDIS_TLS_KEY, its private key
 *   LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE  a file holding the passphrase of an encrypted key (a
 *                          file, as the password's (redis-password.ts): renewed with the key, and
 *                          never in the environment, which child processes and `ps e` see)
 *   LAUREL_REDIS_TLS_CA    the CA(s) the server's certificate is checked against, instead of
 *                          Node's (NODE_EXTRA_CA_CERTS adds to Node's; this trusts these alone)
 * Checked at start (environmentProblems), read once per process into one options object that
 * every client shares, and read again when they change (redis-tls-reload.ts): a renewed
 * certificate is presented from the next connection on, without a restart. Also here: how a TLS
 * failure of a connection is told apart (the server's certificate not accepted, the client's
 * refused), which the start and check-config say at once (redis-first-connection.ts).
 */
/** Each file variable and the Node TLS option its contents go to. */
export const TLS_FILES = {
  LAUREL_REDIS_TLS_CERT: "cert",
  LAUREL_REDIS_TLS_KEY: "key",
  LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE: "passphrase",
  LAUREL_REDIS_TLS_CA: "ca",
} as const;

export type FileVariable = keyof typeof TLS_FILES;

const set = (env: NodeJS.ProcessEnv, name: FileVariable): string | undefined => env[name] || undefined;

/** Whether the process's Redis connections speak TLS: a rediss:// REDIS_URL (with sentinels too: redis-sentinel.ts). */
export function usesTls(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env.REDIS_URL?.startsWith("rediss://"));
}

/** The files' paths the process's shared options were read from, and the options (redisTlsFiles). */
let shared: { paths: string; options: ConnectionOptions } | null = null;

/** The LAUREL_REDIS_TLS_* paths set in `env`, by option (cert, key, ca). */
export function redisTlsPaths(env: NodeJS.ProcessEnv = process.env): Partial<Record<TlsOption, string>> {
  const paths: Partial<Record<TlsOption, string>> = {};
  for (const [name, option] of Object.entries(TLS_FILES)) {
    const path = set(env, name as FileVariable);
    if (path !== undefined) paths[option] = path;
  }
  return paths;
}

export type TlsOption = (typeof TLS_FILES)[FileVariable];

/** A file's contents as its TLS option takes them: PEM as read, the passphrase as its text (Node takes a string). */
export function tlsValue(option: TlsOption, contents: Buffer): Buffer | string {
  return option === "passphrase" ? secretText(contents) : contents;
}

/** Whether two values of one option are the same (the reload takes only files that changed). */
export function sameTlsValue(a: Buffer | string | undefined, b: Buffer | string | undefined): boolean {
  return Buffer.isBuffer(a) && Buffer.isBuffer(b) ? a.equals(b) : a === b;
}

/**
 * The files' contents as Node's TLS options ({ cert, key, passphrase, ca }, those set), for ioredis' `tls` and
 * `sentinelTLS`; {} when none is set, which leaves ioredis' own TLS (rediss://) as it was. One
 * object per process for the same paths: every client, its copies (duplicate() and the job
 * queues' keep the reference) and the sentinels' connections read it at each connection's
 * handshake, so that the reload (redis-tls-reload.ts) changes it for all of them in place.
 */
export function redisTlsFiles(env: NodeJS.ProcessEnv = process.env): ConnectionOptions {
  const paths = redisTlsPaths(env);
  const key = JSON.stringify(paths);
  if (shared?.paths !== key) shared = { paths: key, options: {} };
  // Read at every client's making, as before the sharing: what the files hold now.
  const options = shared.options as Record<string, Buffer | string>;
  for (const [option, path] of Object.entries(paths) as [TlsOption, string][]) options[option] = tlsValue(option, readFileSync(path));
  return options;
}

/** A certificate file's end as GET /metrics gives it (laurel_redis_tls_not_after_seconds). */
export interface TlsFileEnd {
  file: FileVariable;
  /** When its certificate ends (a CA file: the first of its certificates to end), in seconds since the epoch. */
  notAfterSeconds: number;
}

/**
 * When the certificates the process presents and trusts now end: the client certificate and the
 * CA file of the shared options (redisTlsFiles), so the renewed ones once the reload took them
 * (redis-tls-reload.ts), and the old ones while a renewal is refused. Nothing before a client is
 * made, nor without the files.
 */
export function redisTlsFileEnds(): TlsFileEnd[] {
  if (shared === null) return [];
  const { cert, ca } = shared.options as Partial<Record<TlsOption, Buffer>>;
  const ends: TlsFileEnd[] = [];
  if (cert) ends.push({ file: "LAUREL_REDIS_TLS_CERT", notAfterSeconds: firstEnd(cert) });
  if (ca) ends.push({ file: "LAUREL_REDIS_TLS_CA", notAfterSeconds: firstEnd(ca) });
  return ends.filter((end) => Number.isFinite(end.notAfterSeconds));
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g;

/** The earliest end of the certificates in a PEM file (one, or a CA bundle), in seconds; NaN when it holds none. */
export function firstEnd(pem: Buffer): number {
  let earliest = NaN;
  for (const block of pem.toString("latin1").match(PEM_CERTIFICATE) ?? []) {
    const end = Date.parse(new X509Certificate(block).validTo) / 1000;
    if (!(end >= earliest)) earliest = end;
  }
  return earliest;
}

/**
 * What is wrong with the LAUREL_REDIS_TLS_* settings, for environmentProblems' one line: set
 * without TLS to use them on, a certificate without its key (or the other way), a passphrase
 * without a key, a file that cannot be read or holds no PEM of its kind, an encrypted key the
 * passphrase does not open, a key that is not the certificate's. A key's contents and the
 * passphrase are never in a message (nor Node's parse error of them, which could quote them).
 */
export function redisTlsProblems(env: NodeJS.ProcessEnv = process.env): string[] {
  const given = (Object.keys(TLS_FILES) as FileVariable[]).filter((name) => set(env, name) !== undefined);
  if (given.length === 0) return [];
  const problems: string[] = [];
  // Without rediss:// the files would be read and never used: the operator believes the
  // connection is encrypted and authenticated when it is plain text.
  if (!usesTls(env)) {
    problems.push(`${given.join(", ")} ${given.length === 1 ? "is" : "are"} set but REDIS_URL is not a rediss:// URL (the files are for TLS to Redis; with REDIS_SENTINELS too, a rediss:// REDIS_URL turns TLS on)`);
  }
  const cert = set(env, "LAUREL_REDIS_TLS_CERT");
  const key = set(env, "LAUREL_REDIS_TLS_KEY");
  if (cert !== undefined && key === undefined) problems.push("LAUREL_REDIS_TLS_CERT is set without LAUREL_REDIS_TLS_KEY (the client certificate's private key)");
  if (key !== undefined && cert === undefined) problems.push("LAUREL_REDIS_TLS_KEY is set without LAUREL_REDIS_TLS_CERT (the client certificate)");
  if (key === undefined && set(env, "LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE") !== undefined) {
    problems.push("LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE is set without LAUREL_REDIS_TLS_KEY (the encrypted key it opens)");
  }
  problems.push(...pemProblems(env, (name) => readFileSync(set(env, name)!)));
  return problems;
}

/**
 * What is wrong with the set files' contents, as `read` gives them (it may throw: a file that
 * cannot be read): no PEM of its kind, an encrypted key without its passphrase or that does not
 * decrypt with it, a passphrase file empty or of several lines, a key that is not the
 * certificate's. The start's check (redisTlsProblems) and the reload's (redis-tls-reload.ts),
 * one set of rules. The passphrase is never in a message.
 */
export function pemProblems(env: NodeJS.ProcessEnv, read: (name: FileVariable) => Buffer): string[] {
  const problems: string[] = [];
  const certificate = readPem(env, "LAUREL_REDIS_TLS_CERT", problems, read, (pem) => new X509Certificate(pem));
  readPem(env, "LAUREL_REDIS_TLS_CA", problems, read, (pem) => new X509Certificate(pem));
  const passphrase = readPassphrase(env, problems, read);
  const privateKey = readPem(env, "LAUREL_REDIS_TLS_KEY", problems, read, (pem) => privateKeyOf(env, pem, passphrase));
  if (certificate && privateKey && !certificate.checkPrivateKey(privateKey)) {
    problems.push(`LAUREL_REDIS_TLS_KEY (${set(env, "LAUREL_REDIS_TLS_KEY")}) is not the private key of the certificate in LAUREL_REDIS_TLS_CERT (${set(env, "LAUREL_REDIS_TLS_CERT")})`);
  }
  return problems;
}

/** A problem of a file's contents that its parser's failure does not say (the key's encryption): said as it is. */
class PemProblem extends Error {}

/** An encrypted PEM key: PKCS#8's own header, or the traditional one's Proc-Type line. */
const ENCRYPTED_KEY = /-----BEGIN ENCRYPTED PRIVATE KEY-----|^Proc-Type: 4,ENCRYPTED/m;

/**
 * The key `pem` holds, decrypted with `passphrase` when it is encrypted; undefined when the
 * passphrase's file has a problem of its own (null: said already). Node's errors are not passed
 * on: OpenSSL's say nothing a reader needs, and a parser's message could quote what it read.
 */
function privateKeyOf(env: NodeJS.ProcessEnv, pem: Buffer, passphrase: string | null | undefined): KeyObject | undefined {
  if (!ENCRYPTED_KEY.test(pem.toString("latin1"))) return createPrivateKey(pem);
  const key = `LAUREL_REDIS_TLS_KEY (${set(env, "LAUREL_REDIS_TLS_KEY")})`;
  if (passphrase === null) return undefined;
  if (passphrase === undefined) throw new PemProblem(`${key} is encrypted: give the path of a file holding its passphrase as LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE`);
  try {
    return createPrivateKey({ key: pem, passphrase });
  } catch {
    throw new PemProblem(`${key} cannot be decrypted with the passphrase in LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE (${set(env, "LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE")}): is it this key's passphrase (and the key whole)?`);
  }
}

/** The passphrase file's text; undefined when it is not set, null (its problem pushed) when it cannot be used. */
function readPassphrase(env: NodeJS.ProcessEnv, problems: string[], read: (name: FileVariable) => Buffer): string | null | undefined {
  const name = "LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE";
  const contents = readSet(env, name, problems, read);
  if (contents === undefined) return set(env, name) === undefined ? undefined : null;
  const text = secretText(contents);
  const problem = secretTextProblem(name, set(env, name)!, text);
  if (problem === null) return text;
  problems.push(problem);
  return null;
}

/** The contents of the file `name` names; undefined when it is not set, or cannot be read (the problem pushed). */
function readSet(env: NodeJS.ProcessEnv, name: FileVariable, problems: string[], read: (name: FileVariable) => Buffer): Buffer | undefined {
  const path = set(env, name);
  if (path === undefined) return undefined;
  try {
    return read(name);
  } catch (err) {
    problems.push(unreadableFile(name, path, err));
    return undefined;
  }
}

/** The file `name` names, parsed by `parse`; undefined, with the problem pushed, when it cannot be read or parsed. */
function readPem<T>(env: NodeJS.ProcessEnv, name: FileVariable, problems: string[], read: (name: FileVariable) => Buffer, parse: (pem: Buffer) => T): T | undefined {
  const pem = readSet(env, name, problems, read);
  if (pem === undefined) return undefined;
  try {
    return parse(pem);
  } catch (err) {
    if (err instanceof PemProblem) {
      problems.push(err.message);
      return undefined;
    }
    const kind = name === "LAUREL_REDIS_TLS_KEY" ? "a private key (BEGIN PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY; BEGIN ENCRYPTED PRIVATE KEY with LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE)" : "a certificate (BEGIN CERTIFICATE)";
    problems.push(`${name} (${set(env, name)}) is not a PEM file holding ${kind}`);
    return undefined;
  }
}

/**
 * Node's codes for a TLS server certificate this process does not accept (OpenSSL's verify
 * results, and Node's own check of the host name against the certificate). Retrying does not
 * change the certificate nor what the process trusts (NODE_EXTRA_CA_CERTS is read at its start).
 */
const CERTIFICATE_CODES = new Set([
  "UNABLE_TO_GET_ISSUER_CERT", "UNABLE_TO_GET_ISSUER_CERT_LOCALLY", "UNABLE_TO_VERIFY_LEAF_SIGNATURE", "UNABLE_TO_DECRYPT_CERT_SIGNATURE",
  "UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY", "CERT_SIGNATURE_FAILURE", "CERT_NOT_YET_VALID", "CERT_HAS_EXPIRED", "ERROR_IN_CERT_NOT_BEFORE_FIELD",
  "ERROR_IN_CERT_NOT_AFTER_FIELD", "DEPTH_ZERO_SELF_SIGNED_CERT", "SELF_SIGNED_CERT_IN_CHAIN", "CERT_CHAIN_TOO_LONG", "CERT_REVOKED", "INVALID_CA",
  "PATH_LENGTH_EXCEEDED", "INVALID_PURPOSE", "CERT_UNTRUSTED", "CERT_REJECTED", "HOSTNAME_MISMATCH", "ERR_TLS_CERT_ALTNAME_INVALID",
]);

/**
 * What is wrong with the Redis server's TLS certificate, as "CODE: Node's message", when `err`
 * (a connection error ioredis emits) is a certificate this process does not accept; else null.
 */
export function tlsCertificateProblem(err: unknown): string | null {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return err instanceof Error && code !== undefined && CERTIFICATE_CODES.has(code) ? `${code}: ${err.message}` : null;
}

/**
 * Node's codes for a TLS alert a server sends when it refuses the client's certificate, or the
 * lack of one: TLS 1.3's certificate_required, and the alerts of a certificate it does not
 * accept (no CA it trusts, expired, revoked, not for a client). Retrying does not change them.
 */
const CLIENT_CERTIFICATE_ALERTS = new Set([
  "ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED", "ERR_SSL_TLSV1_ALERT_UNKNOWN_CA", "ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE",
  "ERR_SSL_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE", "ERR_SSL_SSLV3_ALERT_CERTIFICATE_REVOKED", "ERR_SSL_SSLV3_ALERT_CERTIFICATE_EXPIRED",
  "ERR_SSL_SSLV3_ALERT_CERTIFICATE_UNKNOWN", "ERR_SSL_TLSV1_ALERT_ACCESS_DENIED",
]);

/** The code of the alert, when `err` is a server's refusal of the client certificate (CLIENT_CERTIFICATE_ALERTS); else null. */
export function clientCertificateRefusal(err: unknown): string | null {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return err instanceof Error && code !== undefined && CLIENT_CERTIFICATE_ALERTS.has(code) ? code : null;
}

/**
 * Asks the server at `host`:`port` over TLS 1.2 whether it takes the client certificate in
 * `tls` (or none): its alert's code when it refuses, else null (it took it, or the question
 * went unanswered within `timeoutMs`, or the server does not speak TLS 1.2).
 *
 * Why: over TLS 1.3 the client's handshake ends before the server has checked the client's
 * certificate. The server's refusal, an alert, then races the client's first command: Redis
 * closes the connection with the command unread, the kernel answers with a reset, and the reset
 * discards the alert (most connections without a certificate end in a bare ECONNRESET). Over
 * TLS 1.2 the server decides within the handshake, so its alert always arrives before any
 * command is sent. Its server certificate is not checked here: the TLS 1.3 connection before
 * this question checked it.
 */
export function askClientCertificate(host: string, port: number, tls: ConnectionOptions, timeoutMs: number): Promise<string | null> {
  return new Promise((resolve) => {
    const { cert, key, passphrase } = tls;
    const socket = connect({ host, port, cert, key, passphrase, rejectUnauthorized: false, minVersion: "TLSv1.2", maxVersion: "TLSv1.2" });
    const done = (answer: string | null): void => {
      timer.cancel();
      socket.destroy();
      resolve(answer);
    };
    const timer = deadline(timeoutMs, () => done(null)); // an answer that came in time is read first
    socket.once("secureConnect", () => done(null));
    // HANDSHAKE_FAILURE is TLS 1.2's word for a certificate required and not given (it has no
    // certificate_required); asked only after a TLS 1.3 handshake with the same server went
    // through, it is hardly anything else (a server whose TLS 1.2 ciphers share none with Node's).
    socket.once("error", (err: NodeJS.ErrnoException) => done(clientCertificateRefusal(err) ?? (err.code === "ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE" ? err.code : null)));
  });
}

/** Why a TLS server refuses this process (tlsRefusal): its certificate not accepted, or the client's refused (or missing). */
export type TlsRefusal = { certificate: string } | { client: string };

/**
 * Connects to `host`:`port` over TLS with `tls` as a client of it would, and says why it would
 * refuse the process: the server's certificate not accepted (tlsCertificateProblem), or after a
 * handshake that went through, the client certificate refused or required (askClientCertificate,
 * over TLS 1.2); null when it takes the process, or does not answer within `timeoutMs` (not
 * reachable is waited for, not refused). For the sentinels, whose connections ioredis keeps to
 * itself (redis-first-connection.ts).
 */
export function tlsRefusal(host: string, port: number, tls: ConnectionOptions, timeoutMs: number): Promise<TlsRefusal | null> {
  return new Promise((resolve) => {
    const socket = connect({ ...tls, host, port, ...(isIP(host) ? {} : { servername: host }) });
    const done = (answer: TlsRefusal | null | Promise<TlsRefusal | null>): void => {
      timer.cancel();
      socket.destroy();
      resolve(answer);
    };
    const timer = deadline(timeoutMs, () => done(null)); // an answer that came in time is read first
    socket.once("secureConnect", () => done(askClientCertificate(host, port, tls, timeoutMs).then((code) => (code === null ? null : { client: code }))));
    socket.once("error", (err) => {
      const problem = tlsCertificateProblem(err);
      const refused = clientCertificateRefusal(err);
      done(problem !== null ? { certificate: problem } : refused !== null ? { client: refused } : null);
    });
  });
}
