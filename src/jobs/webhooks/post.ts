import { Agent, request } from "undici";
import { deadline } from "../../deadline.js";

/**
 * One POST of a delivery, with undici's request API (not fetch: no WHATWG layers) over a
 * keep-alive pool per origin. Its CPU per POST matters because deliveries share the box with the
 * event path: measured on loopback, 16 at a time, ~43 µs of Node per POST against ~75 µs with
 * node:http's keep-alive agent and about twice that with fetch (bench/README.md, "The ninth
 * stop"). The answer's body is read and dropped so the socket goes back to the pool. Redirects
 * are not followed (undici's request follows none unless asked).
 */
const agent = new Agent({ connections: 64, keepAliveTimeout: 4_000 });

/** Why a POST got no answer: its timeout, the caller cutting it (a stopping process), or the network. */
export type PostFailure = "timeout" | "stopped" | "network";

export class PostError extends Error {
  constructor(message: string, readonly failure: PostFailure) {
    super(message);
  }
}

const TIMED_OUT = Symbol("timed out");

/**
 * Resolves with the answer's status; rejects with a PostError on a network error, a timeout or
 * an abort. `controller` is the attempt's own: the caller aborts it to cut the attempt (a
 * stopping worker), and the timeout aborts it too, so the timeout covers the whole attempt, not
 * only idle periods.
 */
export async function post(url: URL, headers: Record<string, string>, body: string, timeoutMs: number, controller: AbortController): Promise<number> {
  if (controller.signal.aborted) throw new PostError("worker stopped", "stopped");
  // A late process reads an answer that arrived in time before the attempt is cut (deadline.ts).
  const timer = deadline(timeoutMs, () => controller.abort(TIMED_OUT));
  try {
    const answer = await request(url, { method: "POST", headers, body, dispatcher: agent, signal: controller.signal });
    // The status is the receiver's answer: a body cut off after it (the stop, the timeout) changes
    // nothing. Taken for a failure, a 2xx already given was sent again: a duplicate.
    await answer.body.dump().catch(() => undefined);
    return answer.statusCode;
  } catch (err) {
    if (controller.signal.reason === TIMED_OUT) throw new PostError(`no answer within ${timeoutMs} ms`, "timeout");
    if (controller.signal.aborted) throw new PostError("worker stopped", "stopped");
    throw new PostError((err as Error).message, "network");
  } finally {
    timer.cancel();
  }
}
