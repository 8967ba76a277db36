import { performance } from "node:perf_hooks";

/**
 * Polls `predicate` (every `everyMs`, 50 by default) until it holds: a state to reach, not a time
 * to wait. With `exited`, fails at once if the process exits first (with its `output`, when
 * given). The bound, four minutes, is no budget (a slow machine reaches the state, later): it
 * names what never came before the test's own timeout (vitest.config.ts, five minutes) would say
 * less. A shorter `everyMs` is for a test that acts as soon as the state comes (before more of
 * the same follows), not for speed.
 */
export async function waitFor(predicate: () => boolean | Promise<boolean>, what: string, exited?: Promise<unknown>, output?: () => string, everyMs = 50): Promise<void> {
  let gone = false;
  void exited?.then(() => (gone = true));
  // Four minutes of the clock, not a count of polls: a predicate that calls over the network
  // stretched 4 800 polls past the test's own timeout, which then said less.
  const until = performance.now() + 240_000;
  while (performance.now() < until) {
    if (await predicate()) return;
    // With `output`, the failure shows what the process said before it went.
    if (gone) throw new Error(`process exited before ${what}${output ? `; its output:\n${output()}` : ""}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out waiting for ${what}`);
}
