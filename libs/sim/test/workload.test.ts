import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { createRng } from "../src/index.js";
import {
  ScheduledArrivals,
  arrivalTimes,
  binCounts,
  constantRate,
  expectedArrivals,
  gammaArrivals,
  minuteRates,
  parseTrace,
  rampRates,
  spikeRates,
  stepRates,
  traceArrivals,
  traceRates,
} from "../src/index.js";

function gapsCv(times: number[]): { mean: number; cv: number } {
  const gaps = times.slice(1).map((t, i) => t - (times[i] ?? 0));
  const mean = gaps.reduce((a, b) => a + b, 0) / gaps.length;
  const sd = Math.sqrt(gaps.reduce((a, b) => a + (b - mean) ** 2, 0) / gaps.length);
  return { mean, cv: sd / mean };
}

describe("workload", () => {
  for (const cv of [1, 4]) {
    it(`workload - Gamma arrivals have the asked mean rate and CV = σ/μ = ${cv}`, () => {
      const times = arrivalTimes(gammaArrivals(200, cv, 2000), createRng(cv));
      const m = gapsCv(times);
      // 200 QPS → mean gap 5 ms
      expect(m.mean).toBeGreaterThan(4.75);
      expect(m.mean).toBeLessThan(5.25);
      expect(Math.abs(m.cv - cv) / cv).toBeLessThan(0.08);
    });
  }

  it("workload - CV 0 spaces arrivals evenly and follows each bin's rate", () => {
    // rates 0, 10, 0, 20 QPS per second → counts 0, 10, 0, 20; the first sits half a gap in: 1050 ms.
    const times = arrivalTimes(new ScheduledArrivals({ binMs: 1000, rates: [0, 10, 0, 20] }, 0), createRng(1));
    expect(binCounts(times, 1000, 4000)).toEqual([0, 10, 0, 20]);
    expect(times[0]).toBeCloseTo(1050, 6);
  });

  it("workload - Poisson replay of a per-minute trace keeps each minute's count on average", () => {
    const sched = traceRates([600, 1200, 300], { binMs: 60_000 });
    expect(sched.rates).toEqual([10, 20, 5]);
    const counts = binCounts(arrivalTimes(new ScheduledArrivals(sched, 1), createRng(2)), 60_000, 180_000);
    counts.forEach((c, i) => expect(Math.abs(c - [600, 1200, 300][i]!)).toBeLessThan(4 * Math.sqrt([600, 1200, 300][i]!)));
  });

  it("workload - traces scale to a peak, or map min-max", () => {
    // per-second counts 10, 20, 5 → peak 100 → 50, 100, 25
    expect(traceRates([10, 20, 5], { binMs: 1000, peakQps: 100 }).rates).toEqual([50, 100, 25]);
    // min-max → [10, 1000]: 5 → 10, 20 → 1000, 10 → 10 + 5/15 · 990 = 340
    expect(traceRates([10, 20, 5], { binMs: 1000, peakQps: 1000, minQps: 10 }).rates).toEqual([340, 1000, 10]);
    expect(traceRates([1, 2, 3, 4], { binMs: 1000, offsetBins: 1, bins: 2 }).rates).toEqual([2, 3]);
  });

  it("workload - steps, ramps and spikes", () => {
    expect(stepRates([{ durationS: 2, qps: 150 }, { durationS: 1, qps: 250 }]).rates).toEqual([150, 150, 250]);
    // midpoints of 4 one-second bins from 0 to 40: 5, 15, 25, 35
    expect(rampRates(0, 40, 4).rates).toEqual([5, 15, 25, 35]);
    expect(spikeRates({ qps: 4, durationS: 6 }, [{ startS: 2, endS: 4, qps: 80 }]).rates).toEqual([4, 4, 80, 80, 4, 4]);
    expect(expectedArrivals(constantRate(4, 240))).toBe(960);
  });

  it("workload - trace files: per-second with a header, per-minute by its minute column", () => {
    expect(parseTrace("tweets\n52\n55\n")).toEqual({ binMs: 1000, counts: [52, 55] });
    const perMinute = parseTrace("minute,tweets,missing\n0,120,0\n1,60,0\n");
    expect(perMinute).toEqual({ binMs: 60_000, counts: [120, 60] });
    expect(minuteRates(perMinute)).toEqual([2, 1]);
    // Per-second counts → per-minute means over complete minutes only.
    expect(minuteRates({ binMs: 1000, counts: [...new Array<number>(60).fill(3), 7] })).toEqual([3]);
    expect(() => parseTrace("tweets\n12\nabc\n")).toThrow('trace line 3: "abc" is not a count');
  });

  it("workload - traceArrivals: Poisson within each minute at the minute's rate, the same for a seed", () => {
    const schedule = { binMs: 60_000, rates: [2, 10, 0, 5] };
    const a = arrivalTimes(traceArrivals(schedule), createRng(9));
    expect(arrivalTimes(traceArrivals(schedule), createRng(9))).toEqual(a);
    const counts = binCounts(a, 60_000, 240_000);
    // Expected 120, 600, 0, 300: within 4 σ of a Poisson count.
    [120, 600, 0, 300].forEach((mean, i) => expect(Math.abs(counts[i]! - mean)).toBeLessThanOrEqual(4 * Math.sqrt(mean) + 1e-9));
    // Exponential gaps inside a minute: CV of the gaps ≈ 1.
    const { cv } = gapsCv(a.filter((t) => t >= 60_000 && t < 120_000));
    expect(cv).toBeGreaterThan(0.85);
    expect(cv).toBeLessThan(1.15);
  });

  it("workload - the bundled Twitter trace parses: 17 days per minute", () => {
    const t = parseTrace(readFileSync(fileURLToPath(new URL("../data/twitter_2021-08_per_minute.csv", import.meta.url)), "utf8"));
    expect(t.binMs).toBe(60_000);
    expect(t.counts).toHaveLength(17 * 1440);
    expect(t.counts.filter((c) => c === 0)).toHaveLength(480); // the daily gaps
  });
});
