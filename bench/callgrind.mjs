// Counting what a process under `valgrind --tool=callgrind --instr-atstart=no` executes during one
// phase: script-cost.mjs (redis-server) and read-cost.mjs (the service, the baseline).
// COST_KEEP (a directory): each phase's dump is copied there as cg.<n>.out, in measuring order.
import { execFileSync } from "node:child_process";
import { copyFileSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";

const control = (pid, ...args) => execFileSync("callgrind_control", [...args, String(pid)], { stdio: "ignore" });

let kept = 0;

/** Inclusive instruction counts of the named functions in the newest dump in `dir`, and the program total. */
function readDump(dir, names) {
  // One dump at a time: each is removed once read.
  const dump = readdirSync(dir).filter((f) => f.startsWith("cg.out.")).map((f) => join(dir, f)).pop();
  const text = execFileSync("callgrind_annotate", ["--inclusive=yes", "--threshold=100", dump], { encoding: "utf8", maxBuffer: 64 << 20 });
  const count = (line) => Number(line.trim().split(/\s+/)[0].replace(/,/g, ""));
  const found = { total: count(text.split("\n").find((l) => l.includes("PROGRAM TOTALS"))) };
  for (const name of names) {
    const line = text.split("\n").find((l) => new RegExp(`:${name} \\[`).test(l));
    found[name] = line ? count(line) : 0;
  }
  if (process.env.COST_KEEP) copyFileSync(dump, join(process.env.COST_KEEP, `cg.${++kept}.out`));
  rmSync(dump);
  return found;
}

/**
 * Runs `work` with instrumentation on in process `pid` (its callgrind output in `dir`) and
 * returns what `work` returned and the counts: `total` and each of `names` (functions, inclusive).
 */
export async function countInstructions(pid, dir, names, work) {
  control(pid, "-z");
  control(pid, "-i", "on");
  const result = await work();
  control(pid, "-i", "off");
  control(pid, "-d");
  return { result, counts: readDump(dir, names) };
}
