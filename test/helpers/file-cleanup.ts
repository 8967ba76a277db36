import { afterAll, expect } from "vitest";
import { closeAppsLeftOpen } from "./app.js";
import { killServicesLeftRunning } from "./service-process.js";

/**
 * Run before each test file (vitest.config.ts setupFiles), so that its hook runs after the file's
 * own: what a file's tests left running (a failure between a start and its stop, a close
 * forgotten) ends with the file, as it did when each file had a process of its own. The files of
 * a worker now share one (isolate: false), and a test app left open would go on delivering
 * webhooks, with their retries, to ports a later file's receivers may be given. What was left is said on
 * stderr, to be mended in the file that left it.
 */
// The file's path, read while it is being set up: an afterAll hook is not given it.
const file = expect.getState().testPath ?? "a test file";

afterAll(async () => {
  const services = killServicesLeftRunning();
  const apps = await closeAppsLeftOpen();
  if (services + apps > 0) process.stderr.write(`[file-cleanup] ${file}: ${apps} test app(s) left open, ${services} service process(es) left running; closed\n`);
});
