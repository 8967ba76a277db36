import { spawnSync } from "node:child_process";
import { availableParallelism } from "node:os";
import { describe, expect, it } from "vitest";

/**
 * BENCH_PIN=1 (bench/processes.mjs pinProcesses) pins Redis to the first CPU this process may run
 * on and the rest of the bench to the others. It read the count alone and assumed CPUs 0..n-1,
 * so in a restricted cpuset (CPUs 2-5, say) taskset refused CPU 0 and the bench exited 1.
 */
function allowedCpusUnder(taskset: string[] = []): number[] {
  const script = 'import("./bench/processes.mjs").then((m) => console.log(JSON.stringify(m.allowedCpus())))';
  const [command, ...args] = [...taskset, process.execPath, "--input-type=module", "-e", script];
  const run = spawnSync(command, args, { encoding: "utf8" });
  expect(run.status, run.stderr).toBe(0);
  return JSON.parse(run.stdout) as number[];
}

describe("bench pinning: the CPUs this process may run on", () => {
  it("are every CPU when nothing restricts the process", () => {
    expect(allowedCpusUnder()).toHaveLength(availableParallelism());
  });

  it.skipIf(availableParallelism() < 2 || spawnSync("taskset", ["-V"]).status !== 0)("are the ones a cpuset allows, not 0..n-1", () => {
    const last = allowedCpusUnder().at(-1)!;
    expect(allowedCpusUnder(["taskset", "-c", String(last)])).toEqual([last]);
  });
});
