import { defineConfig } from "vitest/config";
import UnpluginTypia from "@ryoppippi/unplugin-typia/vite";

export default defineConfig({
  plugins: [UnpluginTypia({ tsconfig: "./tsconfig.json" })],
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/helpers/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
