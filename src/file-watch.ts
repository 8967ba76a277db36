import { watch, type FSWatcher } from "node:fs";
import { basename, dirname } from "node:path";
import type { Logger } from "pino";

/**
 * Files a process reads at start and takes again when they are replaced in place, without a
 * restart: the Redis TLS files (store/redis-tls-reload.ts) and the Redis password file
 * (store/redis-password-reload.ts). Secrets and certificates are renewed by a tool beside the
 * process (cert-manager, a Vault agent, a cron job, a Kubernetes secret volume), which writes
 * each file in several steps, renames a new one over it, or swaps the volume's `..data` link.
 *
 * The files' directories are watched, since every one of those ways shows there (a watch on the
 * file itself loses it at the first rename), with a check every minute besides (a file system
 * without notifications). A change calls `check` once the writes have settled; `check` reads the
 * files, decides whether they pass and takes them (or says why not): this module only says when.
 */

/** How often the files are checked without a notification. */
const CHECK_EVERY_MS = 60_000;
/** A renewal writes two or three files, each in several steps: checked once they have settled. */
const SETTLE_MS = 200;

export interface FilesWatch {
  /** Reads the files now and takes them if they changed and pass (the watchers and the minute call it). */
  check(): void;
  stop(): void;
}

/**
 * Calls `check` after a change in the directory of any of `paths` (their own names, or a link a
 * secret volume swaps), SETTLE_MS after the last, and once a minute. `what` names the files in
 * the warning of a directory that cannot be watched.
 */
export function watchFiles(paths: readonly string[], check: () => void, logger: Logger, what: string): FilesWatch {
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
  const names = new Set(paths.map((path) => basename(path)));
  const watchers: FSWatcher[] = [];
  for (const directory of new Set(paths.map((path) => dirname(path)))) {
    try {
      const watcher = watch(directory, { persistent: false }, (_event, name) => {
        // Only the files' own names and the links a secret volume swaps (`..data`); a directory
        // of many other files (/etc/ssl) does not trigger a read for each of their changes.
        if (name === null || names.has(name) || name.startsWith("..")) soon();
      });
      watcher.on("error", () => watcher.close());
      watchers.push(watcher);
    } catch (err) {
      logger.warn({ directory, err: (err as Error).message }, `cannot watch the directory of ${what}; they are checked once a minute`);
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
