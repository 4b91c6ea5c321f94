import { describe, expect, it } from "vitest";
import type { TestModule } from "vitest/node";
import { durationsTable, failures, fileDurations, recap } from "../src/durations-reporter.js";

interface FakeTest {
  name: string;
  state: "passed" | "failed" | "skipped";
  error?: string;
}

const fake = (moduleId: string, ms: { collect: number; tests: number }, state = "passed", tests: FakeTest[] = [], fileError?: string) =>
  ({
    moduleId,
    state: () => state,
    errors: () => (fileError ? [{ name: "Error", message: fileError }] : []),
    diagnostic: () => ({ environmentSetupDuration: 0, prepareDuration: 10, setupDuration: 0, collectDuration: ms.collect, duration: ms.tests, heap: undefined, importDurations: {} }),
    children: {
      allTests: () =>
        tests.map((t) => ({
          fullName: t.name,
          result: () => ({ state: t.state, errors: t.error ? [{ name: "AssertionError", message: t.error }] : [] }),
        })),
    },
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
    expect(durationsTable(rows, 1).split("\n")).toEqual([
      "file                    seconds",
      "test/e2e-slow.test.ts      42.0  (failed)",
      "… 1 faster files",
      "2 files                    42.5",
    ]);
  });

  it("recap - failed tests and files that failed outside a test, then one closing count line", () => {
    const modules = [
      fake("/r/test/a.test.ts", { collect: 1, tests: 1 }, "failed", [
        { name: "serves > answers", state: "failed", error: "expected 1 to be 2\nline 2\nline 3\nline 4\nline 5" },
        { name: "serves > refuses", state: "passed" },
        { name: "serves > later", state: "skipped" },
      ]),
      fake("/r/test/b.test.ts", { collect: 1, tests: 1 }, "failed", [], "beforeAll timed out"),
      fake("/r/test/c.test.ts", { collect: 1, tests: 1 }, "passed", [{ name: "c", state: "passed" }]),
    ];
    expect(failures(modules, "/r")).toEqual([
      { where: "test/a.test.ts > serves > answers", message: "AssertionError: expected 1 to be 2\n    line 2\n    line 3\n    line 4" },
      { where: "test/b.test.ts", message: "Error: beforeAll timed out" },
    ]);
    const text = recap(modules, [{ name: "TypeError", message: "x is undefined" }], "/r").split("\n");
    expect(text[0]).toBe("Failures (2), each with the first lines of its error:");
    expect(text).toContain("  ✗ unhandled TypeError");
    expect(text.at(-1)).toBe("tests: 2 passed, 1 failed, 1 skipped");
    expect(recap([modules[2]!], [], "/r")).toBe("tests: 1 passed, 0 failed, 0 skipped");
  });
});
