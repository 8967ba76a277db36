import { Buffer } from "node:buffer"; // not the global, an accessor (see store/redis-script.ts)
import type { HttpResponse } from "uWebSockets.js";

/**
 * Reads a request body, enforcing the size limit as chunks arrive (STYLE: uWS pitfalls).
 * uWS neuters each chunk when the callback returns, so chunks are copied.
 */
export function readBody(res: HttpResponse, maxBytes: number, onBody: (body: Buffer) => void, onTooLarge: () => void): void {
  const chunks: Buffer[] = [];
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
    chunks.push(Buffer.from(new Uint8Array(chunk).slice()));
    if (isLast) {
      done = true;
      onBody(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    }
  });
}
