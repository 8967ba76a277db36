import { spawn, type ChildProcess } from "node:child_process";

// In a module of its own, without this one's hook, for helpers that global-setup.ts runs too; the tests import it from here.
export { waitFor } from "./wait-for.js";

/** The service (src/main.ts), as `node dist/main.js` starts it. */
export const MAIN = new URL("../../dist/main.js", import.meta.url).pathname;
/** The stream worker run alone (src/worker.ts). */
export const WORKER = new URL("../../dist/worker.js", import.meta.url).pathname;

/**
 * Every service this test process started and has not seen exit. A test that fails before its own
 * kill (an expect between the start and the stop) left its service, and that service's embedded
 * redis-server, running after the test run; they are killed after each file's tests
 * (file-cleanup.ts; a service's embedded server then stops with it: src/redis-child.ts, the death
 * signal).
 */
const running = new Set<ChildProcess>();

/** Kills the services still running (file-cleanup.ts, after each file's own hooks); how many there were. */
export function killServicesLeftRunning(): number {
  const left = running.size;
  for (const child of running) child.kill("SIGKILL");
  return left;
}

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
 * embeds its own Redis). LAUREL_HEALTH_TIMEOUT is a minute unless the test sets it, as the
 * in-process apps' (test/helpers/app.ts): a redis-server starved of CPU for the production second
 * made /healthz and /metrics say "down" to a test that expected "up".
 */
export function runService(env: Record<string, string>, entry = MAIN, opts: { ownGroup?: boolean; args?: readonly string[] } = {}): ServiceProcess {
  const { REDIS_URL: _omit, ...base } = process.env;
  // ownGroup: the process leads a process group of its own, as a terminal's job does (a Ctrl-C
  // there is a SIGINT to the whole group: process.kill(-pid, "SIGINT")).
  const child = spawn(process.execPath, [entry, ...(opts.args ?? [])], { env: { ...base, LOG_LEVEL: "info", LAUREL_HEALTH_TIMEOUT: "60", ...env }, stdio: ["ignore", "pipe", "pipe"], detached: opts.ownGroup === true });
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

/** A JSON call to a service process on `port` with the demo tenant's API key (or `key`: "demo-admin-key" for the admin routes): its status and parsed body. */
export async function callService(port: number, method: string, path: string, body?: unknown, key = "demo-key"): Promise<{ status: number; body: any }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, {
    method,
    headers: { "x-api-key": key, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}
