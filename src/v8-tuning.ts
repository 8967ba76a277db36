import { setFlagsFromString } from "node:v8";

/**
 * V8's allocation-site pretenuring, off for the service's process. Imported first by the entry
 * points (main.ts, worker.ts), so it is set before any request's code has run.
 *
 * Why: an event's objects (its command's arguments, keys and closures) live for its Redis round
 * trip, and at 100 connections most of them are alive at any young-generation collection. V8 then
 * judges their allocation sites long-lived and allocates them in the old generation directly;
 * there they die as young as before, but until the next full collection each of them keeps the
 * young objects it points to alive, and those are copied and promoted too. Measured
 * (bench/README.md, "The twenty-fourth stop"): 751 KB promoted per young collection at 100
 * connections against 18 KB with pretenuring off (`node bench/gc-trace.mjs`), and the event
 * call's instructions in the service 153.9k → 125.4k (`COST_TRAFFIC=events node
 * bench/read-cost.mjs`).
 *
 * Set here rather than on the command line: NODE_OPTIONS refuses this flag, and `node
 * dist/main.js` must stay the whole start command. V8 reads it at each collection, so setting
 * it at run time takes effect. (A larger young generation, `--max-semi-space-size=32`, measured
 * as well, but works only as a command-line flag.) A V8 without the flag prints "unrecognized
 * flag" and runs on as before. `node bench/gc-trace.mjs` shows the collector's figures under load.
 */
setFlagsFromString("--no-allocation-site-pretenuring");
