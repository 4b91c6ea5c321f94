import { createRng, quantileSorted } from "@sloserve/policy";
import { describe, expect, it } from "vitest";
import { BinCounter, LatencySample } from "../src/stats.js";

function values(n: number, seed: number): number[] {
  const rng = createRng(seed);
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(i % 13 === 0 ? 0 : rng.next() < 0.7 ? 5 + 300 * rng.next() : 1e4 * rng.next());
  return out;
}

const QS = [0, 0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 1];

describe("stats", () => {
  it("stats - LatencySample is exact (nearest rank) up to exactLimit values", () => {
    for (const n of [1, 2, 3, 10, 1000, 5000]) {
      const xs = values(n, n);
      const s = new LatencySample({ exactLimit: n });
      for (const x of xs) s.add(x);
      const sorted = Float64Array.from(xs).sort();
      expect(s.exact).toBe(true);
      for (const q of QS) expect(s.quantile(q)).toBe(quantileSorted(sorted, q));
      expect(s.count).toBe(n);
      expect(s.max).toBe(sorted[n - 1]);
    }
    expect(new LatencySample().quantile(0.5)).toBeNaN();
  });

  it("stats - past exactLimit a LatencySample keeps a bounded histogram within 0.013% of the exact quantiles", () => {
    const xs = values(20_000, 3);
    const s = new LatencySample({ exactLimit: 1000 });
    let sum = 0;
    for (const x of xs) {
      s.add(x);
      sum += x;
    }
    expect(s.exact).toBe(false);
    const sorted = Float64Array.from(xs).sort();
    for (const q of QS) {
      const want = quantileSorted(sorted, q);
      const got = s.quantile(q);
      if (want === 0) expect(got).toBe(0);
      else expect(Math.abs(got - want) / want).toBeLessThanOrEqual(1.3e-4);
    }
    // Count, mean and max stay exact.
    expect(s.count).toBe(xs.length);
    expect(s.mean()).toBe(sum / xs.length);
    expect(s.max).toBe(sorted[sorted.length - 1]);
  });

  it("stats - quantileOfUnion answers as one sample given all the values would", () => {
    for (const [limit, sizes] of [
      [100_000, [300, 0, 1700, 2500]],
      [4000, [300, 0, 1700, 2500]],
      [1000, [300, 0, 1700, 2500]],
    ] as const) {
      const parts = sizes.map((n, i) => values(n, 10 + i));
      const one = new LatencySample({ exactLimit: limit });
      const samples = parts.map((xs) => {
        const s = new LatencySample({ exactLimit: limit });
        for (const x of xs) {
          s.add(x);
          one.add(x);
        }
        return s;
      });
      for (const q of QS) expect(LatencySample.quantileOfUnion(samples, q, limit)).toBe(one.quantile(q));
      // Several q at once (one copy of the values, or one sum of the histograms): the same values.
      expect(LatencySample.quantilesOfUnion(samples, QS, limit)).toEqual(QS.map((q) => one.quantile(q)));
      expect(one.quantiles(QS)).toEqual(QS.map((q) => one.quantile(q)));
      for (const s of samples) expect(s.quantiles([0.99, 0.5, 0.99])).toEqual([s.quantile(0.99), s.quantile(0.5), s.quantile(0.99)]);
    }
    expect(LatencySample.quantilesOfUnion([], [0.5, 0.99])).toEqual([NaN, NaN]);
    expect(LatencySample.quantileOfUnion([], 0.5)).toBeNaN();
    expect(LatencySample.quantileOfUnion([new LatencySample()], 0.5)).toBeNaN();
  });

  it("stats - BinCounter counts per bin and sums whole bins", () => {
    const c = new BinCounter();
    c.add(0);
    c.add(999.999, 2);
    c.add(1000);
    c.add(4500.5, 0.5);
    expect(c.counts).toEqual([3, 1, 0, 0, 0.5]);
    expect(c.total).toBe(4.5);
    expect(c.sum(0, 2000)).toBe(4);
    expect(c.rate(2000, 2000)).toBe(2);
  });

  it("stats - BinCounter.sumOver: a span off the bins takes each cut bin's share; the current bin counts up to now", () => {
    const c = new BinCounter();
    c.add(100, 10);
    c.add(1500, 20);
    c.add(2100, 6);
    // whole bins: as sum
    expect(c.sumOver(0, 2000)).toBe(c.sum(0, 2000));
    // [500, 1500): half of bin 0, half of bin 1
    expect(c.sumOver(500, 1500)).toBeCloseTo(5 + 10, 12);
    // a report period [1228, 2218) at now = 2400: bin 1's 77.2%, and bin 2's part up to now (218 of 400 ms)
    expect(c.sumOver(1228, 2218, 2400)).toBeCloseTo(20 * 0.772 + 6 * (218 / 400), 9);
    // up to now: all of the current bin so far
    expect(c.sumOver(1000, 2400, 2400)).toBeCloseTo(26, 12);
    expect(c.sumOver(2000, 2000)).toBe(0);
  });
});
