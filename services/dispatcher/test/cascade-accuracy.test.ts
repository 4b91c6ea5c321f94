import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { ManualClock, decodeTensors, pipelineSpecSchema, type Tensor } from "@sloserve/contracts";
import { compilePipeline, createRng, resolvePipelineParams, type PipelineEnvironment } from "@sloserve/policy";
import { digitsCascadeSpec, digitsModels, type BundledModel } from "@sloserve/stack";
import { OnnxRunner } from "@sloserve/runtime";
import { Network, readManifest } from "@sloserve/zoo";
import { runPipelineQuery, type ModelStageBackend } from "../src/pipeline-run.js";
import { builtinSteps } from "../src/builtin-steps.js";

/**
 * The bundled cascade (libs/stack `digitsCascadeSpec`) against its accurate model alone, on the first 500
 * digits of the validation split: the same DAG runner the dispatcher uses (pipeline-run.ts, with libs/policy
 * `PipelineRun` deciding the route), its model stages run by onnxruntime in this process instead of over
 * the bus. Cost is compute: multiply-accumulates per query (each visited model's, from its layers), which
 * does not depend on the machine; the live cost in dollars is measured end to end (docs/PIPELINES.md).
 *
 * Stated margin: the cascade's accuracy is within 1 point (0.01) of digits-cnn-m's, at under half its
 * compute.
 */

const N = 500;
const MARGIN = 0.01;
const digits: { inputs: Float32Array; labels: Uint8Array } = { inputs: new Float32Array(0), labels: new Uint8Array(0) };
const runners = new Map<string, OnnxRunner>();
const macs = new Map<string, number>();
let bundled: BundledModel[];

/** Multiply-accumulates of one query through a zoo model: dense in·out, conv out·C·k² (pools and ReLUs not counted). */
function multiplyAccumulates(network: Network): number {
  let total = 0;
  for (const layer of network.layers) {
    const size = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);
    if (layer.kind === "dense") total += size(layer.inShape) * size(layer.outShape);
    if (layer.kind === "conv") total += size(layer.outShape) * layer.inShape[0]! * (layer as unknown as { kernel: number }).kernel ** 2;
  }
  return total;
}

beforeAll(async () => {
  bundled = await digitsModels();
  const manifest = await readManifest();
  if (!manifest) throw new Error("the digits zoo is not built: npx tsx libs/zoo/src/cli.ts");
  for (const b of bundled) {
    runners.set(b.name, await OnnxRunner.load(readFileSync(b.path)));
    const entry = manifest.models.find((m) => m.name === b.name)!;
    macs.set(b.name, multiplyAccumulates(new Network(entry.architecture, [1, 28, 28], createRng(0))));
  }
  const validation = decodeTensors(bundled[0]!.validation!).tensors;
  digits.inputs = validation[0]!.data as Float32Array;
  digits.labels = validation[1]!.data as Uint8Array;
});

afterAll(async () => {
  for (const r of runners.values()) await r.release();
});

const digit = (i: number): Tensor => ({ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data: digits.inputs.slice(i * 784, (i + 1) * 784) });
const argmax = (p: ArrayLike<number>): number => {
  let best = 0;
  for (let j = 1; j < p.length; j++) if (p[j]! > p[best]!) best = j;
  return best;
};

/** Model stages run by onnxruntime here. */
const local: ModelStageBackend = {
  async model(model, inputs) {
    return { outputs: await runners.get(model)!.runOne(inputs), servedBy: { model }, costDollars: 0 };
  },
  app() {
    throw new Error("no app stages here");
  },
};

describe("digits cascade", () => {
  it("digits cascade - within 1 point of digits-cnn-m's accuracy at under half its compute; s_m measured", async () => {
    const spec = pipelineSpecSchema.parse(digitsCascadeSpec());
    const env: PipelineEnvironment = {
      model: (m) => (runners.has(m) ? { inputs: [{ name: "input", datatype: "FP32", shape: [-1, 1, 28, 28] }], outputs: [{ name: "probabilities", datatype: "FP32", shape: [-1, 10] }] } : undefined),
      app: () => undefined,
      step: () => undefined,
      stepNames: () => [],
    };
    const steps = builtinSteps();
    const compiled = compilePipeline(spec, (s) => steps.get(s), env);
    const fast = spec.stages[0]!.model!;
    const accurate = spec.stages[1]!.model!;
    const clock = new ManualClock(0);

    let alone = 0;
    for (let i = 0; i < N; i++) if (argmax((await runners.get(accurate)!.runOne([digit(i)]))[0]!.data as Float32Array) === digits.labels[i]) alone++;
    const aloneAccuracy = alone / N;
    const aloneMacs = macs.get(accurate)!;

    const rows: string[] = [];
    let atDefault: { accuracy: number; share: number; macs: number } | undefined;
    for (const threshold of [0.8, 0.9, 0.95, 0.99]) {
      const params = resolvePipelineParams(spec, { threshold });
      let correct = 0;
      let reached = 0;
      for (let i = 0; i < N; i++) {
        const a = await runPipelineQuery({ compiled, inputs: [digit(i)], params, receivedAtMs: 0, giveUpAtMs: 1 }, local, steps, clock);
        if (argmax(a.outputs[0]!.data as Float32Array) === digits.labels[i]) correct++;
        if (a.visits["accurate"]) reached++;
        // The answer is the accurate model's exactly when the query reached it.
        expect(a.outputStages[0]).toBe(a.visits["accurate"] ? "accurate" : "fast");
      }
      const share = reached / N;
      const cost = macs.get(fast)! + share * aloneMacs;
      rows.push(`threshold ${threshold}: accuracy ${(correct / N).toFixed(3)}, s_m ${share.toFixed(3)}, ${Math.round(cost)} MACs/query (${((100 * cost) / aloneMacs).toFixed(0)}% of ${accurate})`);
      if (threshold === spec.params["threshold"]) atDefault = { accuracy: correct / N, share, macs: cost };
    }
    console.info(`digits cascade on ${N} validation digits: ${accurate} alone ${aloneAccuracy.toFixed(3)}, ${aloneMacs} MACs/query; ${fast} ${macs.get(fast)} MACs/query\n  ${rows.join("\n  ")}`);

    expect(atDefault).toBeDefined();
    expect(atDefault!.accuracy).toBeGreaterThanOrEqual(aloneAccuracy - MARGIN);
    expect(atDefault!.macs).toBeLessThan(aloneMacs / 2);
    expect(atDefault!.share).toBeGreaterThan(0);
    expect(atDefault!.share).toBeLessThan(0.5);
  });
});
