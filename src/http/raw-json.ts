/**
 * JSON text spliced into a reply as it is. The event reply repeats the same static objects on
 * every request (a points system's head, each award's trigger, each board's description); they
 * are rendered once per compiled config object and joined as text, which the profile of the
 * event path showed cheaper than rebuilding and re-serialising them each time (bench/README.md).
 * Node 20 has no JSON.rawJSON, so only a reply's top-level values may be RawJson.
 */
export class RawJson {
  constructor(readonly text: string) {}
}

/** JSON.stringify of a reply body that is RawJson or whose top-level values may be. */
export function stringifyReply(body: unknown): string {
  if (body instanceof RawJson) return body.text;
  // Most replies hold no RawJson: one native JSON.stringify is cheaper than one per key.
  if (typeof body !== "object" || body === null || Array.isArray(body) || !Object.values(body).some((v) => v instanceof RawJson)) {
    return JSON.stringify(body);
  }
  let out = "{";
  for (const key in body) {
    const value = (body as Record<string, unknown>)[key];
    if (value === undefined) continue;
    if (out.length > 1) out += ",";
    out += `${JSON.stringify(key)}:${value instanceof RawJson ? value.text : JSON.stringify(value)}`;
  }
  return `${out}}`;
}

/**
 * A text rendered once per object (a compiled config object: a reload compiles new ones, so a
 * cache never outlives its config): `render` runs the first time `key` is seen; `args` are what
 * the rendering needs besides the key and must be the same for the same key.
 */
export function renderedOnce<K extends object, A extends unknown[]>(render: (key: K, ...args: A) => string): (key: K, ...args: A) => string {
  const cache = new WeakMap<K, string>();
  return (key, ...args) => {
    let text = cache.get(key);
    if (text === undefined) {
      text = render(key, ...args);
      cache.set(key, text);
    }
    return text;
  };
}

/** `{...}` without its closing brace, so that fields can be appended to a rendered object. */
export const openObject = (value: object): string => JSON.stringify(value).slice(0, -1);
