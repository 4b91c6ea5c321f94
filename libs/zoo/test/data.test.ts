import { describe, expect, it } from "vitest";
import { loadDigits } from "../src/data.js";
import { Xoshiro128ss, deriveSeed, pairedNormals } from "@sloserve/policy";

function counts(labels: Uint8Array): number[] {
  const c = new Array<number>(10).fill(0);
  for (const l of labels) c[l]!++;
  return c;
}

describe("zoo - data", () => {
  it("zoo - split sizes, pixel range and disjointness", () => {
    const { train, validation, test } = loadDigits();
    expect([train.count, validation.count, test.count]).toEqual([7000, 1500, 1500]);
    for (const set of [train, validation, test]) {
      expect(set.inputs.length).toBe(set.count * 784);
      expect(set.labels.length).toBe(set.count);
      expect(Math.min(...set.inputs.subarray(0, 784 * 50))).toBeGreaterThanOrEqual(0);
      expect(Math.max(...set.inputs.subarray(0, 784 * 50))).toBeLessThanOrEqual(1);
    }
    // No image is in two splits (compare a fingerprint of each image).
    const key = (x: Float32Array, i: number): string => Buffer.from(x.buffer, x.byteOffset + i * 784 * 4, 784 * 4).toString("latin1");
    const testKeys = new Set(Array.from({ length: test.count }, (_, i) => key(test.inputs, i)));
    let overlap = 0;
    for (let i = 0; i < validation.count; i++) if (testKeys.has(key(validation.inputs, i))) overlap++;
    for (let i = 0; i < 1000; i++) if (testKeys.has(key(train.inputs, i))) overlap++;
    expect(overlap).toBe(0);
  });

  it("zoo - split is stratified by class", () => {
    const { train, validation, test } = loadDigits();
    const all = counts(train.labels).map((c, i) => c + counts(validation.labels)[i]! + counts(test.labels)[i]!);
    // Each split holds 15% of each class, to within one sample of rounding.
    counts(test.labels).forEach((c, i) => expect(Math.abs(c - 0.15 * all[i]!)).toBeLessThanOrEqual(1));
    counts(validation.labels).forEach((c, i) => expect(Math.abs(c - 0.15 * all[i]!)).toBeLessThanOrEqual(1));
    expect(all.reduce((a, b) => a + b, 0)).toBe(10_000);
  });

  it("zoo - split is deterministic per seed", () => {
    const a = loadDigits();
    const b = loadDigits();
    const c = loadDigits({ splitSeed: 7 });
    expect(Buffer.from(a.test.inputs.buffer).equals(Buffer.from(b.test.inputs.buffer))).toBe(true);
    expect(Array.from(a.test.labels)).toEqual(Array.from(b.test.labels));
    expect(Array.from(a.test.labels)).not.toEqual(Array.from(c.test.labels));
  });

  it("zoo - rng streams are reproducible and well spread", () => {
    const a = new Xoshiro128ss(42);
    const b = new Xoshiro128ss(42);
    const xs = Array.from({ length: 1000 }, () => a.next());
    expect(xs).toEqual(Array.from({ length: 1000 }, () => b.next()));
    expect(new Xoshiro128ss(43).next()).not.toBe(xs[0]);
    const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
    expect(mean).toBeGreaterThan(0.45);
    expect(mean).toBeLessThan(0.55);
    const normal = pairedNormals(new Xoshiro128ss(1));
    const zs = Array.from({ length: 4000 }, () => normal());
    const zMean = zs.reduce((s, z) => s + z, 0) / zs.length;
    const zVar = zs.reduce((s, z) => s + (z - zMean) ** 2, 0) / zs.length;
    expect(Math.abs(zMean)).toBeLessThan(0.05);
    expect(Math.abs(zVar - 1)).toBeLessThan(0.08);
    expect(deriveSeed(1, "digits-mlp-s")).not.toBe(deriveSeed(1, "digits-mlp-m"));
    expect(deriveSeed(1, "digits-mlp-s")).toBe(deriveSeed(1, "digits-mlp-s"));
  });
});
