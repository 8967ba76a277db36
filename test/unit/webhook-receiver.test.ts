import { describe, expect, it } from "vitest";
import { startReceiver } from "../helpers/webhook-receiver.js";

// The tests' webhook receiver (test/helpers/webhook-receiver.ts) records deliveries only: a port
// picked free can be one another test probed before, and such a request must not be read as a
// delivery of the test's tenant.
describe("the tests' webhook receiver", () => {
  it("records POSTs and answers anything else 405 without recording it", async () => {
    const receiver = await startReceiver();
    try {
      const probe = await fetch(receiver.url.replace("/hooks", "/healthz"));
      expect(probe.status).toBe(405);
      const delivery = await fetch(receiver.url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ type: "x" }) });
      expect(delivery.status).toBe(200);
      expect(receiver.received.map((r) => [r.target, r.body])).toEqual([["/hooks", { type: "x" }]]);
    } finally {
      await receiver.close();
    }
  });
});
