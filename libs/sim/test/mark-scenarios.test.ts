import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { createRng } from "@sloserve/policy";
import { describe, expect, it } from "vitest";
import { DEFAULT_TWITTER_TRACE, parseTrace } from "../src/trace.js";
import { markMmpp, mmppRates } from "../src/scenarios/mark-mmpp.js";
import { fillGaps, markTwitter, scaleTwitterTrace, twitterLikeMinutes } from "../src/scenarios/mark-twitter.js";

describe("mark scenarios", () => {
  it("mark-twitter - the default load keeps peak ≈ 4× valley before its spikes", () => {
    const m = twitterLikeMinutes(2, 100, 1);
    expect(m).toHaveLength(2 * 1440);
    expect(Math.min(...m)).toBeGreaterThanOrEqual(22.5); // 0.9 × 100/4
    expect(m[4 * 60]).toBeCloseTo(25 + 75 * 0.05 * Math.sin((2 * Math.PI * 240) / 180), 6); // valley at 04:00 plus the ripple
    expect(Math.max(...m)).toBeGreaterThan(100); // flash crowds go past the diurnal peak
  });

  it("mark-twitter - a trace is mapped p1 → peak/4 and p99 → peak over its observed minutes, gaps interpolated", () => {
    // 200 minutes at 10..209 per second, one gap minute (0) and one partial minute (1, under 5% of the
    // median): missing data, left out of the percentiles and interpolated between their neighbours.
    const perMinute = Array.from({ length: 200 }, (_, m) => (m === 50 ? 0 : m === 120 ? 1 : 10 + m));
    const out = scaleTwitterTrace(perMinute, 100);
    // 198 observed minutes, 10..209 without 60 and 130: p1 = sorted[⌊0.01·197⌋ = 1] = 11,
    // p99 = sorted[⌊0.99·197⌋ = 195] = 207 (209, 208, 207 are the top three; 195 is the third from the top).
    expect(out[1]).toBeCloseTo(25, 9);
    expect(out[197]).toBeCloseTo(100, 9);
    // Minute 50 lies between 59 (minute 49) and 61 (minute 51): 60, scaled like an observed 60.
    expect(out[50]).toBeCloseTo(25 + (75 * (60 - 11)) / (207 - 11), 9);
    expect(out[120]).toBeCloseTo(25 + (75 * (130 - 11)) / (207 - 11), 9);
  });

  it("mark-twitter - fillGaps interpolates inside the series and carries the nearest full value at its ends", () => {
    // Gaps (≤ 1): minutes 0, 2-3, 5. Minute 1 = 10 and minute 4 = 40: 2 → 20, 3 → 30; the ends take 10 and 40.
    expect(fillGaps([0, 10, 0, 1, 40, 0], 1)).toEqual({ values: [10, 10, 20, 30, 40, 40], observed: [false, true, false, false, true, false] });
    expect(fillGaps([0, 0], 1).values).toEqual([0, 0]);
  });

  it("mark-twitter - runs on the bundled Twitter trace by default (the CLI passes it)", () => {
    const trace = parseTrace(readFileSync(fileURLToPath(new URL("../data/twitter_2021-08_per_minute.csv", import.meta.url)), "utf8"));
    const r = markTwitter.run({ seed: 3, durationS: 60 * 60, peakQps: 80, trace, tracePath: DEFAULT_TWITTER_TRACE });
    expect(r.notes[0]).toContain(`trace ${DEFAULT_TWITTER_TRACE}`);
    const [sm, od] = r.systems as [typeof r.systems[0], typeof r.systems[0]];
    expect(od.cost_dollars).toBeLessThan(sm.cost_dollars);
    expect(od.slo_attainment).toBeGreaterThanOrEqual(0.98);
  });

  it("mark-twitter - MArk is cheaper than the SageMaker-style baseline and meets the 98% SLO", () => {
    const r = markTwitter.run({ seed: 3, durationS: 20 * 60, peakQps: 80 });
    expect(r.systems.map((s) => s.name)).toEqual(["sagemaker-2x", "mark-ondemand", "mark-spot"]);
    const [sm, od, spot] = r.systems as [typeof r.systems[0], typeof r.systems[0], typeof r.systems[0]];
    for (const s of r.systems) {
      expect(s.cost_dollars).toBeCloseTo((s.ec2_dollars as number) + (s.lambda_dollars as number), 3);
      expect(s.slo_attainment).toBeGreaterThan(0);
      expect(s.slo_attainment).toBeLessThanOrEqual(1);
    }
    expect(od.cost_dollars).toBeLessThan(sm.cost_dollars);
    expect(spot.cost_dollars).toBeLessThan(od.cost_dollars);
    expect(od.slo_attainment).toBeGreaterThanOrEqual(0.98);
    expect(r.charts.map((c) => c.id)).toEqual(["mark-twitter-cost", "mark-twitter-load", "mark-twitter-instances"]);
    // Deterministic for a seed.
    expect(markTwitter.run({ seed: 3, durationS: 20 * 60, peakQps: 80 }).systems).toEqual(r.systems);
  });

  it("mark-mmpp - the MMPP spends time in each state in proportion to its mean sojourn", () => {
    const states = [{ rate: 25, meanSojournS: 1200 }, { rate: 50, meanSojournS: 600 }, { rate: 100, meanSojournS: 240 }];
    const r = mmppRates(states, 400 * 3600, createRng(5));
    const mean = r.reduce((a, b) => a + b, 0) / r.length;
    // Symmetric jumps: stationary shares ∝ sojourns 20:10:4 → (25·20 + 50·10 + 100·4)/34 = 41.2 qps.
    expect(mean).toBeGreaterThan(41.2 * 0.9);
    expect(mean).toBeLessThan(41.2 * 1.1);
    expect(r.reduce((a, b) => Math.min(a, b), Infinity)).toBeGreaterThan(25 - 1e-9);
    expect(r.reduce((a, b) => Math.max(a, b), 0)).toBeLessThan(100 + 1e-9);
  });

  it("mark-mmpp - runs the three systems on an MMPP load", () => {
    const r = markMmpp.run({ seed: 2, durationS: 20 * 60, peakQps: 60 });
    expect(r.systems.map((s) => s.name)).toEqual(["sagemaker-2x", "mark-ondemand", "mark-spot"]);
    expect(r.systems.every((s) => (s.queries as number) > 20 * 60 * 10)).toBe(true);
    expect(r.paper).toContain("MMPP");
  });
});

describe("combined scenario", () => {
  it("combined - model-less selection sends loose queries to the cheaper model, and the union is cheapest", async () => {
    const { combined } = await import("../src/scenarios/combined.js");
    const r = combined.run({ seed: 4, durationS: 20 * 60, peakQps: 40 });
    const sys = Object.fromEntries(r.systems.map((s) => [s.name, s]));
    expect(Object.keys(sys)).toEqual(["mark-ondemand", "infaas", "combined"]);
    expect(sys.combined!.cost_dollars).toBeLessThan(sys["mark-ondemand"]!.cost_dollars);
    expect(sys.combined!.slo_attainment).toBeGreaterThanOrEqual(0.98);
    expect(r.notes.some((n) => n.includes('"inception-v3"'))).toBe(true);
    expect(sys["mark-ondemand"]!.cheaper_than_mark).toBe(1);
  });
});
