import { createRng } from "@sloserve/policy";
import { readFileSync } from "node:fs";
import { OnnxRunner } from "@sloserve/runtime";
import type { Tensor } from "@sloserve/contracts";

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
