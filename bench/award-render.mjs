// node bench/award-render.mjs   (after npm run build)
//
// Node's cost of rendering a metering read's awards, without HTTP or Redis: ten award records of
// the core tenant's energy system parsed, then rendered (id, date, trigger), and the award ids
// alone. A micro-benchmark in one process, for comparing two versions of the rendering code:
// the end-to-end read (bench/read-awards.mjs) cannot see differences this size through this
// VM's noise. Prints µs per ten awards; reports, never gates. The table's rows show a hit's cost
// (1k users) and, with 100k users cycling through 1M ids, a miss's (look, compute, store); the
// last, a look in a table that holds every id but is read in random order (hits, and the misses
// of ids that share a set).
import { awardText } from "../dist/api/points-json.js";
import { loadConfigFile } from "../dist/config/load.js";
import { rememberedAwardId } from "../dist/domain/award-ids.js";
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
  console.log(`${label.padEnd(34)} ${(Number(process.hrtime.bigint() - start) / iterations / 1000).toFixed(2)} µs`);
}

measure("parse 10 award records", () => (sink += records.map(parseAwardRecord).length));
// Users drawn from 100 000: as many distinct ids (1M) as the default table holds four times over.
measure("render 10 awards (ids computed)", (i) => (sink += parsed.map((a) => awardText(tenant, system, a, awardId(tenant.ns, `user-${i % 100_000}`, "energy", a.seq))).join(",").length));
measure("10 award ids (computed)", (i) => {
  for (let k = 0; k < 10; k++) sink += awardId(tenant.ns, `user-${i % 100_000}`, "energy", k).length;
});
// The metering read's ids: from the award id table (src/domain/award-ids.ts), 1 000 users: hits.
measure("10 award ids (table, 1k users)", (i) => {
  for (let k = 0; k < 10; k++) sink += rememberedAwardId(tenant.ns, `user-${i % 1000}`, "energy", k).length;
});
measure("10 award ids (table, 100k users)", (i) => {
  for (let k = 0; k < 10; k++) sink += rememberedAwardId(tenant.ns, `user-${i % 100_000}`, "energy", k).length;
});
// The bench's read after its events phase: 150 000 ids (100 000 users, one or two awards each),
// looked up in random order. They fit the default table (2^18 slots); what misses is an id whose
// set (a slot, when the table was direct-mapped) another id took.
const pool = Array.from({ length: 150_000 }, (_, i) => [`user-${i % 100_000}`, i < 100_000 ? 1 : 2]);
for (const [user, seq] of pool) rememberedAwardId(tenant.ns, user, "energy", seq);
const order = Array.from({ length: 1 << 20 }, () => pool[Math.floor(Math.random() * pool.length)]);
measure("1 award id (table, 150k ids, random)", (i) => {
  const [user, seq] = order[i & (order.length - 1)];
  sink += rememberedAwardId(tenant.ns, user, "energy", seq).length;
}, 1_000_000);
if (sink === 0) console.log("(nothing rendered)");
