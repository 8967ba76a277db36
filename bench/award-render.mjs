// node bench/award-render.mjs   (after npm run build)
//
// Node's cost of rendering a metering read's awards, without HTTP or Redis: ten award records of
// the core tenant's energy system parsed, then rendered (id, date, trigger), and the award ids
// alone. A micro-benchmark in one process, for comparing two versions of the rendering code:
// the end-to-end read (bench/read-awards.mjs) cannot see differences this size through this
// VM's noise. Prints µs per ten awards; reports, never gates.
import { awardText } from "../dist/api/points-json.js";
import { loadConfigFile } from "../dist/config/load.js";
import { awardId } from "../dist/domain/ids.js";
import { parseAwardRecord } from "../dist/domain/outcome.js";

const [tenant] = loadConfigFile("bench/core-tenant.yaml");
const system = tenant.systemByKey.get("energy");
const triggerKey = system.triggers[0].key;
const records = Array.from({ length: 10 }, (_, i) => `${10 - i}|${1795544704599 - i * 1000}|-1|${90 - i}|${triggerKey}`);
const parsed = records.map(parseAwardRecord);
let sink = 0;

function measure(label, fn, iterations = 200_000) {
  for (let i = 0; i < 20_000; i++) fn(i); // warm-up: optimised code only
  const start = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) fn(i);
  console.log(`${label.padEnd(28)} ${(Number(process.hrtime.bigint() - start) / iterations / 1000).toFixed(2)} µs`);
}

measure("parse 10 award records", () => (sink += records.map(parseAwardRecord).length));
measure("render 10 awards", (i) => (sink += parsed.map((a) => awardText(tenant, system, `user-${i % 100_000}`, a)).join(",").length));
measure("10 award ids", (i) => {
  for (let k = 0; k < 10; k++) sink += awardId(tenant.ns, `user-${i % 100_000}`, "energy", k).length;
});
if (sink === 0) console.log("(nothing rendered)");
