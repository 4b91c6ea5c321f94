import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { decodeTensors } from "@sloserve/contracts";
import { OnnxRunner } from "@sloserve/runtime";
import { startStack, digitsModels, type Stack, type BundledModel } from "@sloserve/stack";
import { waitFor } from "@sloserve/testing";
import { sloserve, STACK_LINE, type Run } from "./run.js";

/**
 * The `sloserve` bin against a real stack (nats-server, redis-server, every service, one CPU worker):
 * a zoo model registered with its validation set and followed through profiling, the listings, a
 * model query checked against onnxruntime run directly, a model-less query, a one-stage pipeline,
 * workers, the dispatcher's load decision with its reason, cost, and the server's refusals as exit 1
 * with its message.
 */

let stack: Stack;
let model: BundledModel;
let run: (...args: string[]) => Promise<Run>;
/** The model's variants as `variants --json` listed them after registration. */
let listedVariants: Array<{ name: string; quantization: string }> = [];
/** Four validation digits: the query's input. */
let rows: Float32Array;

const json = <T>(r: Run): T => {
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as T;
};

beforeAll(async () => {
  model = (await digitsModels()).find((d) => d.name === "digits-logreg")!;
  stack = await startStack({ cpuWorkers: 1, workerThreads: 2 });
  run = (...args) => sloserve(args, { SLOSERVE_URL: stack.httpUrl });
  writeFileSync(join(stack.dir, "validation.bin"), model.validation!);
  const validation = decodeTensors(model.validation!).tensors.find((t) => t.name === "input")!;
  rows = (validation.data as Float32Array).slice(0, 4 * 784);
  writeFileSync(join(stack.dir, "query.json"), JSON.stringify({ inputs: [{ name: "input", datatype: "FP32", shape: [4, 1, 28, 28], data: Array.from(rows) }] }));
  writeFileSync(join(stack.dir, "bad-query.json"), JSON.stringify({ inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 27], data: new Array(756).fill(0) }] }));
  writeFileSync(join(stack.dir, "pipeline.json"), JSON.stringify({ name: "solo", slo: { p99_ms: 5000 }, stages: [{ name: "only", model: model.name }] }));
}, 300_000);

afterAll(async () => {
  await stack?.stop();
});

