/**
 * What a log line, an error body or a command's output must never carry: the credentials Laurel
 * holds (README: Operations, Logs). Most places never see one (a Redis address is logged as
 * host:port, redisAddress; tenant keys are held as digests; a tenant file's credential is shown
 * by its length). One source of them reaches errors Laurel does not write: ioredis attaches the
 * command an error answers to the error itself (`command: { name, args }`), and the AUTH it sends
 * on every connection carries REDIS_URL's user and password as its arguments. A password changed
 * under a running process (a rotation, an ACL edit) refuses that AUTH on the next reconnect, and
 * ioredis rejects every command waiting with that same error: the request's "request failed", the
 * stream worker's retry line, a job's failure, all logged with `err`, which pino writes out whole,
 * printed the password in clear.
 */

/** Redis commands whose arguments hold credentials: AUTH [user] password, HELLO ... AUTH user password. */
const CREDENTIAL_COMMANDS = new Set(["auth", "hello"]);

/** How deep redactCredentials looks: an ioredis error's command is at 1, a wrapped error's at 2 or 3. */
const MAX_DEPTH = 6;

/** What stands in for a credential's arguments. */
export const REDACTED = "[redacted]";

function isCredentialCommand(value: unknown): value is { name: string; args: unknown } {
  if (typeof value !== "object" || value === null) return false;
  const { name, args } = value as { name?: unknown; args?: unknown };
  return typeof name === "string" && CREDENTIAL_COMMANDS.has(name.toLowerCase()) && args !== undefined;
}

/**
 * `value` (an error, or pino's serialization of one), its credential commands' arguments
 * replaced by REDACTED, in its own fields and those of the errors it holds (pino's
 * `aggregateErrors`, a wrapping error's field holding ioredis' error), down to MAX_DEPTH objects
 * (an error is not a deep structure; a field holding a client is not walked through). Mutates in
 * place and returns `value`: pino's serialization shares the error's `command` object, and an
 * ioredis error is the same object for every command it rejects, so the original loses the
 * credentials too.
 */
export function redactCredentials<T>(value: T, seen: Set<object> = new Set(), depth = 0): T {
  if (typeof value !== "object" || value === null || seen.has(value) || depth > MAX_DEPTH) return value;
  seen.add(value);
  for (const key of Object.keys(value)) {
    const field = (value as Record<string, unknown>)[key];
    if (key === "command" && isCredentialCommand(field)) {
      field.args = REDACTED;
    } else redactCredentials(field, seen, depth + 1);
  }
  return value;
}

/**
 * A webhook endpoint's URL as an error about it shows it (a tenant file refused at start, by
 * check-config): its scheme and host, what follows them by its length only. Receivers take
 * credentials in a URL's userinfo, its query string (`?token=`) and its path (a chat service's
 * incoming-webhook URL is a secret as a whole), and the start's error is logged. What a URL is
 * refused for is at its start (the scheme, the host right after the //) or said by the message
 * (whitespace); a userinfo is never shown, written right or not. The text needs not parse.
 */
export function urlForDisplay(text: string): string {
  const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/*/.exec(text)?.[0];
  if (scheme === undefined) return `a text of ${[...text].length} characters (not shown: a URL may hold a credential)`;
  // The userinfo ends at the last @ before the path, query or fragment; the password may hold a
  // "/" written unencoded, so the @ is looked for up to the first ? or #.
  const beforeQuery = text.slice(scheme.length).split(/[?#]/, 1)[0]!;
  const at = beforeQuery.lastIndexOf("@");
  const afterUserinfo = at >= 0 ? beforeQuery.slice(at + 1) + text.slice(scheme.length + beforeQuery.length) : text.slice(scheme.length);
  const host = /^[^/?#]*/.exec(afterUserinfo)![0];
  const rest = afterUserinfo.slice(host.length);
  return `"${scheme}${at >= 0 ? "<userinfo not shown>@" : ""}${host}"${rest ? ` then ${[...rest].length} characters not shown (a path or query may hold a credential)` : ""}`;
}
