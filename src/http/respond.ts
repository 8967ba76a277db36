import { Buffer } from "node:buffer"; // not the global, an accessor (see store/redis-script.ts)
import type { HttpResponse } from "uWebSockets.js";

const STATUS_TEXT: Record<number, string> = {
  200: "200 OK",
  201: "201 Created",
  202: "202 Accepted",
  400: "400 Bad Request",
  401: "401 Unauthorized",
  404: "404 Not Found",
  405: "405 Method Not Allowed",
  413: "413 Payload Too Large",
  415: "415 Unsupported Media Type",
  422: "422 Unprocessable Entity",
  500: "500 Internal Server Error",
  501: "501 Not Implemented",
  503: "503 Service Unavailable",
};

/**
 * `text` as UTF-8 in an ArrayBuffer of its own, for the names and values uWS is given on every
 * request (status lines, header names). uWS takes bytes as they are, where a string costs it a
 * UTF-8 conversion per call (a Utf8Value each); and an ArrayBuffer costs it less than a view of
 * one (a Buffer: JSTypedArray::GetBuffer, ArrayBufferView::Buffer and ::ByteLength per call).
 * Measured per metering read (bench/read-cost.mjs, callgrind, per call of the uWS wrappers): its
 * three getHeader 1365 instructions as Buffers (2566 as strings) against 1020, writeHeader 924
 * (1698) against 700, writeStatus 557 (914) against 445: 0.68k a read less than Buffers.
 */
export function textBytes(text: string): ArrayBuffer {
  const bytes = Buffer.from(text);
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length);
}

// Status lines and the JSON content type as bytes, encoded once (textBytes says why).
const STATUS_BYTES = new Map<number, ArrayBuffer>(Object.entries(STATUS_TEXT).map(([code, text]) => [Number(code), textBytes(text)]));
const CONTENT_TYPE = textBytes("content-type");
const JSON_TYPE = "application/json";
const JSON_TYPE_BYTES = textBytes(JSON_TYPE);

/** What only the unmatched-route answers need (router.ts fallback): one more header, and a HEAD's bodiless answer. */
export interface AnswerExtras {
  header?: readonly [string, string];
  headersOnly?: boolean;
}

/**
 * Writes a whole JSON response inside one cork: status first (uWS sends 200 on its own when a
 * header comes first), then headers, then the body. `closeConnection` is for answers given
 * before the body was read (413), where the rest of the upload must not be parsed as a request.
 */
export function sendJson(res: HttpResponse, status: number, json: string, closeConnection = false, contentType = JSON_TYPE, extra?: AnswerExtras): void {
  res.cork(() => {
    res.writeStatus(STATUS_BYTES.get(status) ?? `${status} Status`);
    res.writeHeader(CONTENT_TYPE, contentType === JSON_TYPE ? JSON_TYPE_BYTES : contentType);
    if (extra?.header) res.writeHeader(extra.header[0], extra.header[1]);
    // end(_, true) writes `Connection: close` itself (a header written here too came out twice).
    // A HEAD's answer carries no body (an empty one: this uWS build's endWithoutBody leaves the
    // response unanswered, which aborts the process).
    res.end(extra?.headersOnly ? "" : json, closeConnection);
  });
}

export function errorJson(message: string): string {
  return JSON.stringify({ error: message });
}
