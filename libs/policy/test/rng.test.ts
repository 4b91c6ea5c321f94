import { describe, expect, it } from "vitest";
import { createRng, forkRng, sampleExponential, sampleGamma, samplePoisson } from "../src/index.js";

function moments(xs: number[]): { mean: number; cv: number } {
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  const v = xs.reduce((a, b) => a + (b - mean) ** 2, 0) / xs.length;
  return { mean, cv: Math.sqrt(v) / mean };
}

describe("rng", () => {
  it("rng - same seed, same stream; different seeds differ", () => {
    const a = createRng(42);
    const b = createRng(42);
    const c = createRng(43);
    const xa = Array.from({ length: 5 }, () => a.next());
    expect(Array.from({ length: 5 }, () => b.next())).toEqual(xa);
    expect(Array.from({ length: 5 }, () => c.next())).not.toEqual(xa);
    expect(xa.every((x) => x >= 0 && x < 1)).toBe(true);
  });

  it("rng - forks are reproducible", () => {
    expect(forkRng(createRng(1), 3).next()).toBe(forkRng(createRng(1), 3).next());
  });

  const gammaCases = [
    { shape: 1, scale: 2 }, // exponential, mean 2, CV 1
    { shape: 1 / 16, scale: 16 }, // CV 4, mean 1
    { shape: 4, scale: 0.25 }, // CV 0.5, mean 1
  ];
  for (const g of gammaCases) {
    it(`rng - gamma(${g.shape}, ${g.scale}) has mean kθ and CV 1/√k`, () => {
      const rng = createRng(9);
      const xs = Array.from({ length: 200_000 }, () => sampleGamma(rng, g.shape, g.scale));
      const m = moments(xs);
      expect(m.mean).toBeCloseTo(g.shape * g.scale, 1);
      expect(Math.abs(m.cv - 1 / Math.sqrt(g.shape)) / (1 / Math.sqrt(g.shape))).toBeLessThan(0.05);
    });
  }

  it("rng - exponential and Poisson means", () => {
    const rng = createRng(5);
    expect(moments(Array.from({ length: 100_000 }, () => sampleExponential(rng, 4))).mean).toBeCloseTo(0.25, 2);
    expect(moments(Array.from({ length: 50_000 }, () => samplePoisson(rng, 7))).mean).toBeCloseTo(7, 1);
    expect(moments(Array.from({ length: 20_000 }, () => samplePoisson(rng, 1000))).mean / 1000).toBeCloseTo(1, 2);
    expect(() => sampleGamma(rng, 0, 1)).toThrow("gamma shape must be > 0, got 0");
  });
});
