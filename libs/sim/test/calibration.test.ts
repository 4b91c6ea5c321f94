import { describe, expect, it } from "vitest";
import type { ContentionPoint } from "@sloserve/contracts";
import { contentionAt, contentionModel, createRng, drawBootMs, drawSample, reportTimes, variantContention } from "../src/index.js";

/**
 * What the simulator makes of a calibration file (libs/sim calibration.ts): the contention table read
 * piecewise-linearly (in demand, then in workers), and the seeded draws (report times, samples).
 */

const pt = (demand: number, booting: number, slowdown: number, p50Ratio: number, samples = 10): ContentionPoint => ({ demand, booting, slowdown, p50Ratio, samples });

describe("calibration: the contention model per variant", () => {
  it("calibration - each variant reads its own points; a variant the sweep did not run reads them all", () => {
    const slow = { ...pt(1, 0, 1.2, 1.1), variant: "int8" };
    const fast = { ...pt(1, 0, 1.0, 1.0), variant: "fp32" };
    const m = variantContention([slow, fast]);
    expect(m.variants).toEqual(["fp32", "int8"]);
    expect(m.forVariant("int8").at(1, 0)).toEqual({ slowdown: 1.2, p50Ratio: 1.1 });
    expect(m.forVariant("fp32").at(1, 0)).toEqual({ slowdown: 1.0, p50Ratio: 1.0 });
    // (both points at demand 1 merged: the mean weighted by their samples)
    expect(m.forVariant("other").at(1, 0).slowdown).toBeCloseTo(1.1, 12);
    expect(m.forVariant(undefined).at(1, 0).slowdown).toBeCloseTo(1.1, 12);
    // Points that name no variant: every variant reads them all.
    expect(variantContention([pt(1, 0, 1.3, 1.2)]).forVariant("int8").at(1, 0)).toEqual({ slowdown: 1.3, p50Ratio: 1.2 });
  });
});

