import { describe, expect, it } from "vitest";
import { execFileSync, spawnSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT, tempDir } from "@sloserve/stack";
import { OBJECT, VARIANT, modelsDir, outputsOf, query, reference } from "./fixtures.js";

/**
 * The Lambda build documented in docs/ARCHITECTURE.md is real: scripts/build-lambda.sh makes the zip,
 * which is unpacked outside the repository (so nothing resolves from the repo's node_modules) and its
 * `index.handler` is called by a plain node process, as the nodejs20.x runtime would, with MODELS_DIR
 * pointing at a layer-like directory.
 */

describe("lambda bundle", () => {
  it("lambda bundle - the built zip's handler answers a query outside the repository", async () => {
    for (const tool of ["zip", "unzip"]) {
      if (spawnSync("sh", ["-c", `command -v ${tool}`]).status !== 0) throw new Error(`${tool} is not installed: apt-get install -y ${tool}`);
    }
    const out = tempDir("lambda-build");
    execFileSync("bash", [join(REPO_ROOT, "libs/providers/scripts/build-lambda.sh"), out], { stdio: "pipe" });
    const task = tempDir("lambda-task");
    execFileSync("unzip", ["-q", join(out, "function.zip"), "-d", task]);

    const event = { variant: VARIANT, object: OBJECT, payload: Buffer.from(query(2, 6)).toString("base64"), deadlineMs: Date.now() + 60_000 };
    writeFileSync(join(task, "event.json"), JSON.stringify(event));
    const script = `const { handler } = await import("./index.mjs"); const e = JSON.parse(await (await import("node:fs/promises")).readFile("./event.json", "utf8")); process.stdout.write(JSON.stringify(await handler(e)));`;
    const answer = JSON.parse(
      execFileSync(process.execPath, ["--input-type=module", "-e", script], { cwd: task, env: { PATH: process.env.PATH ?? "", MODELS_DIR: modelsDir() } }).toString(),
    ) as { payload: string; coldStart: boolean };
    expect(answer.coldStart).toBe(true);
    expect(Array.from(outputsOf(Buffer.from(answer.payload, "base64")).data)).toEqual(Array.from(await reference(2, 6)));
    for (const dir of [out, task]) rmSync(dir, { recursive: true, force: true });
  });
});
