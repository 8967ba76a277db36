import { spawn } from "node:child_process";
import diagnosticsChannel from "node:diagnostics_channel";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { post } from "../../src/jobs/webhooks/post.js";

// A receiver in another process, so that it answers while this one is held: it answers 200 and,
// once the answer is handed to the kernel ('finish'), creates the marker file.
const RECEIVER = `import { createServer } from "node:http";
  import { writeFileSync } from "node:fs";
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.on("finish", () => writeFileSync(process.env.MARKER, ""));
      res.end("ok");
    });
  });
  server.listen(0, "127.0.0.1", () => console.log(server.address().port));`;

describe("a webhook POST's timeout", () => {
  it("takes an answer sent in time that the process, running late, reads only after its timer is due (a 2xx is not delivered again)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "laurel-post-"));
    const marker = join(dir, "answered");
    const receiver = spawn(process.execPath, ["--input-type=module", "-e", RECEIVER], { env: { ...process.env, MARKER: marker }, stdio: ["ignore", "pipe", "inherit"] });
    try {
      const [port] = (await createInterface({ input: receiver.stdout! })[Symbol.asyncIterator]().next()).value!.split("\n");
      const TIMEOUT_MS = 200;
      // Once undici has written the request, this process runs nothing past the POST's timeout and
      // until the receiver has answered: the answer then waits on the socket, the timer is due.
      const channel = diagnosticsChannel.channel("undici:client:sendHeaders");
      let held = false;
      const hold = (): void => {
        channel.unsubscribe(hold);
        setImmediate(() => {
          const start = Date.now();
          while (Date.now() - start <= TIMEOUT_MS || !existsSync(marker)) {
            // busy, as a process starved of CPU is late; bounded, for a receiver that never
            // answers would hold the event loop and vitest's own timeout with it
            if (Date.now() - start > 120_000) throw new Error("the receiver did not answer within 120 s");
          }
          held = true;
        });
      };
      channel.subscribe(hold);
      const status = await post(new URL(`http://127.0.0.1:${port}/`), { "content-type": "application/json" }, "{}", TIMEOUT_MS, new AbortController());
      expect(held).toBe(true);
      expect(status).toBe(200);
    } finally {
      receiver.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
