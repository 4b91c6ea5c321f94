import { describe, expect, it } from "vitest";
import { lowerQuantileSorted, median, quantile, quantileSorted } from "../../src/common/quantile.js";

const oneToHundred = Array.from({ length: 100 }, (_, i) => i + 1);

describe("quantile", () => {
  // Nearest rank: the value at 1-based rank ⌈q·n⌉ of the sorted values, clamped to [1, n].
  const quantileCases: { values: number[]; q: number; want: number; why: string }[] = [
    { values: [5, 1, 4, 2, 3], q: 0.5, want: 3, why: "odd n: the middle value" },
    { values: [4, 1, 3, 2], q: 0.5, want: 2, why: "even n: rank ⌈2⌉ = 2, the lower middle (no interpolation)" },
    { values: oneToHundred, q: 0.99, want: 99, why: "p99 of 100 values is the 99th" },
    { values: oneToHundred, q: 0.991, want: 100, why: "rank ⌈99.1⌉ = 100" },
    { values: oneToHundred, q: 0.5, want: 50, why: "p50 of 1..100" },
    { values: [10, 10, 15], q: 0.99, want: 15, why: "rank ⌈2.97⌉ = 3" },
    { values: [3, 1, 2], q: 0, want: 1, why: "q = 0 is the minimum" },
    { values: [3, 1, 2], q: 1, want: 3, why: "q = 1 is the maximum" },
    { values: [7], q: 0.3, want: 7, why: "one value" },
    { values: [NaN, 7], q: 0.99, want: 7, why: "NaN is ignored" },
    { values: [1, Infinity, 2], q: 0.99, want: Infinity, why: "Infinity is a value (an unfinished query)" },
    { values: [], q: 0.5, want: NaN, why: "empty: NaN" },
    { values: [NaN, NaN], q: 0.5, want: NaN, why: "only NaN: NaN" },
  ];
  for (const c of quantileCases) {
    it(`quantile - q=${c.q} of [${c.values.length > 6 ? `${c.values.length} values` : c.values.join(", ")}] is ${c.want} (${c.why})`, () => {
      expect(quantile(c.values, c.q)).toBe(c.want);
      expect(quantile(Float64Array.from(c.values), c.q)).toBe(c.want);
      const sorted = c.values.filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
      expect(quantileSorted(sorted, c.q)).toBe(c.want);
    });
  }

  const medianCases: { values: number[]; want: number; why: string }[] = [
    { values: [5, 1, 4, 2, 3], want: 3, why: "odd n: the middle value" },
    { values: [4, 1, 3, 2], want: 2.5, why: "even n: the mean of the two middle values" },
    { values: [2, 2, 2, 9], want: 2, why: "ties" },
    { values: [9, 1], want: 5, why: "two values" },
    { values: [7], want: 7, why: "one value" },
    { values: [NaN, 1, 3], want: 2, why: "NaN is ignored" },
    { values: [], want: NaN, why: "empty: NaN" },
  ];
  for (const c of medianCases) {
    it(`quantile - median of [${c.values.join(", ")}] is ${c.want} (${c.why})`, () => {
      expect(median(c.values)).toBe(c.want);
    });
  }

  const lowerCases: { sorted: number[]; q: number; want: number }[] = [
    { sorted: oneToHundred, q: 0.99, want: 99 }, // index ⌊0.99·99⌋ = 98
    { sorted: oneToHundred, q: 0.01, want: 1 }, // index ⌊0.99⌋ = 0
    { sorted: [1, 2, 3, 4], q: 0.5, want: 2 }, // index ⌊1.5⌋ = 1
    { sorted: Array.from({ length: 199 }, (_, i) => i + 1), q: 0.99, want: 197 }, // ⌊196.02⌋ = 196; nearest rank gives 198
    { sorted: [], q: 0.5, want: NaN },
  ];
  for (const c of lowerCases) {
    it(`quantile - lower q=${c.q} of ${c.sorted.length} sorted values is ${c.want}`, () => {
      expect(lowerQuantileSorted(c.sorted, c.q)).toBe(c.want);
    });
  }

  it("quantile - inputs are not modified; selection agrees with sorting on random data", () => {
    const values = [9, 3, 7, 1, 8, 2];
    quantile(values, 0.5);
    median(values);
    expect(values).toEqual([9, 3, 7, 1, 8, 2]);
    let seed = 1;
    const next = (): number => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296;
    for (let trial = 0; trial < 50; trial++) {
      const xs = Array.from({ length: 1 + Math.floor(next() * 60) }, () => Math.floor(next() * 20));
      const sorted = [...xs].sort((a, b) => a - b);
      for (const q of [0, 0.1, 0.5, 0.9, 0.99, 1]) expect(quantile(xs, q)).toBe(quantileSorted(sorted, q));
      const mid = sorted.length >> 1;
      expect(median(xs)).toBe(sorted.length % 2 ? sorted[mid] : (sorted[mid - 1]! + sorted[mid]!) / 2);
    }
  });
});
