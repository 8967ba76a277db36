import { Buffer } from "node:buffer"; // not the global, an accessor (see store/redis-script.ts)
import type { HttpResponse } from "uWebSockets.js";

// Decodes strictly: throws on a byte sequence that is not UTF-8 (only asked when the lenient
// decoding produced a U+FFFD, which a valid body may also hold).
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * The bytes as UTF-8 text, or null when they are not UTF-8. Buffer's decoding turns an invalid
 * sequence into U+FFFD, so two user ids that differ only in invalid bytes ("a\xff", "a\xfe")
 * would become one user; a body holding U+FFFD after it is decoded again, strictly. The scan for
 * U+FFFD is all a valid body without one pays.
 */
function utf8Text(bytes: Buffer): string | null {
  const text = bytes.toString("utf8");
  if (!text.includes("\uFFFD")) return text;
  try {
    strictUtf8.decode(bytes);
    return text;
  } catch {
    return null;
  }
}

function deliver(text: string | null, onBody: (body: string) => void, onNotUtf8: () => void): void {
  if (text === null) onNotUtf8();
  else onBody(text);
}

/**
 * How much of a refused body is read and dropped so that its sender reads the 413. A connection
 * closed with the upload unread made the client's next write meet a reset: from ~200 KB on (more
 * than the sockets' buffers hold), fetch and the SDK saw EPIPE instead of the answer. Past this,
 * the body is not worth reading: the 413 closes the connection, and such a client sees a reset.
 */
const DRAIN_LIMIT_BYTES = 16 * 1024 * 1024;

/**
 * Whether a refused body of `bytes` (announced, or arrived so far) is past what is read and
 * dropped: its 413 then closes the connection. One rule for the announced length (router.ts) and
 * the chunks (readBody), which must agree; a limit set above DRAIN_LIMIT_BYTES raises it too.
 */
export function pastDrainLimit(bytes: number, maxBytes: number): boolean {
  return bytes > Math.max(DRAIN_LIMIT_BYTES, maxBytes);
}

/**
 * Reads a request body as UTF-8 text, enforcing the size limit as chunks arrive (STYLE: uWS
 * pitfalls); a body that is not UTF-8 (RFC 8259 §8.1) goes to `onNotUtf8`. uWS neuters each
 * chunk when the callback returns: a body that arrives whole (nearly all of them) is decoded
 * straight from uWS's memory, with no copy; chunks of a longer one are copied and decoded
 * together, so that a character split between two chunks stays whole.
 *
 * A body past `maxBytes` is counted, not kept, and refused (`onTooLarge(false)`) once it has
 * arrived, so the connection serves the next request; or at once with the connection to be
 * closed (`onTooLarge(true)`) when it grows past DRAIN_LIMIT_BYTES (a response cannot be closed
 * after it was sent: uWS forbids touching it, so the answer waits for one or the other).
 */
export function readBody(res: HttpResponse, maxBytes: number, onBody: (body: string) => void, onTooLarge: (close: boolean) => void, onNotUtf8: () => void): void {
  let chunks: Buffer[] | null = null;
  let size = 0;
  let done = false;
  res.onData((chunk, isLast) => {
    if (done) return;
    size += chunk.byteLength;
    if (size > maxBytes) {
      chunks = null;
      if (isLast || pastDrainLimit(size, maxBytes)) {
        done = true;
        onTooLarge(!isLast);
      }
      return;
    }
    if (isLast && chunks === null) {
      done = true;
      deliver(utf8Text(Buffer.from(chunk)), onBody, onNotUtf8);
      return;
    }
    (chunks ??= []).push(Buffer.from(new Uint8Array(chunk))); // Buffer.from copies
    if (isLast) {
      done = true;
      deliver(utf8Text(Buffer.concat(chunks, size)), onBody, onNotUtf8);
    }
  });
}
