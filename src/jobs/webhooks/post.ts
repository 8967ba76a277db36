import { Agent as HttpAgent, request as httpRequest } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";

/**
 * One POST of a delivery with node:http(s) and keep-alive agents: an attempt took less than half
 * the CPU it took with fetch (undici's WHATWG layers; measured with --cpu-prof under the event
 * load of bench/webhooks.mjs), which matters because deliveries share the service's event loop. The answer's body is
 * read and dropped so the socket goes back to the pool. Redirects are not followed.
 */
const agents = {
  "http:": new HttpAgent({ keepAlive: true, maxSockets: 64, maxFreeSockets: 16 }),
  "https:": new HttpsAgent({ keepAlive: true, maxSockets: 64, maxFreeSockets: 16 }),
};

export class PostError extends Error {
  constructor(message: string, readonly timedOut = false) {
    super(message);
  }
}

/** Resolves with the answer's status; rejects with a PostError on a network error, a timeout or an abort. */
export function post(url: URL, headers: Record<string, string>, body: string, timeoutMs: number, signal: AbortSignal): Promise<number> {
  return new Promise((resolve, reject) => {
    const payload = Buffer.from(body, "utf8");
    const send = url.protocol === "https:" ? httpsRequest : httpRequest;
    const req = send(url, {
      method: "POST",
      agent: agents[url.protocol as "http:" | "https:"],
      headers: { ...headers, "content-length": String(payload.length) },
      signal,
    });
    let settled = false;
    const fail = (err: PostError): void => {
      if (settled) return;
      settled = true;
      req.destroy();
      reject(err);
    };
    // The timeout covers the whole attempt, not only idle periods.
    const timer = setTimeout(() => fail(new PostError(`no answer within ${timeoutMs} ms`, true)), timeoutMs);
    req.on("response", (res) => {
      res.resume();
      res.on("end", () => {
        clearTimeout(timer);
        if (settled) return;
        settled = true;
        resolve(res.statusCode ?? 0);
      });
      res.on("error", (err) => {
        clearTimeout(timer);
        fail(new PostError(err.message));
      });
    });
    req.on("error", (err) => {
      clearTimeout(timer);
      fail(new PostError(signal.aborted ? "worker stopped" : err.message));
    });
    req.end(payload);
  });
}
