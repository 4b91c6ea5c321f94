import { describe, expect, it } from "vitest";
import { Xoshiro128ss, createRng, deriveSeed, forkRng, pairedNormals, sampleExponential, sampleGamma, sampleInt, samplePoisson, shuffleInPlace } from "../../src/index.js";

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

  it("rng - the default generator (sfc32) keeps its stream", () => {
    const a = createRng(42);
    expect(Array.from({ length: 4 }, () => a.next())).toEqual([0.5767213918734342, 0.5318840781692415, 0.212930012261495, 0.7912528037559241]);
    const b = createRng(-7);
    expect(Array.from({ length: 2 }, () => b.next())).toEqual([0.4461417607963085, 0.10863967542536557]);
  });

  it("rng - xoshiro128** keeps the stream the zoo's cached models were trained with", () => {
    // Pinned values: changing any of them changes every digits model (bump ZOO_VERSION and retrain).
    const r = new Xoshiro128ss(42);
    expect(Array.from({ length: 4 }, () => r.nextUint32())).toEqual([2837322924, 544945897, 479756282, 3500138142]);
    const normal = pairedNormals(new Xoshiro128ss(7));
    expect(Array.from({ length: 5 }, () => normal())).toEqual([-1.6997666603638308, -0.13089946149672535, 0.590717715269077, 1.1193292098291738, -1.0527407156705448]);
    const ints = new Xoshiro128ss(1);
    expect(Array.from({ length: 6 }, () => sampleInt(ints, 10))).toEqual([5, 7, 8, 4, 4, 9]);
    const items = Uint32Array.from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    shuffleInPlace(items, new Xoshiro128ss(3));
    expect(Array.from(items)).toEqual([8, 1, 4, 0, 2, 9, 6, 3, 5, 7]);
    expect(deriveSeed(1, "digits-mlp-s")).toBe(1373336967);
    expect(deriveSeed(20240601, "digits-tiny")).toBe(-1601320924);
    expect(new Xoshiro128ss(-5).next()).toBe(0.32807113812305033);
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
