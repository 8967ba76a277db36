import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";

/**
 * boot.ts: a signal the service catches as its start gives way to its stop. The start's listeners
 * used to be removed before the stop's were added, and removing a signal's last listener closes
 * its libuv handle: a signal caught but not yet dispatched went with it, and the process ran on.
 * CI saw it: a SIGTERM sent on reading "laurel listening" (logged just before the swap) left the
 * service running, and the test waiting for its exit timed out.
 *
 * The child sends itself the signal, waits (blocking its event loop, so the signal is caught but
 * cannot be dispatched), then swaps; the signal must reach the stop. A process that lost it exits
 * 3 when its fallback timer runs out instead.
 */
function signalDuringTheSwap(signal: "SIGTERM" | "SIGQUIT"): { status: number | null; output: string } {
  return runWithBoot(`
    exitOnSignalsWhileStarting(logger);
    process.kill(process.pid, "${signal}");
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    stopOnSignals(logger, async () => logger.info("closed"));
  `);
}

/**
 * Runs `body` in a child Node with dist/boot.js's exitOnSignalsWhileStarting, stopOnSignals and
 * the service's process `logger` in scope. The child's signals are its only way out: one that is
 * lost (or never ends the process) makes it exit 3 when its fallback timer runs out, which keeps
 * it alive meanwhile.
 */
function runWithBoot(body: string, env: NodeJS.ProcessEnv = {}): { status: number | null; output: string } {
  const script = `
    import { exitOnSignalsWhileStarting, processLogger, stopOnSignals } from "./dist/boot.js";
    const logger = processLogger();
    ${body}
    setTimeout(() => { console.log("the signal was lost"); process.exit(3); }, 60_000);
  `;
  const run = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", env: { ...process.env, ...env } });
  return { status: run.status, output: run.stdout + run.stderr };
}

/** The log's messages, in the order they reached the output. */
const messages = (output: string): string[] =>
  output
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => (JSON.parse(l) as { msg: string }).msg);

describe("stop signals caught while the start's handling gives way to the stop's", () => {
  it("a SIGTERM stops the service, through its stop", () => {
    const { status, output } = signalDuringTheSwap("SIGTERM");
    expect(status, output).toBe(0);
    expect(output).toContain('"msg":"closed"');
  });

  it("a SIGQUIT quits it", () => {
    const { status, output } = signalDuringTheSwap("SIGQUIT");
    expect(status, output).toBe(1);
    expect(output).toContain("quitting without a stop");
  });
});

// stopOnSignals' outcomes (README, Operations: stopping). Each stop is driven by the child
// itself: its close resolves on an event it causes, never on a timer racing the work.
describe("a stop", () => {
  it("on SIGTERM, SIGINT (a first Ctrl-C) or SIGHUP exits 0 once its close is done, saying it stopped", () => {
    for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) {
      const { status, output } = runWithBoot(`
        stopOnSignals(logger, async () => logger.info("closed"));
        process.kill(process.pid, "${signal}");
      `);
      expect(status, output).toBe(0);
      expect(messages(output), signal).toEqual(["stopping", "closed", "stopped"]);
    }
  });

  it("exits 1 when its close fails, saying so", () => {
    const { status, output } = runWithBoot(`
      stopOnSignals(logger, async () => { throw new Error("the queue would not close"); });
      process.kill(process.pid, "SIGHUP");
    `);
    expect(status, output).toBe(1);
    expect(messages(output)).toEqual(["stopping", "stopping failed"]);
  });

  it("a second SIGTERM or SIGHUP while it closes does not cut it or run it again", () => {
    // The close sends both signals and finishes once its own listener saw them dispatched
    // (stopOnSignals' listener runs first: it was registered first).
    const { status, output } = runWithBoot(`
      let closes = 0;
      stopOnSignals(logger, () => new Promise((resolve) => {
        closes++;
        let seen = 0;
        const saw = () => { if (++seen === 2) setImmediate(() => { logger.info("closed " + closes); resolve(); }); };
        process.once("SIGTERM", saw);
        process.once("SIGHUP", saw);
        process.kill(process.pid, "SIGTERM");
        process.kill(process.pid, "SIGHUP");
      }));
      process.kill(process.pid, "SIGTERM");
    `);
    expect(status, output).toBe(0);
    expect(messages(output)).toEqual(["stopping", "closed 1", "stopped"]);
  });

  it("whose close never ends exits 0 at its time limit, saying it did not wait longer", () => {
    const { status, output } = runWithBoot(`
      stopOnSignals(logger, () => new Promise(() => undefined), 50);
      process.kill(process.pid, "SIGTERM");
    `);
    expect(status, output).toBe(0);
    expect(messages(output)).toEqual(["stopping", "stopping without waiting longer for connections to close (is Redis reachable?)"]);
  });
});

describe("the process logger", () => {
  it("writes its lines in their order when the process exits while libuv's thread pool is busy", () => {
    // pino's default destination hands each write to the pool; with its one thread busy, the
    // exit's flush wrote "stopped" before "stopping", which was still queued (checked).
    const { status, output } = runWithBoot(
      `
        (await import("node:crypto")).pbkdf2("p", "s", 300000, 32, "sha256", () => undefined);
        logger.info("stopping");
        logger.info("stopped");
        process.exit(0);
      `,
      { UV_THREADPOOL_SIZE: "1" },
    );
    expect(status, output).toBe(0);
    expect(messages(output)).toEqual(["stopping", "stopped"]);
  });
});
