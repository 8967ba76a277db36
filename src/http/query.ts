import { LaurelError } from "../domain/errors.js";

/** What a handler reads of a query string: URLSearchParams' reading methods. */
export type Query = Pick<URLSearchParams, "get" | "getAll" | "has">;

/**
 * A request's query string, read as the WHATWG application/x-www-form-urlencoded parser reads
 * it (URLSearchParams' rules), except that names and values which are not UTF-8 are refused
 * (400) rather than made U+FFFD, as a path's and a body's are (router.ts decodeParam, body.ts):
 * otherwise `userIds=a%FF` and `userIds=a%FE` would both ask for the user "a\uFFFD".
 *
 * Most queries (`awards=10`) hold no `%` and no `+`, so no name or value needs decoding and a
 * scan of the raw text answers `get`; the metering read paid ~1k instructions
 * (bench/read-cost.mjs) for a URLSearchParams it asks one name of. Any other query is decoded
 * once, pair by pair, when it is made. Not by Node's URLSearchParams: besides making invalid
 * bytes U+FFFD, it mangles a valid query that mixes raw non-ASCII text with a "%" not followed
 * by two hex digits ("é%a+a" reads as "\uFFFD%a a" on Node 20).
 */
export class RawQuery implements Query {
  /** The decoded pairs, in order; null while the raw text needs no decoding. */
  private readonly pairs: [string, string][] | null = null;

  constructor(private readonly raw: string) {
    // uWS hands over the query's bytes decoded leniently, each invalid sequence as U+FFFD: a raw
    // U+FFFD cannot be told from them, so it must come percent-encoded (%EF%BF%BD).
    if (raw.includes("\uFFFD")) throw new LaurelError("INVALID_QUERY", "Query is not valid UTF-8 (percent-encode its characters outside ASCII)");
    if (raw.includes("%") || raw.includes("+")) this.pairs = decodePairs(raw);
  }

  get(name: string): string | null {
    const pairs = this.pairs;
    if (pairs !== null) {
      for (const [n, v] of pairs) if (n === name) return v;
      return null;
    }
    const raw = this.raw;
    // `eq` is the first "=" at or after `start`, searched again only once passed, so a query of
    // many pairs without "=" (a hostile one) is scanned once, not once per pair.
    let eq = raw.indexOf("=");
    let start = 0;
    while (start <= raw.length) {
      let end = raw.indexOf("&", start);
      if (end === -1) end = raw.length;
      if (end > start) {
        if (eq !== -1 && eq < start) eq = raw.indexOf("=", start);
        const nameEnd = eq === -1 || eq > end ? end : eq;
        if (nameEnd - start === name.length && raw.startsWith(name, start)) return nameEnd === end ? "" : raw.slice(nameEnd + 1, end);
      }
      start = end + 1;
    }
    return null;
  }

  getAll(name: string): string[] {
    const pairs = this.pairs ?? decodePairs(this.raw);
    const values: string[] = [];
    for (const [n, v] of pairs) if (n === name) values.push(v);
    return values;
  }

  has(name: string): boolean {
    return this.get(name) !== null;
  }
}

/** The query's pairs as the form-urlencoded parser splits them: on "&", empty parts skipped, at the first "=". */
function decodePairs(raw: string): [string, string][] {
  const pairs: [string, string][] = [];
  for (const part of raw.split("&")) {
    if (part === "") continue;
    const eq = part.indexOf("=");
    pairs.push(eq === -1 ? [decodeText(part), ""] : [decodeText(part.slice(0, eq)), decodeText(part.slice(eq + 1))]);
  }
  return pairs;
}

// A "%" not followed by two hex digits: the form parser keeps it as itself, decodeURIComponent
// throws on it, so it is escaped first.
const STRAY_PERCENT = /%(?![0-9A-Fa-f]{2})/g;

/**
 * One name or value: "+" is a space, "%XX" a byte, and the bytes must be UTF-8.
 * decodeURIComponent decodes the escapes strictly, throwing where their bytes are not UTF-8.
 */
function decodeText(text: string): string {
  if (!text.includes("%")) return text.includes("+") ? text.replaceAll("+", " ") : text;
  try {
    return decodeURIComponent(text.replaceAll("+", " ").replace(STRAY_PERCENT, "%25"));
  } catch {
    throw new LaurelError("INVALID_QUERY", "Query is not valid UTF-8 (a percent-encoded sequence is not UTF-8)");
  }
}
