import { fileURLToPath } from "node:url";
import { configDefaults, defineConfig, mergeConfig } from "vitest/config";
import base from "./vitest.config.js";
import { integrationTestFiles } from "./libs/testing/src/test-files.js";

/**
 * `npm run test:unit`: the test files that start no process (no nats-server, redis-server, services,
 * worker or function processes, browser), all of them. Which files those are is read from the files
 * themselves (libs/testing/src/test-files.ts): a test that uses a process starter of @sloserve/stack,
 * a local worker or function pool, child_process or playwright, itself or through its own helpers, or
 * that carries "// @integration" on its first lines, is left to `npm test`. The setup file refuses
 * child_process, so that a test that starts a process some other way fails here instead of slowing the
 * run unnoticed. Unlike the integration suites, these may run side by side.
 */
const integration = [...integrationTestFiles(fileURLToPath(new URL(".", import.meta.url))).keys()];

export default mergeConfig(
  base,
  defineConfig({
    test: {
      exclude: [...configDefaults.exclude, ...integration],
      setupFiles: ["./libs/testing/src/unit-setup.ts"],
      fileParallelism: true,
      maxWorkers: 2,
    },
  }),
);
