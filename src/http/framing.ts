import { Buffer } from "node:buffer"; // not the global, an accessor (see store/redis-script.ts)
import type { HttpRequest } from "uWebSockets.js";
import { textBytes } from "./respond.js";

// Header names as bytes (respond.ts textBytes says why).
export const CONTENT_LENGTH = textBytes("content-length");
const TRANSFER_ENCODING = textBytes("transfer-encoding");

/** A request whose body's end Laurel and a proxy in front of it could see differently: its answer, after which the connection closes. */
export interface FramingRefusal {
  status: 400 | 501;
  /** `{"error": ...}` padded past uWS's cork buffer (refusalBody). */
  body: string;
}

/**
 * uWS parses every request already in the bytes it read before it closes a connection whose
 * answer asked to close it: the answer is written into its cork buffer, and the close waits for
 * the uncork after the parse, so a request that followed in the same packet (the smuggled one)
 * was served too. An answer larger than the cork buffer (16 KiB, LoopData::CORK_BUFFER_SIZE) is
 * sent to the socket at once, which ends the cork; the end's close then happens at once and the
 * parse stops at the closed socket. JSON allows the trailing spaces; only a refused framing pays.
 */
const CORK_BUFFER_BYTES = 16 * 1024;

function refusalBody(message: string): string {
  const json = JSON.stringify({ error: message });
  return json + " ".repeat(Math.max(0, CORK_BUFFER_BYTES + 1 - Buffer.byteLength(json)));
}

const CHUNKED = /^[ \t]*chunked[ \t]*$/i;
const CHUNKED_LAST = /,[ \t]*chunked[ \t]*$/i;

/**
 * The refusal of a request's framing, or null; `contentLength` is its Content-Length header ("" for
 * none). Refused: framing that is ambiguous (RFC 9112 §6.1, §6.3) and
 * that uWS itself accepts: it frames a body by the first of several Content-Length fields, and by
 * chunks under any Transfer-Encoding ("gzip", "identity", "xchunked", twice). A proxy in front
 * that reads the fields otherwise (the last Content-Length; no body for a coding it does not
 * know) would pass on what uWS takes for the start of the next request as this one's body, or the
 * reverse: a request smuggled past the proxy's checks (HTTP desync). Node's own HTTP parser
 * refuses the same.
 *
 * Two getHeaders for every request (the router passes the Content-Length it reads anyway), and
 * the header count (`req.forEach`) only for one that has either header: ~8k instructions an event
 * call (~6% of Node's share, README), nothing measurable on a GET, which has neither; no object
 * made on the way. uWS closes the connection itself on a Content-Length that is not digits and
 * on both fields together; the router never sees those.
 */
export function framingRefusal(req: HttpRequest, contentLength: string): FramingRefusal | null {
  const transferEncoding = req.getHeader(TRANSFER_ENCODING);
  return contentLength === "" && transferEncoding === "" ? null : countedRefusal(req, transferEncoding);
}

/** The refusal of a request that has a Content-Length or a Transfer-Encoding (`transferEncoding`, its first). */
function countedRefusal(req: HttpRequest, transferEncoding: string): FramingRefusal | null {
  let lengths = 0;
  let encodings = 0;
  req.forEach((name) => {
    if (name === "content-length") lengths++;
    else if (name === "transfer-encoding") encodings++;
  });
  if (lengths > 1) return { status: 400, body: refusalBody("Request has more than one Content-Length header") };
  if (encodings > 1) return { status: 400, body: refusalBody("Request has more than one Transfer-Encoding header") };
  if (encodings === 1 && !CHUNKED.test(transferEncoding)) {
    const named = JSON.stringify(transferEncoding.slice(0, 40));
    // RFC 9112 §6.1: a body whose last coding is not chunked has no knowable end (400); one
    // chunked last under a coding Laurel does not decode (gzip, chunked) is a 501.
    if (!CHUNKED_LAST.test(transferEncoding)) return { status: 400, body: refusalBody(`Transfer-Encoding ${named} does not end with chunked: the body's end cannot be known`) };
    return { status: 501, body: refusalBody(`Transfer-Encoding ${named} is not supported: send the body with Content-Length, or chunked alone`) };
  }
  return null;
}
