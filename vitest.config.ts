import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";
import UnpluginTypia from "@ryoppippi/unplugin-typia/vite";

export default defineConfig({
  plugins: [UnpluginTypia({ tsconfig: "./tsconfig.json" })],
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/helpers/global-setup.ts"],
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
  },
});
