import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServer } from "node:net";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateInputs } from "../src/infer.js";
import { CliError } from "../src/client.js";
import { sloserve, STACK_LINE } from "./run.js";

/**
 * The bin without a server: help, usage mistakes, unreadable files and a frontend that is not there
 * each end with a one-line message and their exit code (2 usage, 3 unreachable), never a stack trace;
 * the simulator's scenarios through libs/sim's own command.
 */

let dir: string;
/** A port nothing listens on: bound, then closed. */
let closedPort: number;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "sloserve-cli-"));
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  closedPort = (server.address() as { port: number }).port;
  await new Promise((r) => server.close(r));
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("cli", () => {
  it("cli - --help lists the commands and exits 0", async () => {
    const r = await sloserve(["--help"]);
    expect(r.code).toBe(0);
    for (const c of ["register", "apps", "models", "variants", "infer", "pipelines", "quota", "workers", "decisions", "cost", "sim"]) expect(r.stdout).toMatch(new RegExp(`^  ${c}\\b`, "m"));
    expect(r.stdout).toMatch(/SLOSERVE_URL/);
  }, 120_000);

  it("cli - user mistakes: one clear line and exit 2 or 3, no stack trace", async () => {
    const url = `http://127.0.0.1:${closedPort}`;
    const badJson = join(dir, "bad.json");
    writeFileSync(badJson, "{ not json");
    const noInputs = join(dir, "no-inputs.json");
    writeFileSync(noInputs, JSON.stringify({ data: [1, 2] }));
    const cases: Array<{ args: string[]; code: number; message: RegExp }> = [
      { args: ["apps", "--url", url], code: 3, message: new RegExp(`cannot reach the sloserve frontend at ${url.replace(/\./g, "\\.")} \\(ECONNREFUSED\\)`) },
      { args: ["apps"], code: 3, message: /cannot reach/ },
      { args: ["infer"], code: 2, message: /missing required argument 'name'/ },
      { args: ["frobnicate"], code: 2, message: /unknown command 'frobnicate'/ },
      { args: ["infer", "m", "--batch", "0"], code: 2, message: /--batch must be a positive integer/ },
      { args: ["infer", "digits", "--min-accuracy", "1.5"], code: 2, message: /--min-accuracy must be a number from 0 to 1/ },
      { args: ["infer", "digits", "--min-accuracy", "0.9", "--generate", "--url", url], code: 2, message: /a model-less query needs its latency SLO: --slo-ms/ },
      { args: ["infer", "m", "--url", url], code: 2, message: /give the query's input: --input FILE/ },
      { args: ["infer", "m", "--input", join(dir, "missing.json"), "--url", url], code: 2, message: /cannot read the input file .*missing\.json: no such file/ },
      { args: ["infer", "m", "--input", badJson, "--url", url], code: 2, message: /input file .*bad\.json is not valid JSON/ },
      { args: ["infer", "m", "--input", noInputs, "--url", url], code: 2, message: /must hold an Open Inference Protocol request/ },
      { args: ["register", "a", "m", join(dir, "none.onnx"), "--url", url], code: 2, message: /cannot read the model file .*none\.onnx: no such file/ },
      { args: ["register", "a", "m", badJson, "--profile-shape", "{x", "--url", url], code: 2, message: /--profile-shape must be JSON/ },
      { args: ["pipelines", "register", badJson, "--url", url], code: 2, message: /pipeline spec .*bad\.json is not valid JSON/ },
      { args: ["models", "--url", "not a url"], code: 2, message: /--url "not a url" is not a URL/ },
      { args: ["quota", "set", "digits", "--rate", "0", "--burst", "1", "--concurrency", "1"], code: 2, message: /--rate must be a positive number/ },
      { args: ["quota", "set", "digits", "--rate", "5", "--concurrency", "1"], code: 2, message: /required option '--burst <n>' not specified/ },
      { args: ["quota", "get", "digits", "--url", url], code: 3, message: /cannot reach/ },
      { args: ["quota", "get", "--url", url], code: 2, message: /give the app whose quota it is, or --key KEY_ID/ },
      { args: ["quota", "delete", "digits", "--key", "0123456789ab", "--url", url], code: 2, message: /give an app or --key KEY_ID, not both/ },
    ];
    const runs = await Promise.all(cases.map((c) => sloserve(c.args, { SLOSERVE_URL: url })));
    for (const [i, c] of cases.entries()) {
      const r = runs[i]!;
      expect({ args: c.args.join(" "), code: r.code }).toEqual({ args: c.args.join(" "), code: c.code });
      expect(r.stderr, c.args.join(" ")).toMatch(c.message);
      expect(r.stderr, c.args.join(" ")).not.toMatch(STACK_LINE);
      expect(r.stdout).toBe("");
    }
  }, 300_000);

  it("cli - generated inputs follow the signature: a dynamic batch, --shape for other dynamic dimensions", () => {
    const [digits] = generateInputs([{ name: "input", datatype: "FP32", shape: [-1, 1, 28, 28] }], 3, new Map());
    expect(digits).toMatchObject({ name: "input", datatype: "FP32", shape: [3, 1, 28, 28] });
    expect(digits!.data).toHaveLength(3 * 784);
    expect(digits!.data.every((x) => typeof x === "number" && x >= 0 && x <= 1)).toBe(true);
    const [ocr] = generateInputs([{ name: "x", datatype: "FP32", shape: [-1, 3, 48, -1] }], 1, new Map([["x", [2, 3, 48, 100]]]));
    expect(ocr!.shape).toEqual([2, 3, 48, 100]);
    expect(() => generateInputs([{ name: "x", datatype: "FP32", shape: [-1, 3, 48, -1] }], 1, new Map())).toThrow(/give its shape with --shape x=/);
    expect(() => generateInputs([{ name: "x", datatype: "FP32", shape: [-1, 3] }], 1, new Map([["x", [1, 4]]]))).toThrow(/does not fit the input's shape \[-1, 3\]/);
    expect(() => generateInputs([{ name: "x", datatype: "FP32", shape: [-1, 3] }], 1, new Map([["y", [1, 3]]]))).toThrow(CliError);
    const [ids] = generateInputs([{ name: "ids", datatype: "INT64", shape: [2] }], 1, new Map());
    expect(ids!.data.every((x) => Number.isInteger(x))).toBe(true);
  });

  it("cli - sim: the simulator's scenarios through its own command; an unknown one is a usage error", async () => {
    const list = await sloserve(["sim", "list", "--json"]);
    expect(list.code, list.stderr).toBe(0);
    const { scenarios } = JSON.parse(list.stdout) as { scenarios: Array<{ name: string; description: string }> };
    expect(scenarios.map((s) => s.name)).toEqual(expect.arrayContaining(["infaas-table3", "mark-twitter", "inferline-planner"]));
    expect(scenarios.every((s) => s.description.length > 10)).toBe(true);
    const unknown = await sloserve(["sim", "run", "no-such-scenario"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown scenario "no-such-scenario"; known: infaas-table3/);
    expect(unknown.stderr).not.toMatch(STACK_LINE);
  }, 300_000);
});
