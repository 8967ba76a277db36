import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Logger } from "pino";
import { watchFiles, type FilesWatch } from "../file-watch.js";
import { pemProblems, redisTlsFiles, redisTlsPaths, sameTlsValue, TLS_FILES, tlsValue, usesTls, type FileVariable, type TlsOption } from "./redis-tls.js";

/**
 * Renewed LAUREL_REDIS_TLS_* files taken without a restart. Client certificates are often short
 * lived and renewed in place (cert-manager, a Vault agent, a cron job): read once at start, the
 * old one was presented at every reconnect after it expired or after Redis stopped trusting its
 * CA, and the process lost Redis until it was restarted.
 *
 * The files are watched as every file the process takes again is (file-watch.ts: their
 * directories, and a check every minute). A change is read, checked by the start's rules
 * (pemProblems: PEM of its kind, an encrypted key opened by the passphrase read with it, the key
 * the certificate's) and written into the process's shared TLS options (redisTlsFiles), which
 * every connection reads at its handshake: connections open keep their session, and each new one
 * (a reconnect, a job queue's, a sentinel's) presents the new certificate. Files that fail the
 * check (a pair half written, a key for another certificate, a new key beside the old
 * passphrase) are not taken, said once, and the ones in use are kept until the files pass.
 */

export type TlsFilesWatch = FilesWatch;

/** Starts watching the process's LAUREL_REDIS_TLS_* files; null when it has none (or no TLS). */
export function watchRedisTlsFiles(logger: Logger, env: NodeJS.ProcessEnv = process.env): TlsFilesWatch | null {
  const paths = redisTlsPaths(env);
  const entries = Object.entries(paths) as [TlsOption, string][];
  if (!usesTls(env) || entries.length === 0) return null;
  const options = redisTlsFiles(env) as Partial<Record<TlsOption, Buffer | string>>;
  const variable = Object.fromEntries(Object.entries(TLS_FILES).map(([name, option]) => [option, name])) as Record<TlsOption, FileVariable>;
  // The last refused contents' problems, so that a refusal is said once, not at every check.
  let refused: string | null = null;

  const check = (): void => {
    const read = new Map<TlsOption, Buffer | string>();
    const problems = pemProblems(env, (name) => {
      const option = TLS_FILES[name];
      const contents = readFileSync(paths[option]!);
      read.set(option, tlsValue(option, contents));
      return contents;
    });
    const changed = entries.some(([option]) => read.has(option) && !sameTlsValue(read.get(option), options[option]));
    if (problems.length > 0) {
      const said = problems.join("; ");
      if (said !== refused) logger.warn({ problems }, "the Redis TLS files changed but cannot be used; new connections keep presenting the ones read before");
      refused = said;
      return;
    }
    refused = null;
    if (!changed) return;
    // All at once, in one turn: no connection's handshake reads a new key beside the old passphrase.
    for (const [option, value] of read) options[option] = value;
    const cert = read.get("cert");
    const certificate = Buffer.isBuffer(cert) ? new X509Certificate(cert) : null;
    logger.info(
      { files: entries.map(([option]) => variable[option]), ...(certificate ? { subject: certificate.subject, validTo: certificate.validTo, fingerprint256: certificate.fingerprint256 } : {}) },
      "read the renewed Redis TLS files: new connections use them",
    );
  };

  return watchFiles(entries.map(([, path]) => path), check, logger, "the Redis TLS files");
}
