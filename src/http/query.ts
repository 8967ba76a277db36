/** What a handler reads of a query string: URLSearchParams' reading methods. */
export type Query = Pick<URLSearchParams, "get" | "getAll" | "has">;

/**
 * A request's query string, read as URLSearchParams reads it (WHATWG
 * application/x-www-form-urlencoded), without building one when it need not. Most queries
 * (`awards=10`) hold no `%` and no `+`, so no name or value needs decoding and a scan of the raw
 * text answers `get` exactly as URLSearchParams would; the metering read paid ~1k instructions
 * (bench/read-cost.mjs) for a URLSearchParams it asks one name of. Any other query is handed to
 * URLSearchParams itself, once, so its decoding rules stay the only ones.
 */
export class RawQuery implements Query {
  private params: URLSearchParams | null = null;

  constructor(private readonly raw: string) {}

  /** URLSearchParams is needed only where decoding could change a name or a value. */
  private decoded(): URLSearchParams | null {
    if (this.params === null && (this.raw.includes("%") || this.raw.includes("+"))) this.params = new URLSearchParams(this.raw);
    return this.params;
  }

  get(name: string): string | null {
    const params = this.decoded();
    if (params !== null) return params.get(name);
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
    return (this.params ??= new URLSearchParams(this.raw)).getAll(name);
  }

  has(name: string): boolean {
    return this.get(name) !== null;
  }
}
