import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["**/*.test.ts"],
    exclude: ["node_modules/**", ".data/**"],
    globalSetup: ["./scripts/test/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // Two cores: files run in forks so a crashing enclave or devnet cannot take the runner down.
    pool: "forks",
  },
});
