import type { CompiledWebhook } from "../../config/compiled.js";
import { post, PostError } from "./post.js";
import { signedHeaders } from "./signing.js";

/**
 * One delivery attempt, whoever makes it (the webhook consumer's first attempt, first-attempt.ts,
 * or a BullMQ worker's, deliveries.ts): POST the stored body with fresh signatures within a
 * timeout. A 2xx answer is a success; any other status, a timeout or a network error a failure.
 */
export interface DeliveryJob {
  endpoint: string;
  eventId: string;
  type: string;
  /** The user the event is about (null for calendar events). */
  userId: string | null;
  /** The JSON body, exactly as signed and sent on every attempt. */
  body: string;
}

/** An endpoint as attempts use it: its URL parsed once. */
export type Target = CompiledWebhook & { target: URL };

export interface AttemptOutcome {
  ok: boolean;
  /** The answer's status; null when none came (timeout, network error, stop). */
  status: number | null;
  /** The failure as the admin API shows it ("HTTP 500", "no answer within 2000 ms", the network error). */
  error: string | null;
  /** The attempt was cut by a stopping process (not the receiver's doing). */
  stopped: boolean;
  /** When it started (ms, wall clock) and how long it took. */
  at: number;
  ms: number;
}

export async function attemptDelivery(endpoint: Target, job: DeliveryJob, timeoutMs: number, controller: AbortController): Promise<AttemptOutcome> {
  const at = Date.now();
  try {
    const headers = signedHeaders(job.eventId, job.body, endpoint.secrets, at);
    // The URL's userinfo, compiled into a Basic header (config/compile.ts basicAuthorization):
    // undici sends none for a URL's userinfo, and the endpoint's URL has none left.
    if (endpoint.authorization !== null) headers.authorization = endpoint.authorization;
    const status = await post(endpoint.target, headers, job.body, timeoutMs, controller);
    const ok = status >= 200 && status <= 299;
    return { ok, status, error: ok ? null : `HTTP ${status}`, stopped: false, at, ms: Date.now() - at };
  } catch (err) {
    const stopped = err instanceof PostError && err.failure === "stopped";
    return { ok: false, status: null, error: (err as Error).message, stopped, at, ms: Date.now() - at };
  }
}

/** A line of a delivery's log (the admin API's `log`): "<ISO time> attempt <n>: <what happened>". */
export const logLine = (at: number, attempt: number, text: string): string => `${new Date(at).toISOString()} attempt ${attempt}: ${text}`;

/** An attempt's line in the log: the answer's status and time, or the error. */
export const outcomeLine = (outcome: AttemptOutcome, attempt: number): string =>
  logLine(outcome.at, attempt, outcome.status === null ? outcome.error! : `HTTP ${outcome.status} in ${outcome.ms} ms`);

/** What a successful attempt returns (kept by BullMQ as the job's return value). */
export interface AttemptResult {
  status: number;
  ms: number;
  attempt: number;
  at: number;
  /** "consumer" when the webhook consumer made it, before the job existed (first-attempt.ts). */
  by?: "consumer";
}
