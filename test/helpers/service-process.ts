import { spawn, type ChildProcess } from "node:child_process";
import { performance } from "node:perf_hooks";
import { afterAll } from "vitest";

/** The service (src/main.ts), as `node dist/main.js` starts it. */
export const MAIN = new URL("../../dist/main.js", import.meta.url).pathname;
/** The stream worker run alone (src/worker.ts). */
export const WORKER = new URL("../../dist/worker.js", import.meta.url).pathname;

/**
 * Every service this test process started and has not seen exit. A test that fails before its own
 * kill (an expect between the start and the stop) left its service, and that service's embedded
 * redis-server, running after the test run; they are killed after the file's tests (a service's
 * embedded server then stops with it: src/embedded-redis.ts, the death signal).
 */
const running = new Set<ChildProcess>();
// Registered while the test file imports this module (vitest evaluates it again for each file),
// so it runs after each file's own hooks.
afterAll(() => {
  for (const child of running) child.kill("SIGKILL");
});

export interface ServiceProcess {
  child: ChildProcess;
  /** Everything the process wrote so far, stdout and stderr together. */
  output: () => string;
  /** The exit code, once it exits. */
  exited: Promise<number | null>;
}

/**
 * The built service as a user starts it, `node dist/main.js` (or another entry: WORKER, or
 * check-config.js with its `args`), with the
 * test's environment over this process's (REDIS_URL removed unless given: without it the service
 * embeds its own Redis).
 */
export function runService(env: Record<string, string>, entry = MAIN, opts: { ownGroup?: boolean; args?: readonly string[] } = {}): ServiceProcess {
  const { REDIS_URL: _omit, ...base } = process.env;
  // ownGroup: the process leads a process group of its own, as a terminal's job does (a Ctrl-C
  // there is a SIGINT to the whole group: process.kill(-pid, "SIGINT")).
  const child = spawn(process.execPath, [entry, ...(opts.args ?? [])], { env: { ...base, LOG_LEVEL: "info", ...env }, stdio: ["ignore", "pipe", "pipe"], detached: opts.ownGroup === true });
  running.add(child);
  child.once("exit", () => running.delete(child));
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, output: () => out, exited };
}

/** Stops each of `processes` still running (SIGTERM) and waits for its exit: what a test file's afterAll does with those it started. */
export async function stopRunning(processes: readonly ServiceProcess[]): Promise<void> {
  for (const proc of processes) {
    if (proc.child.exitCode === null && proc.child.signalCode === null) {
      proc.child.kill("SIGTERM");
      await proc.exited;
    }
  }
}

/**
 * Polls `predicate` (every 50 ms) until it holds: a state to reach, not a time to wait. With
 * `exited`, fails at once if the process exits first (with its `output`, when given). The bound, four minutes, is no budget (a
 * slow machine reaches the state, later): it names what never came before the test's own
 * timeout (vitest.config.ts, five minutes) would say less.
 */
export async function waitFor(predicate: () => boolean | Promise<boolean>, what: string, exited?: Promise<unknown>, output?: () => string): Promise<void> {
  let gone = false;
  void exited?.then(() => (gone = true));
  // Four minutes of the clock, not a count of polls: a predicate that calls over the network
  // stretched 4 800 polls past the test's own timeout, which then said less.
  const until = performance.now() + 240_000;
  while (performance.now() < until) {
    if (await predicate()) return;
    // With `output`, the failure shows what the process said before it went.
    if (gone) throw new Error(`process exited before ${what}${output ? `; its output:\n${output()}` : ""}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** A JSON call to a service process on `port` with the demo tenant's API key: its status and parsed body. */
export async function callService(port: number, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, {
    method,
    headers: { "x-api-key": "demo-key", "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}
