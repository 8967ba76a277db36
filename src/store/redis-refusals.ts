import type { ErrorCode } from "../domain/errors.js";

/**
 * Redis refusing a command before running it, by the first word of its error: every write (a
 * write command, a script that may write, FUNCTION LOAD) for the first four causes, every command
 * while it loads or a script runs too long, or while it refuses (or lacks) the credentials. Not the request's fault, and the same for every
 * request until the cause passes or an operator acts: a 503 that says nothing was recorded (the
 * SDK retries it), and one log line per 30 s for each cause (Router.logRefusal) rather than a
 * 500 with a stack per request. (A script run by EVAL meets the first four at its first write,
 * before any has run.)
 */
export const REDIS_REFUSALS = [
  // At its maxmemory, with the noeviction policy the README asks for: "OOM command not allowed when used memory > 'maxmemory'".
  { prefix: "OOM ", cause: "out-of-memory", write: "REDIS_OUT_OF_MEMORY", read: "REDIS_OUT_OF_MEMORY_READ", log: "redis is out of memory (maxmemory): writes are refused" },
  // A replica (a failover demoted the server the connection leads to; the client reconnects: redis-client.ts).
  { prefix: "READONLY", cause: "read-only", write: "REDIS_READ_ONLY", read: "REDIS_READ_ONLY_READ", log: "redis is a read-only replica: writes are refused (reconnecting; REDIS_URL must lead to the primary)" },
  // Its last AOF write or RDB snapshot failed (a full disk): "MISCONF Errors writing to the AOF file: No space left on device".
  { prefix: "MISCONF", cause: "disk-error", write: "REDIS_DISK_ERROR", read: "REDIS_DISK_ERROR_READ", log: "redis cannot write to its disk (MISCONF): writes are refused until it can" },
  // min-replicas-to-write set and too few replicas in sync: "NOREPLICAS Not enough good replicas to write."
  { prefix: "NOREPLICAS", cause: "too-few-replicas", write: "REDIS_TOO_FEW_REPLICAS", read: "REDIS_TOO_FEW_REPLICAS_READ", log: "redis has too few replicas in sync (min-replicas-to-write): writes are refused" },
  // Every command, reads too, while it loads its dataset: "LOADING Redis is loading the dataset in memory".
  { prefix: "LOADING", cause: "loading", write: "REDIS_LOADING", read: "REDIS_LOADING_READ", log: "redis is loading its data: requests are refused" },
  // Every command while a script runs past busy-reply-threshold: "BUSY Redis is busy running a script. ...".
  { prefix: "BUSY", cause: "busy", write: "REDIS_BUSY", read: "REDIS_BUSY_READ", log: "redis is busy running a script: requests are refused" },
  // Every command after a reconnect whose AUTH Redis refused: REDIS_URL's password changed on the
  // server (a rotation, an ACL edit) or its user disabled. ioredis rejects the commands it held
  // for the connection with the AUTH's error ("WRONGPASS invalid username-password pair or user is
  // disabled."); none was sent. The client reconnects and authenticates again, so requests pass
  // again once the server accepts REDIS_URL's credentials (or REDIS_URL is changed and the process
  // restarted), or with LAUREL_REDIS_PASSWORD_FILE once the file holds the password the server
  // takes (read again at the refusal and when it changes: redis-password-reload.ts).
  { prefix: "WRONGPASS", cause: "credentials-refused", write: "REDIS_CREDENTIALS_REFUSED", read: "REDIS_CREDENTIALS_REFUSED_READ", log: "redis refused the credentials in REDIS_URL (WRONGPASS: its password changed, or its user was disabled? with LAUREL_REDIS_PASSWORD_FILE, the file's password): requests are refused until it accepts them" },
  // Every command on a connection that has not authenticated, to a Redis that asks for a password
  // REDIS_URL does not give (requirepass set on a running server): "NOAUTH Authentication required.".
  { prefix: "NOAUTH", cause: "authentication-required", write: "REDIS_AUTHENTICATION_REQUIRED", read: "REDIS_AUTHENTICATION_REQUIRED_READ", log: "redis asks for a password and REDIS_URL gives none (NOAUTH): requests are refused until it is given" },
] as const satisfies readonly { prefix: string; cause: string; write: ErrorCode; read: ErrorCode; log: string }[];

export type RedisRefusal = (typeof REDIS_REFUSALS)[number]["cause"];

/** The refusal an error of Redis is, by its first word; undefined for any other error. */
export function redisRefusalOf(err: unknown): (typeof REDIS_REFUSALS)[number] | undefined {
  if (!(err instanceof Error)) return undefined;
  return REDIS_REFUSALS.find((refusal) => err.message.startsWith(refusal.prefix));
}

/**
 * What a NOPERM refused, as advice: a command ("may not run 'xadd' (NOPERM, its ACL); allow it";
 * FUNCTION, which some managed services forbid, has a way around: LAUREL_LUA=eval), or keys or
 * channels outside the user's patterns. Null for any other error.
 */
export function noPermission(message: string): string | null {
  if (!/^NOPERM\b/.test(message)) return null;
  const command = /'([^']+)' command/.exec(message)?.[1];
  if (command?.startsWith("function|")) return `may not run '${command.replace("|", " ")}' (NOPERM, its ACL); allow it (+function), or set LAUREL_LUA=eval to run the scripts with EVALSHA`;
  if (command !== undefined) return `may not run '${command.replace("|", " ")}' (NOPERM, its ACL); allow it (README, Operations)`;
  if (/\bkeys?\b/.test(message)) return "may not use some of Laurel's keys (NOPERM, its ACL's key patterns); allow ~* (README, Operations)";
  if (/\bchannel/.test(message)) return "may not use some channels (NOPERM, its ACL's channel patterns); allow &* (README, Operations)";
  return `was refused a command (${message.split("\n")[0]!.slice(0, 120)}; its ACL) (README, Operations)`;
}
