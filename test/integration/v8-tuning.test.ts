import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { WORKER } from "../helpers/service-process.js";

// src/v8-tuning.ts turns V8's allocation-site pretenuring off at run time (bench/README.md, "The
// twenty-fourth stop"). V8's flags are not readable from JavaScript, but its cached-data version
// tag is a hash of them, recomputed when a flag changes: a process whose tag equals that of a
// process started with --no-allocation-site-pretenuring has that flag set, and no other change.
const MAIN = new URL("../../dist/main.js", import.meta.url).pathname;
const PRINT_TAG_AT_EXIT = 'data:text/javascript,import v8 from "node:v8"; process.on("exit", () => process.stdout.write("tag " + v8.cachedDataVersionTag() + "\\n"))';

function tagOf(args: string[], env: Record<string, string> = {}): string {
  const { REDIS_URL: _omit, ...base } = process.env;
  const run = spawnSync(process.execPath, args, { env: { ...base, ...env }, encoding: "utf8" });
  const tag = /^tag (\d+)$/m.exec(run.stdout)?.[1];
  if (!tag) throw new Error(`no tag printed: ${run.stdout}${run.stderr}`);
  return tag;
}

describe("the built entry points turn V8's allocation-site pretenuring off", () => {
  const plain = tagOf(["--import", PRINT_TAG_AT_EXIT, "-e", ""]);
  const withFlag = tagOf(["--no-allocation-site-pretenuring", "--import", PRINT_TAG_AT_EXIT, "-e", ""]);

  it("the flag changes the tag (the check can tell)", () => {
    expect(withFlag).not.toBe(plain);
  });

  it("node dist/main.js: set before it exits on a bad tenant file", () => {
    expect(tagOf(["--import", PRINT_TAG_AT_EXIT, MAIN], { LAUREL_CONFIG: "/nonexistent/laurel.yaml" })).toBe(withFlag);
  });

  it("node dist/worker.js: set before it exits without REDIS_URL", () => {
    expect(tagOf(["--import", PRINT_TAG_AT_EXIT, WORKER])).toBe(withFlag);
  });
});
