import { request } from "node:http";
import fc from "fast-check";
import { afterAll, beforeAll, expect, it } from "vitest";
import { demoConfig, dumpTenant, startAppOnOwnRedis, type TestApp } from "../helpers/app.js";
import { propertyParameters } from "../helpers/property.js";

/**
 * Bodies as bytes, which hostile-requests.property.test.ts cannot send: `fetch` encodes its body
 * text as UTF-8 and turns a lone surrogate into U+FFFD, so neither the reader's "not UTF-8"
 * answer (http/body.ts) nor bodies arriving in several pieces were reached by it. Here a valid
 * body of a write route gets bytes put into it (overlong forms, encoded surrogates, a character
 * cut short, byte order marks, random bytes), and goes out in random pieces, chunked or with a
 * Content-Length, over node:http.
 *
 * Whatever arrives: a status below 500, a body that is exactly `{"error": "..."}` when refused, a
 * 400 `Request body is not valid UTF-8` for bytes that are not UTF-8, and a refusal writes nothing.
 */

let t: TestApp;
let tenantId: string;
let close: () => Promise<void>;

beforeAll(async () => {
  const config = demoConfig();
  tenantId = config.tenantId;
  ({ t, close } = await startAppOnOwnRedis({ yaml: config.yaml, manualClock: "2026-03-02T12:00:00Z" }));
  expect((await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "seed" }, value: 1 })).status).toBe(201);
});
afterAll(async () => close?.());

const ROUTES: Array<{ method: string; path: string; body: unknown }> = [
  { method: "POST", path: "/v1/metrics/lessons/event", body: { user: { id: "seed", name: "Ann" }, value: 1 } },
  { method: "POST", path: "/v1/users", body: { id: "raw-user", name: "Ann" } },
  { method: "PUT", path: "/v1/users/seed", body: { name: "Ann", tz: "UTC" } },
  { method: "PATCH", path: "/v1/users/seed", body: { name: "Ann" } },
  { method: "POST", path: "/v1/achievements/complete-profile/complete", body: { user: { id: "seed", name: "Ann" } } },
];

/** Byte sequences a careless or hostile client puts in a body. */
const ODD_BYTES: number[][] = [
  [0xff],
  [0xfe],
  [0xc0, 0xaf], // overlong "/"
  [0xe0, 0x80, 0xaf], // overlong "/", three bytes
  [0xed, 0xa0, 0x80], // an encoded lone surrogate
  [0xe6, 0x97], // 日 cut short
  [0xf0, 0x9f, 0x98], // 😀 cut short
  [0xef, 0xbb, 0xbf], // a UTF-8 byte order mark
  [0xfe, 0xff], // a UTF-16 byte order mark
  [0xef, 0xbf, 0xbd], // U+FFFD itself: valid
  [0xc3, 0xa9], // é: valid
  [0x00],
];

const bytesToInsert = fc.oneof(
  fc.constantFrom(...ODD_BYTES),
  fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 1, maxLength: 6 }),
);

/** A valid body with bytes put in: into the name's text, before the JSON, or anywhere. */
const rawBody = fc
  .record({
    route: fc.constantFrom(...ROUTES),
    insert: fc.array(bytesToInsert, { minLength: 1, maxLength: 3 }),
    where: fc.constantFrom("in the name", "before", "anywhere"),
    at: fc.nat(),
  })
  .map(({ route, insert, where, at }) => {
    const text = Buffer.from(JSON.stringify(route.body));
    const odd = Buffer.from(insert.flat());
    let bytes: Buffer;
    if (where === "before") bytes = Buffer.concat([odd, text]);
    else {
      const name = text.indexOf(Buffer.from('"Ann"'));
      const position = where === "in the name" && name >= 0 ? name + 2 : at % (text.length + 1);
      bytes = Buffer.concat([text.subarray(0, position), odd, text.subarray(position)]);
    }
    return { route, bytes };
  });

/** Where a body is cut into the pieces it is written in (sorted, within the body). */
const cuts = fc.array(fc.nat(), { maxLength: 4 });

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });
const isUtf8 = (bytes: Buffer): boolean => {
  try {
    strictUtf8.decode(bytes);
    return true;
  } catch {
    return false;
  }
};

/** Sends `bytes` in pieces (chunked unless `lengthKnown`) and returns the status and body text. */
function send(method: string, path: string, bytes: Buffer, pieces: number[], lengthKnown: boolean): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { "x-api-key": "demo-key", "content-type": "application/json" };
    if (lengthKnown) headers["content-length"] = bytes.length;
    const req = request({ host: "127.0.0.1", port: Number(new URL(t.url).port), method, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode!, text: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("error", reject);
    const points = [...new Set(pieces.map((p) => p % (bytes.length + 1)))].sort((a, b) => a - b);
    let from = 0;
    for (const to of [...points, bytes.length]) {
      if (to > from) req.write(bytes.subarray(from, to));
      from = to;
    }
    req.end();
  });
}

it("answers every body of raw bytes below 500, refuses what is not UTF-8 with 400, and a refusal writes nothing", async () => {
  await fc.assert(
    fc.asyncProperty(rawBody, cuts, fc.boolean(), async ({ route, bytes }, pieces, lengthKnown) => {
      const before = await dumpTenant(t.redis, tenantId);
      const { status, text } = await send(route.method, route.path, bytes, pieces, lengthKnown);
      const label = `${route.method} ${route.path} ${bytes.toString("hex")} → ${status} ${text}`;
      expect(status, label).toBeLessThan(500);
      if (!isUtf8(bytes)) {
        expect(status, label).toBe(400);
        expect(JSON.parse(text), label).toEqual({ error: "Request body is not valid UTF-8" });
      }
      if (status >= 400) {
        const body = JSON.parse(text) as unknown;
        expect(body, label).toEqual({ error: expect.any(String) });
        expect((body as { error: string }).error.isWellFormed(), label).toBe(true);
        expect(await dumpTenant(t.redis, tenantId), label).toEqual(before);
      }
    }),
    propertyParameters(200),
  );
});