describe("e2e cli", () => {
  it("cli e2e - register follows profiling; apps, models and variants list what the server holds", async () => {
    const registered = json<{ name: string; app: string; validation_set_size: number; variants: Array<{ hardware: string; profiled: boolean }> }>(
      await run("register", model.app, model.name, model.path, "--validation", join(stack.dir, "validation.bin"), "--task", model.task, "--dataset", model.dataset, "--json"),
    );
    expect(registered).toMatchObject({ name: model.name, app: "digits", validation_set_size: 1500 });
    // register waits for the CPU variants (there is a CPU worker); accelerator variants wait for theirs.
    const cpu = registered.variants.filter((v) => v.hardware === "cpu");
    expect(cpu.length).toBeGreaterThan(0);
    expect(cpu.every((v) => v.profiled)).toBe(true);
    expect(registered.variants.some((v) => v.hardware !== "cpu" && !v.profiled)).toBe(true);

    const [apps, models, variants, table] = await Promise.all([run("apps", "--json"), run("models", "digits", "--json"), run("variants", model.name, "--json"), run("variants", model.name)]);
    const listedApps = json<{ apps: Array<{ app: string; models: string[]; variants: number; profiled: number }> }>(apps).apps;
    expect(listedApps).toHaveLength(1);
    expect(listedApps[0]).toMatchObject({ app: "digits", models: [model.name], variants: registered.variants.length, profiled: cpu.length });
    expect(json<{ models: Array<{ name: string }> }>(models).models.map((m) => m.name)).toEqual([model.name]);
    const listed = json<{ variants: Array<{ name: string; quantization: string; profiled: boolean; peak_qps: number | null; accuracy: number | null }> }>(variants).variants;
    listedVariants = listed;
    expect(listed).toHaveLength(registered.variants.length);
    for (const v of listed.filter((x) => x.profiled)) {
      expect(v.peak_qps).toBeGreaterThan(0);
      expect(v.accuracy).toBeGreaterThan(0.8);
    }
    // The table names every variant, with its profile.
    expect(table.code).toBe(0);
    for (const v of listed) expect(table.stdout).toContain(v.name);
    expect(table.stdout).toMatch(/variant\s+hw\s+quant\s+threads\s+batch/);
  }, 600_000);

  it("cli e2e - infer equals onnxruntime run directly; model-less and pipeline queries answer; the load decision is listed", async () => {
    const answer = json<{ model_name: string; served_by: { variant: string }; outputs: Array<{ name: string; shape: number[]; data: number[] }> }>(await run("infer", model.name, "--input", join(stack.dir, "query.json"), "--json"));
    expect(answer.model_name).toBe(model.name);
    const runner = await OnnxRunner.load(readFileSync(model.path));
    const [reference] = await runner.runOne([{ name: "input", datatype: "FP32", shape: [4, 1, 28, 28], data: rows }]);
    const expected = Array.from(reference!.data as Float32Array);
    const out = answer.outputs[0]!;
    expect(out.shape).toEqual([4, 10]);
    const served = listedVariants.find((v) => v.name === answer.served_by.variant)!;
    expect(served).toBeDefined();
    const argmax = (xs: number[], r: number) => {
      const row = xs.slice(r * 10, r * 10 + 10);
      return row.indexOf(Math.max(...row));
    };
    if (served.quantization === "fp32") {
      for (const [i, e] of expected.entries()) expect(out.data[i]).toBeCloseTo(e, 5);
    } else {
      // An int8 variant: its accuracy is measured within 2 points of fp32; these four digits get the same class.
      for (let r = 0; r < 4; r++) expect(argmax(out.data, r)).toBe(argmax(expected, r));
    }

    const [modelless, pipeline, text] = await Promise.all([
      run("infer", "digits", "--slo-ms", "2000", "--generate", "--batch", "2", "--json"),
      run("pipelines", "register", join(stack.dir, "pipeline.json"), "--json"),
      run("infer", model.name, "--generate"),
    ]);
    const ml = json<{ served_by: { model: string }; outputs: Array<{ shape: number[]; data: number[] }> }>(modelless);
    expect(ml.served_by.model).toBe(model.name);
    expect(ml.outputs[0]!.shape).toEqual([2, 10]);
    expect(json<{ name: string }>(pipeline).name).toBe("solo");
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/served by: .*variant /);
    expect(text.stdout).toMatch(/^probabilities\s+FP32\s+\[1, 10\]\s+.*argmax \d/m);

    const [listed, piped, decisions, workers] = await Promise.all([
      run("pipelines", "--json"),
      run("pipelines", "infer", "solo", "--input", join(stack.dir, "query.json"), "--json"),
      run("decisions", "--source", "dispatcher", "--json"),
      run("workers", "--json"),
    ]);
    expect(json<{ pipelines: Array<{ name: string }> }>(listed).pipelines.map((p) => p.name)).toEqual(["solo"]);
    expect(json<{ outputs: Array<{ shape: number[] }> }>(piped).outputs[0]!.shape).toEqual([4, 10]);
    // The first query found nothing loaded: the dispatcher asked for a variant, and says why.
    const loads = json<{ decisions: Array<{ source: string; action: string; model: string; variant: string; reason: string; at_ms: number }> }>(decisions).decisions;
    expect(loads.length).toBeGreaterThan(0);
    expect(loads[0]).toMatchObject({ source: "dispatcher", action: "load", model: model.name });
    expect(loads[0]!.reason.length).toBeGreaterThan(5);
    const fleet = json<{ workers: Array<{ hardware: string; variants: Array<{ variant: string }> }> }>(workers).workers;
    expect(fleet.some((w) => w.hardware === "cpu" && w.variants.some((v) => v.variant === answer.served_by.variant))).toBe(true);
  }, 600_000);

  it("cli e2e - cost shows the VM autoscaler's summary; the server's refusals exit 1 with its message", async () => {
    // The VM autoscaler publishes its first summary a few seconds after it starts (503 until then,
    // which is what the server says): asked again until there is one, 30 s at most.
    const costWhenPublished = (): Promise<Run> =>
      waitFor("the VM autoscaler's first cost summary", async () => {
        const r = await run("cost", "--json");
        if (r.code !== 0 && /no cost summary yet/.test(r.stderr)) throw new Error(`sloserve cost --json: ${r.stderr.trim()}`);
        return r;
      }, { timeoutMs: 30_000, intervalMs: 1000 });
    const [cost, unknown, app, shape, duplicate, pipeline, badSource] = await Promise.all([
      costWhenPublished(),
      run("infer", "no-such-model", "--generate"),
      run("infer", "digits", "--generate"),
      run("infer", model.name, "--input", join(stack.dir, "bad-query.json")),
      run("register", model.app, model.name, model.path),
      run("pipelines", "show", "nope"),
      run("decisions", "--source", "Not A Source"),
    ]);
    const summary = json<{ dollarsPerHour: number; totalDollars: number; workers: Array<{ kind: string; state: string; count: number }> }>(cost);
    expect(summary.workers.some((w) => w.state === "running" && w.count >= 1)).toBe(true);
    expect(summary.totalDollars).toBeGreaterThanOrEqual(0);
    const refusals: Array<[Run, RegExp]> = [
      [unknown, /HTTP 404: no model .*'no-such-model'.* \[unknown_model\]/],
      [app, /'digits' is an app: query it model-less with --slo-ms N/],
      [shape, /HTTP 400: .*\[1, 1, 28, 27\].*\[invalid_shape\]/],
      [duplicate, /HTTP 409: .*already registered \[model_exists\]/],
      [pipeline, /HTTP 404: no pipeline named 'nope' \[unknown_pipeline\]/],
      [badSource, /HTTP 400: source must be a word/],
    ];
    for (const [r, message] of refusals) {
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(message);
      expect(r.stderr).not.toMatch(STACK_LINE);
    }
  }, 300_000);
});
