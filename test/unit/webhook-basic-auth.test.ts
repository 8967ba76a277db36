import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfigText } from "../../src/config/load.js";
import { attemptDelivery, type Target } from "../../src/jobs/webhooks/attempt.js";
import { startReceiver, type Receiver } from "../helpers/webhook-receiver.js";
import { tenantYaml } from "../helpers/tenant-yaml.js";

/**
 * An endpoint whose URL carries a userinfo, compiled from a tenant file and POSTed to a real
 * receiver: the userinfo arrives as `Authorization: Basic ...` (percent-decoded), never in the
 * request line or the Host header; an endpoint without one sends no Authorization.
 */
const TENANT = `
    metrics: [{ key: lessons, name: Lessons }]
    webhooks:
`;

function endpoint(url: string): Target {
  const yaml = tenantYaml("auth", `${TENANT}      - { key: main, url: "${url}", secret: "0123456789abcdef", events: [points.changed] }\n`);
  const [webhook] = loadConfigText(yaml, "x.yaml", {})[0]!.webhooks;
  return { ...webhook!, target: new URL(webhook!.url) };
}

const JOB = { endpoint: "main", eventId: "evt_1", type: "points.changed", userId: "u1", body: '{"type":"points.changed"}' };

describe("a webhook URL's userinfo", () => {
  let receiver: Receiver;
  let port: string;
  beforeAll(async () => {
    receiver = await startReceiver();
    port = new URL(receiver.url).port;
  });
  afterAll(() => receiver.close());

  it("is sent as Basic auth, percent-decoded, and not as part of the URL", async () => {
    const outcome = await attemptDelivery(endpoint(`http://user:p%40ss@127.0.0.1:${port}/hooks?q=1`), JOB, 10_000, new AbortController());
    expect(outcome).toMatchObject({ ok: true, status: 200 });
    const [got] = await receiver.waitFor(1);
    expect(got!.headers.authorization).toBe(`Basic ${Buffer.from("user:p@ss").toString("base64")}`);
    expect(Buffer.from(got!.headers.authorization!.slice(6), "base64").toString()).toBe("user:p@ss");
    expect(got!.target).toBe("/hooks?q=1");
    expect(got!.headers.host).toBe(`127.0.0.1:${port}`);
    expect(JSON.stringify(got!.headers)).not.toContain("p%40ss");
    expect(got!.raw).toBe(JOB.body);
  });

  it("sends no Authorization for a URL without one", async () => {
    const outcome = await attemptDelivery(endpoint(`http://127.0.0.1:${port}/hooks`), JOB, 10_000, new AbortController());
    expect(outcome).toMatchObject({ ok: true, status: 200 });
    const [, got] = await receiver.waitFor(2);
    expect(got!.headers.authorization).toBeUndefined();
    expect(got!.target).toBe("/hooks");
    expect(got!.headers.host).toBe(`127.0.0.1:${port}`);
  });
});
