import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { guardedChildProcess } from "../src/child-process-guard.js";
import { INTEGRATION_MARKER, integrationReason, integrationTestFiles, testFiles } from "../src/index.js";

// The fixtures name process starters only in pieces: written whole, they would make this file an
// integration test by the very rule it tests.
const NATS = "start" + "Nats";
const CP = "node:child" + "_process";
const STACK = "start" + "Stack";
const BROWSER = "play" + "wright-core";

const root = mkdtempSync(join(tmpdir(), "sloserve-test-files-"));
const put = (path: string, text: string) => {
  mkdirSync(dirname(join(root, path)), { recursive: true });
  writeFileSync(join(root, path), text);
};
put("libs/a/test/pure.test.ts", `import { x } from "../src/index.js";\nimport { tempDir } from "@sloserve/stack";\n`);
put("libs/a/src/index.ts", `import { spawn } from "${CP}";\nexport const x = 1;\n`);
put("libs/a/test/nats.test.ts", `import { ${NATS} } from "@sloserve/stack";\n`);
put("libs/a/test/deep/helper-user.test.ts", `import { boot } from "../support.js";\n`);
put("libs/a/test/support.ts", `export { boot } from "./boot.js";\n`);
put("libs/a/test/boot.ts", `import { execFile } from "${CP}";\nexport const boot = execFile;\n`);
put("services/s/test/marked.test.ts", `/* a test */\n${INTEGRATION_MARKER} — it starts a server its own way\nimport { it } from "vitest";\n`);
put("services/s/dist-types/test/old.test.ts", "");
put("test/e2e-x.test.ts", `import { ${STACK} } from "@sloserve/stack";\n`);
put("test/browser.test.ts", `import { chromium } from "${BROWSER}";\n`);
put("bench/test/b.test.ts", "");
put("scripts/not-a-root.test.ts", "");

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("integration test files", () => {
  it("test files - every *.test.ts under the roots of vitest.config.ts, none from dist-types", () => {
    expect(testFiles(root)).toEqual([
      "bench/test/b.test.ts",
      "libs/a/test/deep/helper-user.test.ts",
      "libs/a/test/nats.test.ts",
      "libs/a/test/pure.test.ts",
      "services/s/test/marked.test.ts",
      "test/browser.test.ts",
      "test/e2e-x.test.ts",
    ]);
  });

  it("test files - a file is an integration test by a process starter, its own helpers, or the marker; a package's src/ is not read", () => {
    expect(Object.fromEntries(integrationTestFiles(root))).toEqual({
      "libs/a/test/deep/helper-user.test.ts": "uses child_process (through libs/a/test/boot.ts)",
      "libs/a/test/nats.test.ts": "uses a process starter of @sloserve/stack",
      "services/s/test/marked.test.ts": `marked ${INTEGRATION_MARKER}`,
      "test/browser.test.ts": "uses a browser (playwright)",
      "test/e2e-x.test.ts": "uses a process starter of @sloserve/stack",
    });
    expect(integrationReason(root, "libs/a/test/pure.test.ts")).toBeUndefined();
  });

  it("test files - in this repository, every end-to-end and fault test is an integration test", () => {
    const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
    const all = testFiles(repo);
    const integration = integrationTestFiles(repo, all);
    const endToEnd = all.filter((f) => /^test\/(e2e|fault)-/.test(f));
    expect(endToEnd.length).toBeGreaterThan(10);
    expect(endToEnd.filter((f) => !integration.has(f))).toEqual([]);
    expect(integration.get("libs/testing/test/test-files.test.ts")).toBeUndefined();
  });

  it("test files - the unit run's child_process refuses to start a process, saying why", () => {
    const real = { spawn: () => "spawned", execFileSync: () => "ran", ChildProcess: class {} } as unknown as Parameters<typeof guardedChildProcess>[0];
    const guarded = guardedChildProcess(real);
    expect(() => guarded.spawn("nats-server", [])).toThrow(/^child_process\.spawn \(nats-server\) in npm run test:unit, which runs only the tests that start no process: this test file is an integration test/);
    const asDefault = (guarded as unknown as { default: typeof guarded }).default; // as a default import sees it
    expect(() => asDefault.execFileSync("git")).toThrow(/child_process\.execFileSync \(git\)/);
    expect(guarded.ChildProcess).toBe(real.ChildProcess);
  });
});
