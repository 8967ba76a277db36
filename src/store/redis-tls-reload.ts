import { X509Certificate } from "node:crypto";
import { readFileSync, watch, type FSWatcher } from "node:fs";
import { basename, dirname } from "node:path";
import type { Logger } from "pino";
import { pemProblems, redisTlsFiles, redisTlsPaths, TLS_FILES, usesTls, type FileVariable, type TlsOption } from "./redis-tls.js";

/**
 * Renewed LAUREL_REDIS_TLS_* files taken without a restart. Client certificates are often short
 * lived and renewed in place (cert-manager, a Vault agent, a cron job): read once at start, the
 * old one was presented at every reconnect after it expired or after Redis stopped trusting its
 * CA, and the process lost Redis until it was restarted.
 *
 * The files' directories are watched (a change in place, a rename over the file, and the swap of
 * a Kubernetes secret volume's `..data` link all show there), with a check every minute besides
 * (a file system without notifications). A change is read, checked by the start's rules
 * (pemProblems: PEM of its kind, the key the certificate's) and written into the process's shared
 * TLS options (redisTlsFiles), which every connection reads at its handshake: connections open
 * keep their session, and each new one (a reconnect, a job queue's, a sentinel's) presents the
 * new certificate. Files that fail the check (a pair half written, a key for another
 * certificate) are not taken, said once, and the ones in use are kept until the files pass.
 */

/** How often the files are checked without a notification. */
const CHECK_EVERY_MS = 60_000;
/** A renewal writes two or three files, each in several steps: checked once they have settled. */
const SETTLE_MS = 200;

export interface TlsFilesWatch {
  /** Reads the files now and takes them if they changed and pass (the watchers and the minute call it). */
  check(): void;
  stop(): void;
}

/** Starts watching the process's LAUREL_REDIS_TLS_* files; null when it has none (or no TLS). */
export function watchRedisTlsFiles(logger: Logger, env: NodeJS.ProcessEnv = process.env): TlsFilesWatch | null {
  const paths = redisTlsPaths(env);
  const entries = Object.entries(paths) as [TlsOption, string][];
  if (!usesTls(env) || entries.length === 0) return null;
  const options = redisTlsFiles(env) as Partial<Record<TlsOption, Buffer>>;
  const variable = Object.fromEntries(Object.entries(TLS_FILES).map(([name, option]) => [option, name])) as Record<TlsOption, FileVariable>;
  // The last refused contents' problems, so that a refusal is said once, not at every check.
  let refused: string | null = null;

  const check = (): void => {
    const read = new Map<TlsOption, Buffer>();
    const problems = pemProblems(env, (name) => {
      const option = TLS_FILES[name];
      const pem = readFileSync(paths[option]!);
      read.set(option, pem);
      return pem;
    });
    const changed = entries.some(([option]) => read.has(option) && !read.get(option)!.equals(options[option] ?? Buffer.alloc(0)));
    if (problems.length > 0) {
      const said = problems.join("; ");
      if (said !== refused) logger.warn({ problems }, "the Redis TLS files changed but cannot be used; new connections keep presenting the ones read before");
      refused = said;
      return;
    }
    refused = null;
    if (!changed) return;
    for (const [option, pem] of read) options[option] = pem;
    const certificate = read.has("cert") ? new X509Certificate(read.get("cert")!) : null;
    logger.info(
      { files: entries.map(([option]) => variable[option]), ...(certificate ? { subject: certificate.subject, validTo: certificate.validTo, fingerprint256: certificate.fingerprint256 } : {}) },
      "read the renewed Redis TLS files: new connections use them",
    );
  };

  let settle: NodeJS.Timeout | null = null;
  const soon = (): void => {
    if (settle !== null) clearTimeout(settle);
    settle = setTimeout(() => {
      settle = null;
      check();
    }, SETTLE_MS);
    settle.unref();
  };
  // One watcher a directory; any change there may be one of the files (or the link it goes through).
  const names = new Set(entries.map(([, path]) => basename(path)));
  const watchers: FSWatcher[] = [];
  for (const directory of new Set(entries.map(([, path]) => dirname(path)))) {
    try {
      const watcher = watch(directory, { persistent: false }, (_event, name) => {
        // Only the files' own names and the links a secret volume swaps (`..data`); a directory
        // of many other files (/etc/ssl) does not trigger a read for each of their changes.
        if (name === null || names.has(name) || name.startsWith("..")) soon();
      });
      watcher.on("error", () => watcher.close());
      watchers.push(watcher);
    } catch (err) {
      logger.warn({ directory, err: (err as Error).message }, "cannot watch the Redis TLS files' directory; they are checked once a minute");
    }
  }
  const minute = setInterval(check, CHECK_EVERY_MS);
  minute.unref();
  return {
    check,
    stop() {
      clearInterval(minute);
      if (settle !== null) clearTimeout(settle);
      for (const watcher of watchers) watcher.close();
    },
  };
}
