import { performance } from "node:perf_hooks"; // not the global, an accessor (see store/redis-script.ts)
import type { HttpRequest, HttpResponse, TemplatedApp } from "uWebSockets.js";
import type { Logger } from "pino";
import { ErrorCodes, LaurelError } from "../domain/errors.js";
import { REDIS_REFUSALS, redisRefusalOf, type RedisRefusal } from "../store/redis-refusals.js";
import { pastDrainLimit, readBody } from "./body.js";
import { RawQuery, type Query } from "./query.js";
import { ABORTED, RequestStats } from "./request-stats.js";
import { stringifyReply } from "./raw-json.js";
import { errorJson, sendJson, textBytes } from "./respond.js";
import { LogThrottle } from "../log-throttle.js";
import { ReadDeadline, type WaitingRead } from "./read-deadline.js";
import { CONTENT_LENGTH, framingRefusal } from "./framing.js";
import { deadline } from "../deadline.js";
import { isRedisUnreachable } from "../store/redis-unreachable.js";

/** What a handler sees: everything read synchronously from uWS before the first await. */
export interface ApiRequest {
  /** Path parameters, percent-decoded. */
  params: string[];
  query: Query;
  apiKey: string;
  idempotencyKey: string | null;
  /** The request body as UTF-8 text (null for methods without one). */
  body: string | null;
}

export interface ApiReply {
  status: number;
  body: unknown;
  /** Sends `body` (a string) as is with this type, instead of as JSON (GET /metrics). */
  contentType?: string;
}

export type Handler = (req: ApiRequest) => Promise<ApiReply> | ApiReply;

export interface RouterOptions {
  maxBodyBytes: number;
  logger: Logger;
  /** How long a read (GET) waits for Redis before it is answered 503 (read-deadline.ts); 0: for as long as it takes. */
  readTimeoutMs?: number;
}

type Method = "get" | "post" | "put" | "patch" | "del";
/** What uWS serves: the routes' methods, and HEAD, which every GET route also answers. */
type ServedMethod = Method | "head";

function decodeParam(raw: string): string {
  // uWS hands over a path's bytes decoded leniently, each sequence that is not UTF-8 as U+FFFD:
  // "a\xff" and "a\xfe" would both be the id "a\uFFFD" (a body with such bytes is refused, and so
  // is %FF). A raw U+FFFD cannot be told from them, so it must come percent-encoded, as URL
  // libraries send every character outside ASCII.
  if (raw.includes("\uFFFD")) throw new LaurelError("INVALID_PATH", "Path is not valid UTF-8 (percent-encode its characters outside ASCII)");
  // Without a "%" there is nothing to decode (decodeURIComponent returns the same text, for ~0.25 µs).
  if (!raw.includes("%")) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    // decodeURIComponent throws alike for a "%" without two hex digits and for escapes whose
    // bytes are not UTF-8 (%FF): the second was called malformed, which it is not.
    if (/%(?![0-9A-Fa-f]{2})/.test(raw)) throw new LaurelError("INVALID_PATH", "Malformed percent-encoding in path");
    throw new LaurelError("INVALID_PATH", "Path is not valid UTF-8 (a percent-encoded sequence is not UTF-8)");
  }
}

/** Why a request failed, as its answer says it: the client's error, Redis's state, or a fault of Laurel's (logged). */
export interface ErrorAnswer {
  status: number;
  message: string;
  kind: "request" | "unreachable" | "refused" | "internal";
  /** For kind "refused": why Redis refused the command (src/store/redis-refusals.ts). */
  cause?: RedisRefusal;
}

/**
 * The answer to an error a handler threw: a LaurelError as it says, Redis unreachable or refusing
 * writes as a 503 that says whether a write may have run (a read's says to retry), anything else
 * a 500. One rule for the router and for a batch, which answers each event's failure in its body.
 */
