import type { ConnectionOptions, TLSSocket } from "node:tls";
import type { Redis } from "ioredis";
import { isAuthError } from "./redis-client.js";
import { PASSWORD_FILE, passwordSetting } from "./redis-password.js";
import { noPermission } from "./redis-refusals.js";
import { redisAddress, SENTINEL_PASSWORD_FILE, sentinelAuthRefusal, sentinelPasswordSetting } from "./redis-sentinel.js";
import { askClientCertificate, clientCertificateRefusal, tlsCertificateProblem, tlsRefusal, type TlsRefusal } from "./redis-tls.js";

/**
 * What a process's first connection to Redis can fail by that waiting does not mend, told apart
 * from a Redis that does not answer (yet): credentials refused, a server certificate not
 * accepted, a client certificate refused or required. One set of rules and lines for the start
 * (boot.ts waitForRedisOrExit, which exits 1 on them) and `npm run check-config` (exit 1 on them,
 * 2 for a Redis not answering), so that both say the same.
 *
 * One refusal waiting may mend: a password from a file (LAUREL_REDIS_PASSWORD_FILE,
 * LAUREL_REDIS_SENTINEL_PASSWORD_FILE) refused by a server whose password was rotated before the
 * file was. The file is read again at each refusal (redis-password-reload.ts), so a start during
 * such a rotation goes on once the file is written: the start waits for it within
 * LAUREL_REDIS_WAIT, and says the refusal only when that passes.
 */

/** A refusal: its line (naming the address, the cause and what to do), and the error it was read from. */
export interface FirstConnectionRefusal {
  line: string;
  err: string;
  /**
   * The password file whose password was refused, read again at each refusal (a rotation half
   * done: the start waits for it); absent for a refusal waiting does not mend.
   */
  rereadFile?: typeof PASSWORD_FILE | typeof SENTINEL_PASSWORD_FILE;
}

export interface FirstConnectionWatch {
  /**
   * After a command on the client failed with `err` (before its first answer): the refusal it
   * is, or null (not answering, or not yet known). May ask the server once over TLS 1.2
   * (askClientCertificate), and through sentinels over TLS each sentinel at every call
   * (tlsRefusal), within ASK_CLIENT_CERTIFICATE_MS.
   */
  refusal(err: unknown): Promise<FirstConnectionRefusal | null>;
  /**
   * What to check when Redis did not answer (notAnsweringAdvice), and, through sentinels, the
   * refusal of the password in REDIS_SENTINEL_PASSWORD by the last sentinel asked (with the
   * sentinels ioredis asks each again and again: the client's command waits, saying nothing).
   */
  notAnswering(): string;
  /** Removes the watch's listeners from the client. */
  stop(): void;
}

/** How long the question over TLS 1.2 waits for the server's answer: a bound, not a budget (it answers within its handshake). */
const ASK_CLIENT_CERTIFICATE_MS = 5_000;

/** The setting a line tells the operator to check: REDIS_SENTINELS through sentinels, else REDIS_URL. */
export function redisSetting(redis: Redis): "REDIS_SENTINELS" | "REDIS_URL" {
  return redis.options.sentinels?.length ? "REDIS_SENTINELS" : "REDIS_URL";
}

/**
 * What to check when Redis did not answer: the setting, and over TLS the suspects a silence
 * hides. A rediss:// URL on a port that speaks plain Redis is no error but a silence (the server
 * waits for the rest of a command that never ends), so the TLS is named. Through sentinels over
 * TLS, the refusals of some of them (every one refusing stops the start: refusal) hide behind
 * the others' silence, so those are named.
 */
function notAnsweringAdvice(redis: Redis): string {
  const setting = redisSetting(redis);
  const tlsHint = !redis.options.tls
    ? ""
    : setting === "REDIS_URL"
      ? " (a rediss:// URL: does that port speak TLS?)"
      : " (over TLS: a sentinel that refuses the client certificate, LAUREL_REDIS_TLS_CERT, or asks for one, or whose certificate is not accepted, looks the same)";
  return `check ${setting}${tlsHint}`;
}

/**
 * Starts watching `redis`'s connection events, before its first command. A rejected certificate
 * reaches the client's "error" listeners only (the command fails with ioredis' own "Connection
 * is closed." or a caller's bound, saying nothing of it), so they are read here.
 */
