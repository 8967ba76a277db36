import { inspect } from "node:util";
import { REDACTED } from "../redact.js";
import { readSecretFile } from "../secret-file.js";

/**
 * A Redis password read from a file, so that a rotation needs no restart: the data nodes'
 * (LAUREL_REDIS_PASSWORD_FILE, redis-password.ts) and the sentinels' own
 * (LAUREL_REDIS_SENTINEL_PASSWORD_FILE, redis-sentinel.ts). One set of rules for both: the file
 * read at start by secret-file.ts's rule (refused: unreadable, empty, several lines), again when
 * it changes or when it is refused (redis-password-reload.ts), and the password held in one object
 * that every copy of the client's options shares (RedisPassword).
 */
export interface PasswordFile {
  /** The variable that names the file. */
  variable: string;
  /** Whose password the file holds, for the log ("Redis password", "sentinels' password"). */
  whose: string;
}

/** The path `file`'s variable gives in `env`; undefined when unset or empty (empty counts as unset). */
export const passwordPath = (file: PasswordFile, env: NodeJS.ProcessEnv): string | undefined => env[file.variable] || undefined;

/**
 * A password from a file, as ioredis' `password` (or `sentinelPassword`) option. A client's
 * options are copied at every step: into the client (ioredis' lodash `defaults`), by duplicate()
 * (a spread), by BullMQ for each connection of its queues, workers and queue events
 * (Object.assign), and, for the sentinels' password, by ioredis' SentinelConnector into the
 * options of each connection it opens to a sentinel (`password: sentinelPassword || null`). A
 * string changed in one copy stays old in the others, and those copies are out of Laurel's reach;
 * this object is copied by reference, so a change reaches all of them. ioredis reads the option at
 * each connect and reconnect (the SentinelConnector opens a new connection to a sentinel each time
 * it asks for the primary), makes the AUTH when the socket is up, and writes a command's arguments
 * with String() as it makes it (ioredis 5, Command's toArg), so each connection sends what
 * toString() gives then (test/integration/redis-password-file.test.ts and
 * sentinel-password-file.test.ts hold it to that).
 *
 * Never printed: JSON (a log line) and util.inspect (a debug print of the options) show REDACTED.
 */
export class RedisPassword {
  #text: string;

  constructor(
    /** Which file it is. */
    readonly file: PasswordFile,
    /** The path it is read from. */
    readonly path: string,
    text: string,
  ) {
    this.#text = text;
  }

  toString(): string {
    return this.#text;
  }

  toJSON(): string {
    return REDACTED;
  }

  [inspect.custom](): string {
    return REDACTED;
  }

  /** Takes `text` for the next connections; whether it differs from the one before. */
  take(text: string): boolean {
    const changed = text !== this.#text;
    this.#text = text;
    return changed;
  }
}

/** The password the file at `path` holds, or what is wrong with it (never its contents). */
export function readPasswordFile(file: PasswordFile, path: string): { text: string } | { problem: string } {
  return readSecretFile(file.variable, path);
}

/** What is wrong with `file`'s file in `env` (unreadable, empty, several lines), or null; null when it is not set. */
export function passwordFileProblem(file: PasswordFile, env: NodeJS.ProcessEnv): string | null {
  const path = passwordPath(file, env);
  if (path === undefined) return null;
  const read = readPasswordFile(file, path);
  return "problem" in read ? read.problem : null;
}

/** The password each file's clients share, by variable (for the path it was read from). */
const shared = new Map<string, RedisPassword>();

/**
 * The process's RedisPassword for `file`, read the first time (one object for every client of the
 * process: the reload changes it for all); null when its variable is not set.
 */
export function passwordFromFile(file: PasswordFile, env: NodeJS.ProcessEnv = process.env): RedisPassword | null {
  const path = passwordPath(file, env);
  if (path === undefined) return null;
  const known = shared.get(file.variable);
  if (known?.path === path) return known;
  const read = readPasswordFile(file, path);
  if ("problem" in read) throw new Error(read.problem); // checkEnvironmentOrExit said it first
  const password = new RedisPassword(file, path, read.text);
  shared.set(file.variable, password);
  return password;
}

/** Whether an ioredis password option is a password from a file (else a string, or none). */
export function isFilePassword(value: unknown): value is RedisPassword {
  return value instanceof RedisPassword;
}