export function errorAnswer(err: unknown, read: boolean): ErrorAnswer {
  if (err instanceof LaurelError) return { status: err.status, message: err.message, kind: "request" };
  // Redis unreachable (store/redis-unreachable.ts): whether a write ran is unknown, so the answer
  // says so; 503 rather than 500 because nothing is wrong with the request, and the official SDK
  // retries either (trophy-compat §1.4).
  if (isRedisUnreachable(err)) return { ...ErrorCodes[read ? "REDIS_UNREACHABLE_READ" : "REDIS_UNREACHABLE"], kind: "unreachable" };
  const refusal = redisRefusalOf(err);
  if (refusal) return { ...ErrorCodes[read ? refusal.read : refusal.write], kind: "refused", cause: refusal.cause };
  return { status: 500, message: "Internal server error", kind: "internal" };
}

/** What one route needs beyond the router's defaults. */
export interface RouteOptions {
  /** This route's body limit, instead of the router's (a batch of events). */
  maxBodyBytes?: number;
  /** A read that bounds its own wait for Redis (GET /healthz says "degraded" in its own body): no read deadline. */
  ownDeadline?: boolean;
}

const BODY_METHODS = new Set<Method>(["post", "put", "patch"]);
const METHOD_NAMES: Record<ServedMethod, string> = { get: "GET", head: "HEAD", post: "POST", put: "PUT", patch: "PATCH", del: "DELETE" };
/** A HEAD's answer: the GET's status and headers, no body (RFC 9110 §9.3.2). */
const HEADERS_ONLY = { headersOnly: true } as const;

