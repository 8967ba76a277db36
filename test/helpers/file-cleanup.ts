import { afterAll, expect } from "vitest";
import { killServicesLeftRunning } from "./service-process.js";

/**
 * Run before each test file (vitest.config.ts setupFiles), so that its hook runs after the file's
 * own: the service processes a file's tests left running (a failure between a start and its
 * stop) are killed with the file, as they were when each file had a process of its own. The
 * files of a worker now share one (isolate: false), where service-process.ts's own hook,
 * registered when the module was evaluated, ran for the first file only. What was left is said
 * on stderr, to be mended in the file that left it.
 *
 * Synchronous, and importing nothing of the service: a form that also closed the test apps left
 * open (awaiting their close, app.ts imported here) made the worker's process exit unexpectedly
 * at its end in most runs of a file that starts a test app in-process (batch-events-hostile's
 * alone: 2 of 3, and 4 of 4 with isolation on; 0 of 4 without it), though no app was left open.
 * Not understood; test apps are closed by their files (a full run left none).
 */

// The file's path, read while it is being set up: an afterAll hook is not given it.
const file = expect.getState().testPath ?? "a test file";

afterAll(() => {
  const services = killServicesLeftRunning();
  if (services > 0) process.stderr.write(`[file-cleanup] ${file}: ${services} service process(es) left running; killed\n`);
});