describe("calibration: the contention model", () => {
  // (given out of order: the model sorts them)
  const points = [pt(2, 0, 3, 2.4), pt(0, 0, 1, 0.9), pt(1, 0, 1.5, 1.2), pt(2, 1, 3.5, 3), pt(0, 1, 1.3, 1.1)];

  it("calibration - piecewise-linear in demand between the measured points of the booting level", () => {
    expect(contentionAt(points, 0.5, 0).slowdown).toBeCloseTo(1.25, 12);
    expect(contentionAt(points, 0.5, 0).p50Ratio).toBeCloseTo(1.05, 12);
    expect(contentionAt(points, 1.5, 0).slowdown).toBeCloseTo(2.25, 12);
    expect(contentionAt(points, 1.5, 0).p50Ratio).toBeCloseTo(1.8, 12);
    // at a measured point: its figures
    expect(contentionAt(points, 1, 0)).toEqual({ slowdown: 1.5, p50Ratio: 1.2 });
    // one process booting: its own level's points
    expect(contentionAt(points, 1, 1).slowdown).toBeCloseTo(2.4, 12);
    expect(contentionAt(points, 1, 1).p50Ratio).toBeCloseTo(2.05, 12);
  });

  it("calibration - flat beyond the first and last point; booting beyond the measured levels reads the largest", () => {
    expect(contentionAt(points, 0, 0)).toEqual({ slowdown: 1, p50Ratio: 0.9 });
    expect(contentionAt(points, -1, 0)).toEqual({ slowdown: 1, p50Ratio: 0.9 });
    expect(contentionAt(points, 5, 0)).toEqual({ slowdown: 3, p50Ratio: 2.4 });
    expect(contentionAt(points, 5, 1)).toEqual({ slowdown: 3.5, p50Ratio: 3 });
    expect(contentionAt(points, 1, 4)).toEqual(contentionAt(points, 1, 1));
    expect(contentionModel(points).levels).toEqual([0, 1]);
  });

  it("calibration - the nearest booting level (a tie: the larger); one point is a constant; repeated points merge by their samples", () => {
    const gap = [pt(0, 0, 1, 1), pt(1, 0, 2, 2), pt(0, 2, 5, 5), pt(1, 2, 6, 6)];
    expect(contentionAt(gap, 0.5, 1)).toEqual({ slowdown: 5.5, p50Ratio: 5.5 });
    expect(contentionAt(gap, 0.5, 0)).toEqual({ slowdown: 1.5, p50Ratio: 1.5 });
    for (const d of [0, 0.3, 7]) for (const b of [0, 3]) expect(contentionAt([pt(0.4, 0, 1.7, 1.4)], d, b)).toEqual({ slowdown: 1.7, p50Ratio: 1.4 });
    const repeated = [pt(0, 0, 1, 1), pt(1, 0, 2, 2, 30), pt(1, 0, 4, 3, 10)];
    expect(contentionAt(repeated, 1, 0)).toEqual({ slowdown: 2.5, p50Ratio: 2.25 });
    // no samples anywhere: the plain mean
    expect(contentionAt([pt(1, 0, 2, 2, 0), pt(1, 0, 4, 3, 0)], 1, 0)).toEqual({ slowdown: 3, p50Ratio: 2.5 });
    expect(() => contentionModel([])).toThrow(/no point/);
  });

  /** A point that says its workers. */
  const wpt = (demand: number, booting: number, workers: number, slowdown: number, p50Ratio: number, samples = 10): ContentionPoint => ({ demand, booting, slowdown, p50Ratio, samples, workers });
  // (a 2-core host: more processes, slower at the same demand; 3 workers measured over a narrower demand range)
  const byWorkers = [
    wpt(0, 0, 2, 1, 1),
    wpt(2, 0, 2, 1.4, 1.2),
    wpt(0, 0, 4, 1.2, 1.1),
    wpt(2, 0, 4, 3.2, 2.9),
    wpt(1, 0, 3, 1.5, 1.4),
    wpt(1.5, 0, 3, 2, 1.9),
    wpt(1, 1, 2, 1.6, 1.5),
  ];

  it("calibration - within the booting level, linear in workers between the two nearest workers levels, each piecewise-linear in demand", () => {
    const m = contentionModel(byWorkers);
    expect(m.workersLevels(0)).toEqual([2, 3, 4]);
    expect(m.workersLevels(1)).toEqual([2]);
    // at a measured workers level: that level's own reading
    expect(m.at(1, 0, 2)).toEqual({ slowdown: 1.2, p50Ratio: 1.1 });
    expect(m.at(1, 0, 4)).toEqual({ slowdown: 2.2, p50Ratio: 2 });
    expect(m.at(1.25, 0, 3)).toEqual({ slowdown: 1.75, p50Ratio: 1.65 });
    // between 2 and 3 workers (2.5): halfway between 2's reading (1.25 → 1.25) and 3's (1.75)
    expect(m.at(1.25, 0, 2.5).slowdown).toBeCloseTo(1.5, 12);
    expect(m.at(1.25, 0, 2.5).p50Ratio).toBeCloseTo((1.125 + 1.65) / 2, 12);
    // between 3 and 4 (3.25): a quarter of the way from 3's (flat beyond its last demand: 2, 1.9) to 4's (3, 2.72)
    expect(m.at(1.8, 0, 3.25).slowdown).toBeCloseTo(2 + 0.25 * (3 - 2), 12);
    expect(m.at(1.8, 0, 3.25).p50Ratio).toBeCloseTo(1.9 + 0.25 * (2.72 - 1.9), 12);
    // the same demand on more workers: slower
    const at15 = [2, 3, 4].map((w) => m.at(1.5, 0, w).slowdown);
    expect(at15[0]).toBeLessThan(at15[1]!);
    expect(at15[1]).toBeLessThan(at15[2]!);
    expect(contentionAt(byWorkers, 1.25, 0, 2.5)).toEqual(m.at(1.25, 0, 2.5));
  });

  it("calibration - flat beyond the fewest and the most workers measured; the booting level is chosen first", () => {
    const m = contentionModel(byWorkers);
    for (const d of [0, 0.7, 2, 9]) {
      expect(m.at(d, 0, 1)).toEqual(m.at(d, 0, 2));
      expect(m.at(d, 0, 0)).toEqual(m.at(d, 0, 2));
      expect(m.at(d, 0, 7)).toEqual(m.at(d, 0, 4));
    }
    // 3 workers beyond its own demand range: flat at its first and last point
    expect(m.at(0.2, 0, 3)).toEqual({ slowdown: 1.5, p50Ratio: 1.4 });
    expect(m.at(1.9, 0, 3)).toEqual({ slowdown: 2, p50Ratio: 1.9 });
    // one booting: its one workers level, whatever the workers (not the booting-0 levels)
    for (const w of [1, 2, 4, 8]) expect(m.at(1, 1, w)).toEqual({ slowdown: 1.6, p50Ratio: 1.5 });
  });

  it("calibration - points without workers: exactly today's figures, whatever the workers read; a reading without workers reads the level's points together", () => {
    // A calibration that never says its workers: the same figures with or without them.
    for (const d of [-1, 0, 0.5, 1, 1.5, 2, 5]) for (const b of [0, 1, 3]) for (const w of [undefined, 1, 2, 4]) expect(contentionAt(points, d, b, w)).toEqual(contentionAt(points, d, b));
    expect(contentionModel(points).workersLevels(0)).toEqual([]);
    // Without workers in the reading: the booting level's points all together, merged by demand (as before workers were read).
    const m = contentionModel(byWorkers);
    expect(m.at(2, 0)).toEqual({ slowdown: 2.3, p50Ratio: 2.05 });
    expect(m.at(1, 0)).toEqual({ slowdown: 1.5, p50Ratio: 1.4 });
    // A level that says its workers reads only those points; one that does not, its own.
    const mixed = [wpt(0, 0, 2, 1, 1), wpt(1, 0, 2, 2, 2), pt(0.5, 0, 9, 9), pt(0, 1, 3, 3), pt(1, 1, 5, 5)];
    expect(contentionAt(mixed, 0.5, 0, 2)).toEqual({ slowdown: 1.5, p50Ratio: 1.5 });
    expect(contentionAt(mixed, 0.5, 1, 2)).toEqual({ slowdown: 4, p50Ratio: 4 });
    expect(() => contentionModel([wpt(0, 0, 0, 1, 1)])).toThrow(/workers/);
  });
});

