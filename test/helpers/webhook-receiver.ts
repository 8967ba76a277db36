import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A webhook receiver on loopback (node:http) for the outbound-event tests: it records every
 * request with its raw body and headers, answers what the test's `respond` says (a status, or
 * "hang": keep the request open), and lets a test wait for a number of requests without
 * sleeping. `verify` checks both signatures the way a receiver would.
 */
export interface Received {
  headers: IncomingMessage["headers"];
  /** The request line's target, as sent (path and query). */
  target: string;
  raw: string;
  body: any;
}

type Reply = number | "hang";

export interface Receiver {
  url: string;
  received: Received[];
  /** What to answer to the n-th request (0-based); default 200. */
  respond: (request: Received, index: number) => Reply;
  /** Resolves once at least `n` requests (matching `filter`) have arrived. */
  waitFor(n: number, filter?: (r: Received) => boolean): Promise<Received[]>;
  /** Requests held open by "hang", answered or dropped by the test. */
  hanging: ServerResponse[];
  close(): Promise<void>;
}

/** `port` 0 picks a free one; a given port brings a stopped receiver back at the same URL. */
export async function startReceiver(respond: Receiver["respond"] = () => 200, port = 0): Promise<Receiver> {
  const received: Received[] = [];
  const waiters: { n: number; filter: (r: Received) => boolean; resolve: (r: Received[]) => void }[] = [];
  const hanging: ServerResponse[] = [];
  const check = (): void => {
    for (const w of [...waiters]) {
      const matching = received.filter(w.filter);
      if (matching.length >= w.n) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(matching);
      }
    }
  };
  const receiver: Receiver = {
    url: "",
    received,
    respond,
    hanging,
    waitFor(n, filter = () => true) {
      return new Promise((resolve) => {
        waiters.push({ n, filter, resolve });
        check();
      });
    },
    async close() {
      for (const res of hanging) res.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      // Deliveries are POSTs. Anything else reached this port by mistake: most likely another
      // test's probe of a service it had on this port before (a port picked free is reused), as
      // once in a clean-clone CI run (webhook-rank-changes.test.ts). Kept out of `received`, and
      // said on stderr so that its source shows the next time.
      if (req.method !== "POST") {
        process.stderr.write(`webhook receiver ${receiver.url}: not a delivery, ignored: ${req.method} ${req.url} (user-agent ${req.headers["user-agent"] ?? "none"})\n`);
        res.writeHead(405, { "content-type": "text/plain" }).end("deliveries are POSTs");
        return;
      }
      const raw = Buffer.concat(chunks).toString("utf8");
      let body: unknown = raw;
      try {
        body = JSON.parse(raw);
      } catch {
        /* keep the text */
      }
      const request: Received = { headers: req.headers, target: req.url ?? "", raw, body };
      const index = received.length;
      received.push(request);
      const reply = receiver.respond(request, index);
      if (reply === "hang") hanging.push(res);
      else res.writeHead(reply, { "content-type": "text/plain" }).end(reply === 200 ? "ok" : "no");
      check();
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", () => resolve()));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  return receiver;
}

/**
 * Verifies a delivery as a receiver would: X-Trophy-Signature (base64 HMAC-SHA256 of the raw
 * body with the secret string), and the Standard Webhooks signature: HMAC-SHA256 of
 * "<webhook-id>.<webhook-timestamp>.<body>" keyed with the base64-decoded whsec_ secret, any of
 * the space-separated "v1,<sig>" entries matching, and a timestamp within 5 minutes.
 */
export function verifyTrophy(r: Received, secret: string): boolean {
  const expected = createHmac("sha256", secret).update(r.raw).digest("base64");
  const given = String(r.headers["x-trophy-signature"] ?? "");
  return given.length === expected.length && timingSafeEqual(Buffer.from(given), Buffer.from(expected));
}

export function verifyStandard(r: Received, secret: string, nowSeconds = Math.floor(Date.now() / 1000)): boolean {
  const id = String(r.headers["webhook-id"] ?? "");
  const timestamp = String(r.headers["webhook-timestamp"] ?? "");
  if (!id || !/^\d+$/.test(timestamp) || Math.abs(nowSeconds - Number(timestamp)) > 300) return false;
  const key = secret.startsWith("whsec_") ? Buffer.from(secret.slice(6), "base64") : Buffer.from(secret);
  const expected = createHmac("sha256", key).update(`${id}.${timestamp}.${r.raw}`).digest("base64");
  return String(r.headers["webhook-signature"] ?? "")
    .split(" ")
    .some((entry) => {
      const [version, signature] = entry.split(",");
      return version === "v1" && signature !== undefined && signature.length === expected.length && timingSafeEqual(Buffer.from(signature), Buffer.from(expected));
    });
}
