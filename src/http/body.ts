import { Buffer } from "node:buffer"; // not the global, an accessor (see store/redis-script.ts)
import type { HttpResponse } from "uWebSockets.js";

/**
 * Reads a request body as UTF-8 text (invalid sequences become U+FFFD), enforcing the size limit
 * as chunks arrive (STYLE: uWS pitfalls). uWS neuters each chunk when the callback returns: a
 * body that arrives whole (nearly all of them) is decoded straight from uWS's memory, with no
 * copy; chunks of a longer one are copied and decoded together, so that a character split
 * between two chunks stays whole.
 */
export function readBody(res: HttpResponse, maxBytes: number, onBody: (body: string) => void, onTooLarge: () => void): void {
  let chunks: Buffer[] | null = null;
  let size = 0;
  let done = false;
  res.onData((chunk, isLast) => {
    if (done) return;
    size += chunk.byteLength;
    if (size > maxBytes) {
      done = true;
      onTooLarge();
      return;
    }
    if (isLast && chunks === null) {
      done = true;
      onBody(Buffer.from(chunk).toString("utf8"));
      return;
    }
    (chunks ??= []).push(Buffer.from(new Uint8Array(chunk))); // Buffer.from copies
    if (isLast) {
      done = true;
      onBody(Buffer.concat(chunks, size).toString("utf8"));
    }
  });
}
