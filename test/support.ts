import { createRng } from "@sloserve/policy";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { OnnxRunner } from "@sloserve/runtime";
import type { Tensor } from "@sloserve/contracts";
import type { BundledModel } from "@sloserve/stack";
import { Network, exportNetwork } from "@sloserve/zoo";

/** A seeded PRNG (mulberry32) so that test inputs are the same on every run. */
export function prng(seed: number): () => number {
  const rng = createRng(seed);
  return () => rng.next();
}

export function randomFloats(rand: () => number, n: number): number[] {
  return Array.from({ length: n }, () => Math.round(rand() * 1000) / 1000);
}

/** The same model run directly with onnxruntime-node, in this process: the reference answers. */
export async function referenceRunner(path: string): Promise<(inputs: Tensor[]) => Promise<Tensor[]>> {
  const runner = await OnnxRunner.load(readFileSync(path));
  return (inputs) => runner.runOne(inputs);
}

/** Largest absolute difference, relative to the magnitude of the expected values (≥ 1). */
export function maxRelativeDiff(actual: ArrayLike<number>, expected: ArrayLike<number>): number {
  if (actual.length !== expected.length) return Infinity;
  let worst = 0;
  for (let i = 0; i < expected.length; i++) {
    const e = expected[i] as number;
    worst = Math.max(worst, Math.abs((actual[i] as number) - e) / Math.max(1, Math.abs(e)));
  }
  return worst;
}

export async function postJson(url: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: typeof body === "string" ? body : JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/**
 * A deliberately heavy MLP (784 → 4096 → 4096 → 10, random weights, 20 M parameters) in app `heavy`:
 * its weights don't fit in cache, so a batch of 1 costs nearly as much memory traffic as a batch of 8,
 * and one core serves only ~70 single queries per second, with a 3 KB input: a load a test process can
 * easily push past one worker's capacity.
 */
export function heavyModel(dir: string): BundledModel {
  const network = new Network([{ type: "flatten" }, { type: "dense", units: 4096 }, { type: "relu" }, { type: "dense", units: 4096 }, { type: "relu" }, { type: "dense", units: 10 }], [1, 28, 28], createRng(7));
  const path = join(dir, "heavy.onnx");
  writeFileSync(path, exportNetwork(network, "heavy"));
  return { app: "heavy", name: "heavy-mlp", task: "image-classification", dataset: "none", path };
}
