import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";
import UnpluginTypia from "@ryoppippi/unplugin-typia/vite";

export default defineConfig({
  plugins: [UnpluginTypia({ tsconfig: "./tsconfig.json" })],
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/helpers/global-setup.ts"],
    // The services a file left running are killed with the file (the files of a worker share its process: isolate below).
    setupFiles: ["test/helpers/file-cleanup.ts"],
    // A guard against a hang, never a limit a test should meet: a test cut off by it runs on in
    // the background, and a property's runs still under way FLUSHDB and move the clock under the
    // next test of its file. The travel property takes 25 s on a slow box alone, and went past
    // 60 s there with other work beside it.
    testTimeout: 300_000,
    hookTimeout: 300_000,
    // One test file per core, at least two. Vitest's default is one fewer than the cores, so on a
    // 2-core machine the files ran one at a time (7 min 23 s on a slow box), though most of their
    // time is spent waiting on the redis-servers, services and workers they start; two at a time
    // took 4 min 12 s there. Files keep apart by their own tenant ids (global-setup.ts).
    maxWorkers: Math.max(2, availableParallelism()),
    // The files of a worker share its process and its modules instead of a fresh process each
    // (vitest's default, isolate: true), where every file loaded the service's modules again
    // (ioredis, BullMQ, uWS, typia's validators: ~2 s of CPU a file) beside the services and
    // redis-servers the other worker's tests start. On a slow 2-core box: 10 min 37 s isolated,
    // 7 min 14 s shared (bench/README.md, the fifty-fifth stop). Files keep apart as they did:
    // their own tenant ids, and what one changes process-wide it puts back (process.env,
    // process.exit, setScriptMode). Checked in one process with the files in a shuffled order
    // (`--no-isolate --maxWorkers=1 --sequence.shuffle.files`): every test passed.
    isolate: false,
  },
});