export function watchFirstConnection(redis: Redis): FirstConnectionWatch {
  const address = redisAddress(redis.options);
  const setting = redisSetting(redis);
  const tlsOptions: ConnectionOptions = typeof redis.options.tls === "object" ? redis.options.tls : {};
  const seen: { certificateProblem: string | null; clientRefusal: string | null; handshake: { host: string; port: number } | null; failedAfterHandshake: boolean } = {
    certificateProblem: null,
    clientRefusal: null,
    handshake: null,
    failedAfterHandshake: false,
  };
  // The last connection's AUTH refused (WRONGPASS): ioredis fails the commands waiting with it,
  // but one sent while the client waits to reconnect (up to 2 s) meets its caller's bound first.
  // Cleared by any other error, and once a connection is ready (not at the next one's "connect",
  // before its AUTH is answered: a bound met then would have said "not reachable").
  let passwordRefused: string | null = null;
  const onError = (err: unknown): void => {
    seen.certificateProblem ??= tlsCertificateProblem(err);
    seen.clientRefusal ??= clientCertificateRefusal(err);
    // A connection's error after its handshake is its end, as its close is; it comes first, and
    // alone until the close's own turn of the event loop (onClose below): a command's bound met
    // in between read the alert without asking (refusal), and said another code.
    if (handshakeOpen) seen.failedAfterHandshake = true;
    passwordRefused = isAuthError(err) && err.message.startsWith("WRONGPASS") ? err.message : null;
  };
  // A TLS handshake that went through (ioredis' "connect" is TLS's secureConnect) and a
  // connection that failed (an error) or closed after it, before Redis answered: over TLS 1.3,
  // how a refused client certificate shows (an alert, mostly a reset), asked about below. Only then: a Redis that answers but is
  // not ready (loading) is not asked. The address is the client's own; through sentinels, the
  // primary's as the socket tells it, which it often no longer does by then: such a process goes
  // by the alert alone.
  let handshakeOpen = false;
  const onConnect = (): void => {
    const stream = redis.stream as Partial<TLSSocket> | undefined;
    if (!stream?.encrypted) return;
    handshakeOpen = true;
    const sentinels = Boolean(redis.options.sentinels?.length);
    const host = sentinels ? stream.remoteAddress : redis.options.host;
    const port = sentinels ? stream.remotePort : redis.options.port;
    if (host && port) seen.handshake = { host, port };
  };
  const onClose = (): void => {
    if (handshakeOpen) seen.failedAfterHandshake = true;
    handshakeOpen = false;
  };
  const onReady = (): void => {
    handshakeOpen = false;
    passwordRefused = null;
  };
  // The last sentinel asked refused the password (ioredis' "sentinelError", then the next
  // sentinel, then all of them again); cleared by any other failure of a sentinel, and once a
  // sentinel named the primary (the client's "connect").
  let sentinelRefused: ReturnType<typeof sentinelAuthRefusal> = null;
  const onSentinelError = (err: unknown): void => {
    sentinelRefused = sentinelAuthRefusal(err);
  };
  const onAnyConnect = (): void => {
    sentinelRefused = null;
  };
  /** LAUREL_REDIS_PASSWORD_FILE's password refused: WRONGPASS, the one a rotation half done may mend. */
  const filePasswordRefusal = (code: string, err: string): FirstConnectionRefusal => ({
    line: `Redis at ${address} refused the password in ${PASSWORD_FILE} (${code}); check it, and the user in REDIS_URL`,
    err,
    ...(code === "WRONGPASS" ? { rereadFile: PASSWORD_FILE } : {}),
  });
  /** The last sentinel's refusal as a line ("Sentinel at 10.0.0.5:26379 refused the password in ..."), or null. */
  const sentinelRefusalLine = (): string | null => {
    if (sentinelRefused === null) return null;
    const setting = sentinelPasswordSetting(redis.options);
    const sentinel = `Sentinel at ${sentinelRefused.sentinel}`;
    if (setting === null) return `${sentinel} asks for a password (${sentinelRefused.code}); give it in ${SENTINEL_PASSWORD_FILE} or REDIS_SENTINEL_PASSWORD`;
    return `${sentinel} refused the password in ${setting} (${sentinelRefused.code}); check it`;
  };
  let asked = false;
  redis.on("error", onError);
  redis.on("connect", onConnect);
  redis.on("close", onClose);
  redis.on("ready", onReady);
  redis.on("sentinelError", onSentinelError);
  redis.on("connect", onAnyConnect);
  return {
    async refusal(err) {
      // Refused credentials do not get better by waiting. (The command's own error: ioredis
      // fails the commands waiting for the connection with Redis's refusal itself.)
      // A user whose ACL forbids a command the first connection sends (PING) got in: its credentials are right.
      const forbidden = err instanceof Error ? noPermission(err.message) : null;
      if (forbidden !== null) return { line: `Redis at ${address} accepted the credentials in REDIS_URL, but its user ${forbidden}`, err: (err as Error).message };
      if (isAuthError(err)) {
        const code = err.message.split(" ")[0];
        if (passwordSetting(redis.options) === "REDIS_URL") return { line: `Redis at ${address} refused the credentials in REDIS_URL (${code}); check the user and password`, err: err.message };
        return filePasswordRefusal(code!, err.message);
      }
      // The command met its bound between two refused connections: the refusal stands.
      if (passwordRefused !== null && passwordSetting(redis.options) === PASSWORD_FILE) return filePasswordRefusal("WRONGPASS", passwordRefused);
      // A sentinel refused the password of its file: the client's command waited (the sentinels
      // asked again and again), and the file is read again at each refusal. (Refused in
      // REDIS_SENTINEL_PASSWORD, the start waits as for sentinels that do not answer, as it always
      // did, and names the refusal with the rest: notAnswering.)
      const sentinelLine = sentinelRefusalLine();
      if (sentinelLine !== null && sentinelPasswordSetting(redis.options) === SENTINEL_PASSWORD_FILE) {
        return { line: sentinelLine, err: sentinelRefused!.code, rereadFile: SENTINEL_PASSWORD_FILE };
      }
      // Nor does a certificate not trusted.
      const { certificateProblem } = seen;
      if (certificateProblem !== null) {
        return {
          line: `Redis at ${address}: TLS certificate not accepted (${certificateProblem}); trust the server's CA with LAUREL_REDIS_TLS_CA=<path to the CA's PEM> (or NODE_EXTRA_CA_CERTS), or check the host name in ${setting} against the certificate`,
          err: certificateProblem,
        };
      }
      // Nor does a client certificate refused (or missing). Over TLS 1.3 the refusal's alert is
      // mostly lost to a reset (redis-tls.ts askClientCertificate), so after a connection failed
      // or closed right after its handshake the server is asked once, over TLS 1.2, where its
      // answer is certain: one answer whether an alert came through or not, and whether the
      // connection's close was seen yet or not. The alert stands when the question gets none (a
      // server without TLS 1.2).
      if (seen.handshake !== null && seen.failedAfterHandshake && !asked) {
        asked = true;
        seen.clientRefusal = (await askClientCertificate(seen.handshake.host, seen.handshake.port, tlsOptions, ASK_CLIENT_CERTIFICATE_MS)) ?? seen.clientRefusal;
      }
      const { clientRefusal } = seen;
      if (clientRefusal !== null) return { line: clientRefusalLine(`Redis at ${address}`, clientRefusal, tlsOptions), err: clientRefusal };
      // Through sentinels over TLS ioredis keeps their connection errors to itself: each is asked
      // here as ioredis would connect to it. Only when every one refuses, for the same cause or
      // not: one that takes the process is asked for the primary as usual.
      const { sentinels, sentinelTLS } = redis.options;
      if (sentinels?.length && redis.options.enableTLSForSentinelMode && typeof sentinelTLS === "object") {
        const refusals = await Promise.all(sentinels.map((s) => tlsRefusal(s.host ?? "localhost", s.port ?? 26379, sentinelTLS, ASK_CLIENT_CERTIFICATE_MS)));
        if (refusals.every((r) => r !== null)) {
          const first = sentinels[0]!;
          const more = sentinels.length > 1 ? ` (and the ${sentinels.length - 1} other${sentinels.length > 2 ? "s" : ""} in REDIS_SENTINELS alike)` : "";
          return sentinelRefusal(`Sentinel at ${first.host ?? "localhost"}:${first.port ?? 26379}${more}`, refusals[0]!, sentinelTLS);
        }
      }
      return null;
    },
    notAnswering() {
      const sentinelLine = sentinelRefusalLine();
      return `${notAnsweringAdvice(redis)}${sentinelLine === null ? "" : `; ${sentinelLine}`}`;
    },
    stop() {
      redis.removeListener("error", onError);
      redis.removeListener("connect", onConnect);
      redis.removeListener("close", onClose);
      redis.removeListener("ready", onReady);
      redis.removeListener("sentinelError", onSentinelError);
      redis.removeListener("connect", onAnyConnect);
    },
  };
}

/** The line for a client certificate `server` refused (or required: none given). */
function clientRefusalLine(server: string, code: string, tls: ConnectionOptions): string {
  return tls.cert
    ? `${server} refused the TLS client certificate in LAUREL_REDIS_TLS_CERT (${code}); give one signed by a CA the server trusts (its tls-ca-cert-file), not expired`
    : `${server} requires a TLS client certificate (${code}: its tls-auth-clients); set LAUREL_REDIS_TLS_CERT and LAUREL_REDIS_TLS_KEY to a certificate signed by a CA the server trusts (its tls-ca-cert-file) and its key`;
}

/** A sentinel's refusal (tlsRefusal) as the start says it. */
function sentinelRefusal(sentinel: string, refusal: TlsRefusal, tls: ConnectionOptions): FirstConnectionRefusal {
  if ("client" in refusal) return { line: clientRefusalLine(sentinel, refusal.client, tls), err: refusal.client };
  return {
    line: `${sentinel}: TLS certificate not accepted (${refusal.certificate}); trust the sentinel's CA with LAUREL_REDIS_TLS_CA=<path to the CA's PEM> (or NODE_EXTRA_CA_CERTS), or check the host in REDIS_SENTINELS against the certificate`,
    err: refusal.certificate,
  };
}
