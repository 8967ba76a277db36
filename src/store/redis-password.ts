import { readFileSync } from "node:fs";
import { inspect } from "node:util";
import type { RedisOptions } from "ioredis";
import { REDACTED } from "../redact.js";
import { secretText, secretTextProblem, unreadableFile } from "../secret-file.js";

/**
 * The Redis password from a file, so that a rotation needs no restart. Environment:
 *   LAUREL_REDIS_PASSWORD_FILE  the path of a file holding the password of the Redis REDIS_URL (or
 *                               REDIS_SENTINELS) leads to, instead of REDIS_URL's userinfo; the
 *                               URL may still give the user (an ACL user: redis://laurel@host:6379).
 * Through Sentinel it is the data nodes' password, as REDIS_URL's would be; the sentinels' own
 * stays REDIS_SENTINEL_PASSWORD (read at start): the two are set apart, as before, and sentinels
 * are mostly left without one or keep theirs (a file of their own is a variable to add when a
 * deployment asks for it).
 *
 * Read at start (refused: a file that cannot be read, empty, of several lines, or given beside a
 * password in REDIS_URL, which would leave the operator guessing which one is sent), and again
 * when it changes or when Redis refuses it (redis-password-reload.ts). Every connection of the
 * process sends the password the file holds when that connection opens: ioredis sends AUTH with
 * `options.password` at every connect and reconnect, and the value there is one RedisPassword
 * object shared by every copy of the options (below).
 */
export const PASSWORD_FILE = "LAUREL_REDIS_PASSWORD_FILE";

const pathOf = (env: NodeJS.ProcessEnv): string | undefined => env[PASSWORD_FILE] || undefined;

/**
 * The process's Redis password, as ioredis' `password` option. A client's options are copied at
 * every step: into the client (ioredis' lodash `defaults`), by duplicate() (a spread), by BullMQ
 * for each connection of its queues, workers and queue events (Object.assign). A string changed
 * in one copy stays old in the others, and BullMQ's copies are out of Laurel's reach; this object
 * is copied by reference, so a change reaches all of them. ioredis reads `options.password` at
 * each connect and reconnect, makes the AUTH when the socket is up, and writes a command's
 * arguments with String() as it makes it (ioredis 5, Command's toArg), so each connection sends
 * what toString() gives then (test/integration/redis-password-file.test.ts holds it to that).
 *
 * Never printed: JSON (a log line) and util.inspect (a debug print of the options) show REDACTED.
 */
export class RedisPassword {
  #text: string;

  constructor(
    /** The file it is read from (LAUREL_REDIS_PASSWORD_FILE). */
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
export function readPasswordFile(path: string): { text: string } | { problem: string } {
  let contents: Buffer;
  try {
    contents = readFileSync(path);
  } catch (err) {
    return { problem: unreadableFile(PASSWORD_FILE, path, err) };
  }
  const text = secretText(contents);
  const problem = secretTextProblem(PASSWORD_FILE, path, text);
  return problem === null ? { text } : { problem };
}

/** Whether REDIS_URL's userinfo holds a password (as ioredis reads it: what follows the user's colon); false for a socket path or a URL that does not parse (redisUrlProblems says that). */
function urlHasPassword(url: string | undefined): boolean {
  if (!url || !/^rediss?:\/\//i.test(url)) return false;
  try {
    return new URL(url).password !== "";
  } catch {
    return false;
  }
}

/** What is wrong with LAUREL_REDIS_PASSWORD_FILE, for environmentProblems' one line. */
export function redisPasswordProblems(env: NodeJS.ProcessEnv = process.env): string[] {
  const path = pathOf(env);
  if (path === undefined) return [];
  const problems: string[] = [];
  if (!env.REDIS_URL && !env.REDIS_SENTINELS) {
    problems.push(`${PASSWORD_FILE} is set without REDIS_URL or REDIS_SENTINELS (it is the password of the Redis they lead to; the embedded Redis has none)`);
  }
  if (urlHasPassword(env.REDIS_URL)) {
    problems.push(`${PASSWORD_FILE} is set and REDIS_URL holds a password too: give the password in one place (REDIS_URL may keep the user: redis://user@host:port)`);
  }
  const read = readPasswordFile(path);
  if ("problem" in read) problems.push(read.problem);
  return problems;
}

/** The password the process's clients share, for the file's path it was read from. */
let shared: RedisPassword | null = null;

/**
 * The process's RedisPassword, read from LAUREL_REDIS_PASSWORD_FILE the first time (one object
 * for every client of the process: the reload changes it for all); null without the file.
 */
export function redisPassword(env: NodeJS.ProcessEnv = process.env): RedisPassword | null {
  const path = pathOf(env);
  if (path === undefined) return null;
  if (shared?.path !== path) {
    const read = readPasswordFile(path);
    if ("problem" in read) throw new Error(read.problem); // checkEnvironmentOrExit said it first
    shared = new RedisPassword(path, read.text);
  }
  return shared;
}

/**
 * REDIS_URL and the ioredis options that authenticate with the password file: the URL without
 * its user, which goes to `username` beside the password. (ioredis reads a URL's user as a user
 * with an empty password, and the URL's fields win over the options': the file's password would
 * never be sent.) The URL as it is, and no options, without the file.
 */
export function withPasswordFile(url: string | undefined, env: NodeJS.ProcessEnv = process.env): { url: string | undefined; options: RedisOptions } {
  const password = redisPassword(env);
  if (password === null) return { url, options: {} };
  // The object where ioredis' types say string: see RedisPassword.
  const options: RedisOptions = { password: password as unknown as string };
  if (!url || !/^rediss?:\/\//i.test(url)) return { url, options };
  const parsed = new URL(url);
  if (parsed.username === "") return { url, options };
  const username = decodeURIComponent(parsed.username);
  parsed.username = "";
  return { url: parsed.href, options: { ...options, username } };
}

/** Where a client's password comes from, for the line that says Redis refused it. */
export function passwordSetting(options: RedisOptions): "LAUREL_REDIS_PASSWORD_FILE" | "REDIS_URL" {
  return (options.password as unknown) instanceof RedisPassword ? PASSWORD_FILE : "REDIS_URL";
}
