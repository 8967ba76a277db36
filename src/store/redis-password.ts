import type { RedisOptions } from "ioredis";
import { isFilePassword, passwordFileProblem, passwordFromFile, passwordPath, type PasswordFile, type RedisPassword } from "./password-file.js";

/**
 * The Redis password from a file, so that a rotation needs no restart. Environment:
 *   LAUREL_REDIS_PASSWORD_FILE  the path of a file holding the password of the Redis REDIS_URL (or
 *                               REDIS_SENTINELS) leads to, instead of REDIS_URL's userinfo; the
 *                               URL may still give the user (an ACL user: redis://laurel@host:6379).
 * Through Sentinel it is the data nodes' password, as REDIS_URL's would be; the sentinels' own is
 * REDIS_SENTINEL_PASSWORD or a file of its own, LAUREL_REDIS_SENTINEL_PASSWORD_FILE
 * (redis-sentinel.ts): the two are set apart, as before (a deployment may rotate one alone).
 *
 * Read at start (refused: a file that cannot be read, empty, of several lines, or given beside a
 * password in REDIS_URL, which would leave the operator guessing which one is sent), and again
 * when it changes or when Redis refuses it (redis-password-reload.ts). Every connection of the
 * process sends the password the file holds when that connection opens: ioredis sends AUTH with
 * `options.password` at every connect and reconnect, and the value there is one RedisPassword
 * object shared by every copy of the options (password-file.ts).
 *
 * A start that Redis refuses the file's password (a rotation half done: the server changed, the
 * file not yet) keeps trying within LAUREL_REDIS_WAIT, the file read again at each refusal
 * (boot.ts waitForRedisOrExit).
 */
export const PASSWORD_FILE = "LAUREL_REDIS_PASSWORD_FILE";

/** The data nodes' password file (password-file.ts holds what it shares with the sentinels' one). */
const REDIS_PASSWORD_FILE: PasswordFile = { variable: PASSWORD_FILE, whose: "Redis password" };

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
  if (passwordPath(REDIS_PASSWORD_FILE, env) === undefined) return [];
  const problems: string[] = [];
  if (!env.REDIS_URL && !env.REDIS_SENTINELS) {
    problems.push(`${PASSWORD_FILE} is set without REDIS_URL or REDIS_SENTINELS (it is the password of the Redis they lead to; the embedded Redis has none)`);
  }
  if (urlHasPassword(env.REDIS_URL)) {
    problems.push(`${PASSWORD_FILE} is set and REDIS_URL holds a password too: give the password in one place (REDIS_URL may keep the user: redis://user@host:port)`);
  }
  const problem = passwordFileProblem(REDIS_PASSWORD_FILE, env);
  if (problem !== null) problems.push(problem);
  return problems;
}

/**
 * The process's RedisPassword, read from LAUREL_REDIS_PASSWORD_FILE the first time (one object
 * for every client of the process: the reload changes it for all); null without the file.
 */
export function redisPassword(env: NodeJS.ProcessEnv = process.env): RedisPassword | null {
  return passwordFromFile(REDIS_PASSWORD_FILE, env);
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
  // The object where ioredis' types say string: see password-file.ts RedisPassword.
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
  return isFilePassword(options.password) ? PASSWORD_FILE : "REDIS_URL";
}
