import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["libs/*/test/**/*.test.ts", "services/*/test/**/*.test.ts", "test/**/*.test.ts", "bench/test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Integration suites start their own nats-server/redis-server on free ports. One file at a time:
    // the end-to-end suites measure latency under load, and the machines have two cores.
    pool: "forks",
    maxWorkers: 1,
    fileParallelism: false,
    // Beside the default output: each test file's duration, slowest first, at the end of the run.
    reporters: ["default", "./libs/testing/src/durations-reporter.ts"],
  },
});
