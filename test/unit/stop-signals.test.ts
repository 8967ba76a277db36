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
  const script = `
    import { exitOnSignalsWhileStarting, stopOnSignals } from "./dist/boot.js";
    import { pino } from "pino";
    const logger = pino();
    exitOnSignalsWhileStarting(logger);
    process.kill(process.pid, "${signal}");
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    stopOnSignals(logger, async () => logger.info("closed"));
    setTimeout(() => { console.log("the signal was lost"); process.exit(3); }, 60_000);
  `;
  const run = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
  return { status: run.status, output: run.stdout + run.stderr };
}

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
