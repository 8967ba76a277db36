import { readFileSync } from "node:fs";

/**
 * A secret given as a file rather than in the environment (LAUREL_REDIS_PASSWORD_FILE,
 * LAUREL_REDIS_SENTINEL_PASSWORD_FILE, LAUREL_REDIS_TLS_KEY_PASSPHRASE_FILE): a file can be replaced under a running process (a Vault
 * agent, a Kubernetes secret volume) and is not inherited by every child process, nor shown by
 * `ps e` or a container's inspect output as an environment variable is. One rule for all of
 * them, at start and at every reread: the text of the file, the line end(s) an editor or `echo`
 * leaves at its end removed; empty, or more than one line, refused. What is said of one names
 * the variable and the path, never the contents.
 */

/** The secret a file holds: its UTF-8 text without the line ends at its end (`echo pass > file` writes one). */
export function secretText(contents: Buffer): string {
  return contents.toString("utf8").replace(/[\r\n]+$/, "");
}

/**
 * What is wrong with `text` (secretText of the file `name` names, at `path`), or null. A line
 * break inside is refused: no password generator writes one, and a file of several lines is
 * most likely the wrong file (an env file, a whole secret bundle), sent as the password at every
 * connection.
 */
export function secretTextProblem(name: string, path: string, text: string): string | null {
  if (text.length === 0) return `${name} (${path}) is empty`;
  if (/[\r\n]/.test(text)) return `${name} (${path}) holds more than one line (it must hold the secret alone, on one line)`;
  return null;
}

/**
 * The message for a file that cannot be read, with the system's code (ENOENT, EACCES, EISDIR),
 * never its contents. The value is quoted when written as a path (from "/", "./" or "../");
 * otherwise by its length only: a value that names no file and is not written as one is most
 * likely the secret itself, pasted where its file's path belongs (LAUREL_REDIS_PASSWORD_FILE=
 * <the password>, a PEM key's text in LAUREL_REDIS_TLS_KEY), and this message is logged.
 */
export function unreadableFile(name: string, path: string, err: unknown): string {
  const shown = /^\.{0,2}\//.test(path) ? path : `a value of ${[...path].length} characters not written as a path (not shown: is it the secret itself? give its file's path, from / or ./)`;
  return `${name} names a file that cannot be read: ${shown} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
}

/** The secret the file at `path` (named by the variable `name`) holds, or what is wrong with it (never its contents). */
export function readSecretFile(name: string, path: string): { text: string } | { problem: string } {
  let contents: Buffer;
  try {
    contents = readFileSync(path);
  } catch (err) {
    return { problem: unreadableFile(name, path, err) };
  }
  const text = secretText(contents);
  const problem = secretTextProblem(name, path, text);
  return problem === null ? { text } : { problem };
}