describe("calibration: seeded draws", () => {
  it("calibration - report times: every period from a seeded phase, late by at most the jitter, ascending", () => {
    const a = reportTimes(1000, 0, 10_000, createRng(3));
    expect(a).toEqual(reportTimes(1000, 0, 10_000, createRng(3)));
    expect(a[0]).toBeGreaterThanOrEqual(0);
    expect(a[0]).toBeLessThan(1000);
    // (whole milliseconds: within one of the period)
    for (let i = 1; i < a.length; i++) expect(Math.abs(a[i]! - a[i - 1]! - 1000)).toBeLessThanOrEqual(1);
    const phases = new Set([1, 2, 3, 4, 5].map((s) => reportTimes(1000, 0, 10_000, createRng(s))[0]));
    expect(phases.size).toBeGreaterThan(1);
    // With a spread: the intervals' standard deviation is the jitter given, their mean the period.
    const j = reportTimes(500, 20, 2_000_000, createRng(9));
    expect(j.length).toBeGreaterThanOrEqual(3999);
    const gaps = j.slice(1).map((t, i) => t - j[i]!);
    for (const g of gaps) expect(g).toBeGreaterThan(0);
    const mean = gaps.reduce((a, b) => a + b, 0) / gaps.length;
    const sd = Math.sqrt(gaps.reduce((a, b) => a + (b - mean) ** 2, 0) / gaps.length);
    expect(mean).toBeCloseTo(500, 0);
    expect(sd).toBeGreaterThan(19);
    expect(sd).toBeLessThan(21);
  });

  it("calibration - a sample draw is one of the samples, uniformly", () => {
    const rng = createRng(1);
    const xs = [10, 20, 60];
    const n = 30_000;
    const drawn = Array.from({ length: n }, () => drawSample(xs, rng));
    expect(new Set(drawn)).toEqual(new Set(xs));
    expect(drawn.reduce((a, b) => a + b, 0) / n).toBeCloseTo(30, 0);
    expect(() => drawSample([], rng)).toThrow();
  });

  it("calibration - a boot draws by the launches booting with it: measured counts, between them, beyond them", () => {
    const rng = createRng(2);
    const lone = [1500, 1900];
    const groups = [
      { together: 4, ms: 4000 },
      { together: 4, ms: 5000 },
      { together: 8, ms: 13_000 },
    ];
    const draws = (together: number): Set<number> => new Set(Array.from({ length: 400 }, () => drawBootMs(lone, groups, together, rng)));
    // A count measured: its own samples (0 and 1 both a launch alone).
    expect(draws(1)).toEqual(new Set(lone));
    expect(draws(0)).toEqual(new Set(lone));
    expect(draws(4)).toEqual(new Set([4000, 5000]));
    // Between 4 (median 4 000, nearest rank) and 8 (13 000): 6 reads half way, 8 500; a sample of 4's scaled by 8 500 / 4 000.
    expect(draws(6)).toEqual(new Set([8500, 10_625]));
    // Between 1 (median 1 500) and 4: 2 reads a third of the way, 2 333.3.
    const two = [...draws(2)].sort((a, b) => a - b);
    expect(two[0]).toBeCloseTo(1500 + 2500 / 3, 6);
    expect(two[1]).toBeCloseTo((1900 * (1500 + 2500 / 3)) / 1500, 6);
    // Beyond the most measured: that count's sample × together / count.
    expect(draws(16)).toEqual(new Set([26_000]));
    // Without group samples every count draws from the lone ones.
    expect(new Set(Array.from({ length: 200 }, () => drawBootMs(lone, [], 5, rng)))).toEqual(new Set(lone));
    expect(() => drawBootMs([], [], 1, rng)).toThrow();
  });
});
