// node bench/jit-annotate.mjs <callgrind dump> <perf map> [requests]   (needs valgrind's callgrind_annotate)
//
// callgrind names V8's generated code by address only ("???:0x000000000d18cec0"). A service
// started with `--perf-basic-prof` writes /tmp/perf-<pid>.map, the name and range of every piece
// of code V8 generated; this prints callgrind's per-function instructions with those addresses
// named ("JIT JS:*encodeCommand file:///.../redis-script.js:44:30"; `*` optimised, `^` baseline),
// summed by name and divided by `requests` (default 1). For the service under read-cost.mjs:
//   COST_TRAFFIC=events COST_ROUNDS=1 COST_KEEP=/tmp/keep COST_SERVICE_ENV=NODE_OPTIONS=--perf-basic-prof node bench/read-cost.mjs
//   node bench/jit-annotate.mjs /tmp/keep/cg.1.out /tmp/perf-<service pid>.map 3000
// JIT_INCLUSIVE=1 prints inclusive counts (a function and everything it called), JIT_TOP=N the
// N largest rows (default 50). Reports; never gates.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

const [dump, mapFile, requestsText = "1"] = process.argv.slice(2);
if (!dump || !mapFile) {
  console.error("usage: node bench/jit-annotate.mjs <callgrind dump> <perf map> [requests]");
  process.exit(2);
}
const requests = Number(requestsText);
const top = Number(process.env.JIT_TOP ?? 50);

// perf map lines: "<start hex> <size hex> <name>", sorted here by start for a binary search.
const ranges = readFileSync(mapFile, "utf8")
  .split("\n")
  .filter(Boolean)
  .map((line) => {
    const [start, size, ...name] = line.split(" ");
    return { start: parseInt(start, 16), end: parseInt(start, 16) + parseInt(size, 16), name: name.join(" ") };
  })
  .sort((a, b) => a.start - b.start);

function codeAt(address) {
  let lo = 0;
  let hi = ranges.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (ranges[mid].start <= address) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found >= 0 && address < ranges[found].end ? ranges[found].name : null;
}

const inclusive = process.env.JIT_INCLUSIVE === "1";
const text = execFileSync("callgrind_annotate", [`--inclusive=${inclusive ? "yes" : "no"}`, "--threshold=100", dump], { encoding: "utf8", maxBuffer: 256 << 20 });
const sums = new Map();
let total = 0;
for (const line of text.split("\n")) {
  const match = line.match(/^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(.*)$/);
  if (!match) continue;
  const count = Number(match[1].replace(/,/g, ""));
  let name = match[2];
  if (name.includes("PROGRAM TOTALS")) {
    total = count;
    continue;
  }
  const address = name.startsWith("???:0x") ? name.match(/0x([0-9a-f]+)/) : null;
  if (address) name = `JIT ${codeAt(parseInt(address[1], 16)) ?? "(not in the map)"}`;
  else name = name.replace(/\s*\[.*\]$/, "");
  sums.set(name, (sums.get(name) ?? 0) + count);
}
console.log(`${(total / requests / 1000).toFixed(1)}k instructions per request in all; ${inclusive ? "inclusive" : "exclusive"} per function:`);
for (const [name, count] of [...sums].sort((a, b) => b[1] - a[1]).slice(0, top)) {
  console.log(`${(count / requests).toFixed(0).padStart(9)}  ${name.slice(0, 160)}`);
}
