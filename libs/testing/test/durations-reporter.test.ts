import { describe, expect, it } from "vitest";
import type { TestModule } from "vitest/node";
import { durationsTable, fileDurations } from "../src/durations-reporter.js";

const fake = (moduleId: string, ms: { collect: number; tests: number }, state = "passed") =>
  ({
    moduleId,
    state: () => state,
    diagnostic: () => ({ environmentSetupDuration: 0, prepareDuration: 10, setupDuration: 0, collectDuration: ms.collect, duration: ms.tests, heap: undefined, importDurations: {} }),
  }) as unknown as TestModule;

describe("durations reporter", () => {
  it("durations - each file's import, hooks and tests, slowest first, in a table with the total", () => {
    const rows = fileDurations([fake("/r/libs/a/test/fast.test.ts", { collect: 190, tests: 300 }), fake("/r/test/e2e-slow.test.ts", { collect: 1_990, tests: 40_000 }, "failed")], "/r");
    expect(rows).toEqual([
      { file: "test/e2e-slow.test.ts", seconds: 42, state: "failed" },
      { file: "libs/a/test/fast.test.ts", seconds: 0.5, state: "passed" },
    ]);
    expect(durationsTable(rows).split("\n")).toEqual([
      "file                       seconds",
      "test/e2e-slow.test.ts         42.0  (failed)",
      "libs/a/test/fast.test.ts       0.5",
      "2 files                       42.5",
    ]);
  });
});
