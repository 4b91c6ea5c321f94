import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["libs/*/test/**/*.test.ts", "services/*/test/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Integration suites start their own nats-server/redis-server on free ports; two cores here.
    pool: "forks",
    maxWorkers: 2,
  },
});