/** A uWS pattern ("/v1/users/:id/points/:key", "/admin/*") as a regex of the paths it matches. */
function patternRegex(pattern: string): RegExp {
  const parts = pattern.split("/").map((part) => (part.startsWith(":") ? "[^/]+" : part === "*" ? ".*" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")));
  return new RegExp(`^${parts.join("/")}$`);
}

// Header names as bytes, where a string name costs a UTF-8 conversion (a Utf8Value) on every
// getHeader (respond.ts textBytes says why an ArrayBuffer).
const X_API_KEY = textBytes("x-api-key");
const IDEMPOTENCY_KEY = textBytes("idempotency-key");
const CONTENT_TYPE = textBytes("content-type");
const CONTENT_ENCODING = textBytes("content-encoding");
const JSON_TYPE = /^application\/(?:[a-z0-9.+-]*\+)?json\s*(?:;|$)/i;
// Bodies are read as UTF-8 (JSON's only interchange encoding, RFC 8259 §8.1): a declared charset
// must say so, or the body would be decoded as something it is not.
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)/i;
const UTF8 = /^utf-?8$/i;
// Bodies are read as sent: a compressed one (Content-Encoding: gzip) would reach the JSON parser
// as its compressed bytes and be refused as not UTF-8 or not JSON, which hides the cause. RFC 9110
// §15.5.16: a content coding the server does not take is a 415.
const IDENTITY = /^\s*identity\s*$/i;

/**
 * Registers a route on uWS with the lifetime rules of docs/index.d.ts applied once, here:
 * onAborted before anything async, request data copied synchronously, one corked write, and
 * every error turned into `{"error": ...}` with its status.
 */
export class Router {
  private draining = false;
  private drained: (() => void) | null = null;
  /** Every registered pattern, as a regex of the paths it matches, with its methods (fallback's 405). */
  private readonly routes = new Map<string, { regex: RegExp; methods: Set<string> }>();
  private readonly refusalLogs = new Map(REDIS_REFUSALS.map((r) => [r.cause, { throttle: new LogThrottle(), message: r.log }]));
  /** Answers per route, status and latency (GET /metrics). */
  readonly stats = new RequestStats();
  /** Answers the reads Redis keeps waiting past opts.readTimeoutMs (null: reads wait). */
  private readonly readDeadline: ReadDeadline | null;
  private readonly readTimeoutLog = new LogThrottle();

  constructor(private readonly app: TemplatedApp, private readonly opts: RouterOptions) {
    const bound = opts.readTimeoutMs ?? 0;
    this.readDeadline = bound > 0 ? new ReadDeadline(bound, (count) => this.readsTimedOut(count)) : null;
  }

  /** Stops the read deadline's sweep (the app's close, after the drain). */
  close(): void {
    this.readDeadline?.stop();
  }

  /** Reads answered 503 by the read deadline: counted (GET /metrics), and said once per 30 s. */
  private readsTimedOut(count: number): void {
    this.stats.readTimeouts += count;
    this.readTimeoutLog.run((unlogged) =>
      this.opts.logger.warn({ reads: count, unlogged, boundMs: this.readDeadline!.boundMs }, "Redis did not answer reads in time: answered 503 (a stalled Redis? LAUREL_READ_TIMEOUT)"),
    );
  }

  /**
   * For a graceful stop, after the listen socket is closed: waits until every request already
   * taken is answered (or `timeoutMs` passes), so that no client loses the answer to a write
   * Redis applies. Requests still arriving on open keep-alive connections meanwhile are served
   * and answered with `Connection: close`, so their clients move to another instance.
   * It waits `lingerMs` at least (bounded by `timeoutMs`), requests in flight or not: a
   * connection accepted just before the listen socket closed may not have sent its first request
   * yet (uWS tells nothing of connections before their requests), and closing it then resets a
   * request its client has already sent, which no client may safely retry.
   */
  drain(timeoutMs: number, lingerMs = 0): Promise<number> {
    this.draining = true;
    return new Promise((resolve) => {
      // Both run a turn after their time (deadline.ts): a process held up past the linger reads
      // the requests that arrived meanwhile, and serves them, before it decides it is idle.
      const timers: { cancel(): void }[] = [];
      const end = (unanswered: number): void => {
        for (const timer of timers) timer.cancel();
        this.drained = null;
        resolve(unanswered);
      };
      timers.push(deadline(timeoutMs, () => end(this.stats.inFlight)));
      // Once the linger is over, it ends as soon as nothing is in flight: at once, or when the last request ends (settle).
      const endWhenIdle = (): void => {
        this.drained = () => end(0);
        if (this.stats.inFlight === 0) end(0);
      };
      if (lingerMs <= 0) endWhenIdle();
      else if (lingerMs < timeoutMs) timers.push(deadline(lingerMs, endWhenIdle));
    });
  }

  private settle(): void {
    this.stats.inFlight--;
    if (this.stats.inFlight === 0) this.drained?.();
  }

  /**
   * A route. A GET route answers HEAD too, as the GET with no body (RFC 9110 §9.1: a server
   * supports HEAD wherever it supports GET), so that a monitor checking `HEAD /healthz` (uptime
   * services do by default) sees its status rather than a 405.
   */
  add(method: Method, pattern: string, paramCount: number, handler: Handler, options: RouteOptions = {}): void {
    let route = this.routes.get(pattern);
    if (!route) this.routes.set(pattern, (route = { regex: patternRegex(pattern), methods: new Set() }));
    route.methods.add(METHOD_NAMES[method]);
    this.serve(method, pattern, paramCount, handler, options);
    if (method === "get") {
      route.methods.add(METHOD_NAMES.head);
      this.serve("head", pattern, paramCount, handler, options);
    }
  }

  private serve(method: ServedMethod, pattern: string, paramCount: number, handler: Handler, options: RouteOptions): void {
    const withBody = BODY_METHODS.has(method as Method);
    // A read changes nothing either way, so its 503 does not speak of retrying a write.
    const read = method === "get" || method === "head";
    const extras = method === "head" ? HEADERS_ONLY : undefined;
    const readBound = read && !options.ownDeadline ? this.readDeadline : null;
    const maxBodyBytes = options.maxBodyBytes ?? this.opts.maxBodyBytes;
    const stats = this.stats.route(METHOD_NAMES[method], pattern);
    this.app[method](pattern, (res: HttpResponse, req: HttpRequest) => {
      const arrived = performance.now();
      let aborted = false;
      let settled = false;
      // This read's place in the read deadline's list, while it waits (run).
      let waiting: WaitingRead | null = null;
      // Redis answered this read: its handler's answer (a read waits for Redis to have one), or
      // Redis's refusal. Not when its client went away, nor when its handler failed on the
      // request (a bad key, an unknown user id or system: thrown before any call to Redis, and
      // answered at once even while Redis is stalled) or for want of Redis.
      let redisAnswered = false;
      this.stats.inFlight++;
      const end = (status: number | typeof ABORTED): void => {
        settled = true;
        // A read Redis answered (not one the deadline answered first: that one is unlinked
        // already) says Redis answers again.
        if (waiting !== null) readBound!.untrack(waiting, redisAnswered);
        this.settle();
        stats.record(status, performance.now() - arrived);
      };
      res.onAborted(() => {
        aborted = true;
        if (!settled) end(ABORTED);
      });
      // Once: a read the deadline answered (or whose client went away) still gets its handler's
      // answer later, which must not be written after the first.
      const finish = (status: number, json: string, close = false, contentType?: string): void => {
        if (settled) return;
        if (!aborted) sendJson(res, status, json, close || this.draining, contentType, extras);
        end(status);
      };
      const fail = (err: unknown): void => {
        const answer = errorAnswer(err, read);
        // Redis unreachable is not logged per request: the client's connection log says it once per outage (main.ts).
        if (answer.kind === "refused") redisAnswered = true;
        this.logFailure(err, answer, { path: pattern }, "request failed");
        finish(answer.status, errorJson(answer.message));
      };
      // The body's framing first (framing.ts): a refused one closes the connection, whose
      // later bytes cannot be told apart from the body.
      const contentLength = req.getHeader(CONTENT_LENGTH);
      const refusal = framingRefusal(req, contentLength);
      if (refusal !== null) {
        finish(refusal.status, refusal.body, true);
        return;
      }
      let request: ApiRequest;
      try {
        const params: string[] = [];
        for (let i = 0; i < paramCount; i++) params.push(decodeParam(req.getParameter(i)));
        request = {
          params,
          query: new RawQuery(req.getQuery() ?? ""),
          apiKey: req.getHeader(X_API_KEY),
          idempotencyKey: withBody ? req.getHeader(IDEMPOTENCY_KEY) || null : null,
          body: null,
        };
      } catch (err) {
        fail(err);
        return;
      }
      const run = (): void => {
        try {
          const answer = handler(request);
          // Only a handler that waits (for Redis) is bounded: one that answers at once (a points
          // system, its levels) has nothing to time out, and its answer says nothing of Redis.
          if (readBound !== null && answer instanceof Promise) waiting = readBound.track(fail, arrived);
          Promise.resolve(answer).then((reply) => {
            redisAnswered = true;
            if (reply.contentType) finish(reply.status, reply.body as string, false, reply.contentType);
            else finish(reply.status, stringifyReply(reply.body));
          }, fail);
        } catch (err) {
          fail(err);
        }
      };
      if (!withBody) {
        run();
        return;
      }
      const contentType = req.getHeader(CONTENT_TYPE);
      if (contentType !== "" && !JSON_TYPE.test(contentType)) {
        finish(415, errorJson("Content-Type must be application/json"), true);
        return;
      }
      const charset = contentType.length > 16 ? CHARSET.exec(contentType) : null;
      if (charset !== null && !UTF8.test(charset[1]!)) {
        finish(415, errorJson("Content-Type charset must be utf-8"), true);
        return;
      }
      const encoding = req.getHeader(CONTENT_ENCODING);
      if (encoding !== "" && !IDENTITY.test(encoding)) {
        finish(415, errorJson(`Content-Encoding ${JSON.stringify(encoding.slice(0, 40))} is not supported: send the body uncompressed`), true);
        return;
      }
      const tooLarge = (close: boolean): void => finish(413, errorJson(`Request body larger than ${maxBodyBytes} bytes`), close);
      const declared = Number(contentLength || "0");
      if (declared > maxBodyBytes) {
        // Answered before the body: uWS then reads the announced bytes and drops them (never as
        // a request), and the connection goes on; one announcing more than pastDrainLimit allows
        // (16 MiB, or the body limit when that is higher: http/body.ts) is closed instead.
        tooLarge(pastDrainLimit(declared, maxBodyBytes));
        return;
      }
      readBody(
        res,
        maxBodyBytes,
        (body) => {
          request.body = body;
          run();
        },
        tooLarge,
        () => finish(400, errorJson("Request body is not valid UTF-8")),
      );
    });
  }

  /**
   * Redis refusing writes (REDIS_REFUSALS): one log line per 30 s for each cause, however many
   * requests (or a batch's events) it refuses, and each counted (GET /metrics,
   * laurel_redis_refusals_total, to alert on). The answers (503) say it to every client.
   */
  /**
   * A failure as the log should hear it: a fault (500) with its stack, under `message` and
   * `fields`; Redis refusing the command (logRefusal) throttled and counted; anything else (a
   * request's own 4xx, Redis unreachable: the connection log says it once an outage) not at all.
   * For a request's failure, and for the failures inside one (a batch's events, an admin
   * batch's users).
   */
  logFailure(err: unknown, answer: ErrorAnswer, fields: Record<string, unknown>, message: string): void {
    if (answer.kind === "refused") this.logRefusal(answer.cause!, err);
    else if (answer.kind === "internal") this.opts.logger.error({ err, ...fields }, message);
  }

  logRefusal(cause: RedisRefusal, err: unknown): void {
    this.stats.refused(cause);
    const log = this.refusalLogs.get(cause)!;
    log.throttle.run((unlogged) => this.opts.logger.error({ err: err instanceof Error ? err.message : String(err), unlogged }, log.message));
  }

  /**
   * Answers every request no route took: 405 with `Allow` when its path is a route's under other
   * methods (RFC 9110 §15.5.6: a GET of the event path, a HEAD of a read), else a JSON 404. Off
   * the served paths only: a matched request never comes here.
   */
  fallback(): void {
    // One series for every path no route serves, under any method: labelled by path or method, a
    // scan of random paths (or of made-up methods, which uWS passes on) would make a series each.
    const stats = this.stats.route("ANY", "unmatched");
    this.app.any("/*", (res, req) => {
      const arrived = performance.now();
      const refusal = framingRefusal(req, req.getHeader(CONTENT_LENGTH));
      if (refusal !== null) {
        sendJson(res, refusal.status, refusal.body, true);
        stats.record(refusal.status, performance.now() - arrived);
        return;
      }
      const allowed = this.allowedMethods(req.getUrl());
      // A HEAD's answer has no body (RFC 9110 §9.3.2): the status and headers only.
      const head = req.getMethod() === "head";
      // During a stop's drain these close their connection too, as the routes' answers do.
      if (allowed.length === 0) sendJson(res, 404, errorJson(ErrorCodes.NOT_FOUND.message), this.draining, undefined, { headersOnly: head });
      else sendJson(res, 405, errorJson(ErrorCodes.METHOD_NOT_ALLOWED.message), this.draining, undefined, { header: ["allow", allowed.join(", ")], headersOnly: head });
      stats.record(allowed.length === 0 ? 404 : 405, performance.now() - arrived);
    });
  }

  /** The methods routes serve `path` with, as an Allow header lists them (sorted, once each). */
  private allowedMethods(path: string): string[] {
    const methods = new Set<string>();
    for (const route of this.routes.values()) if (route.regex.test(path)) for (const m of route.methods) methods.add(m);
    return [...methods].sort();
  }
}
