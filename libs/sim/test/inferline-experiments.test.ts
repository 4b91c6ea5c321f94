import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { inferlineRealTraces, rescaledMinuteRates, splitTrace } from "../src/scenarios/inferline-real-traces.js";
import { rateChangeSchedule, runSensitivity } from "../src/scenarios/inferline-sensitivity.js";
import { scheduleDurationMs } from "@sloserve/policy";

type Row = Record<string, string | number>;
const readDataFile = (name: string): string => readFileSync(new URL(`../data/${name}`, import.meta.url), "utf8");

describe("inferline experiments", () => {
  it("inferline-real-traces - rescaling and the sample/live split", () => {
    // Gap minutes (0) take the previous minute's rate; the busiest minute becomes the peak.
    expect(rescaledMinuteRates([5, 10, 0, 20, 99], 0, 4, 300)).toEqual([75, 150, 150, 300]);
    expect(() => rescaledMinuteRates([1, 2], 1, 2, 300)).toThrow("the trace has 2 minutes; minutes 1-2 asked");
    const t = { arrivalsMs: Float64Array.from([10, 200, 250, 900]), routes: Uint32Array.from([1, 2, 3, 4]), durationMs: 1000 };
    const { sample, live } = splitTrace(t, 250);
    expect([...sample.arrivalsMs]).toEqual([10, 200]);
    expect([...sample.routes]).toEqual([1, 2]);
    expect([...live.arrivalsMs]).toEqual([0, 650]);
    expect([...live.routes]).toEqual([3, 4]);
    expect(live.durationMs).toBe(750);
    expect(() => inferlineRealTraces.run({ seed: 1 })).toThrow("inferline-real-traces replays bundled traces: pass options.readDataFile (the CLI does)");
  });

  it("inferline-real-traces - InferLine's Tuner misses fewer than the coarse-grained tuner (3 s per trace minute, peak 150 QPS)", () => {
    const r = inferlineRealTraces.run({ seed: 1, durationS: 180, peakQps: 150, readDataFile });
    const sys = Object.fromEntries(r.systems.map((s) => [s.name, s]));
    expect(Object.keys(sys)).toEqual(["inferline", "inferline-relative", "inferline-no-tuner", "cg-mean+autoscale", "cg-peak+autoscale"]);
    for (const cg of ["cg-mean+autoscale", "cg-peak+autoscale"]) {
      expect(sys.inferline!.slo_attainment).toBeGreaterThan(sys[cg]!.slo_attainment);
    }
    // The Tuner does better than the same plan left alone.
    expect(sys.inferline!.slo_attainment).toBeGreaterThan(sys["inferline-no-tuner"]!.slo_attainment);
    expect(r.charts.map((c) => c.id)).toContain("inferline-real-traces-b-cost");
  });

  it("inferline-sensitivity - the planner is never dearer than CG-Peak, costs more as the SLO tightens, and only the Tuner keeps the SLO through a rate change", () => {
    expect(scheduleDurationMs(rateChangeSchedule(150, 250, 10, 40))).toBe((20 + 10 + 40 + 10 + 20) * 1000);
    const r = runSensitivity({ slosMs: [100, 400], cvs: [1], rates: [100], taus: [10], sampleS: 30, holdS: 30 }, 1);
    const rows = r.table as Row[];
    const fig9 = rows.filter((x) => x.figure === "9");
    expect(fig9).toHaveLength(2 * 3); // SLOs × planners
    for (const row of fig9.filter((x) => x.system === "planner")) {
      const at = (sys: string, slo: number): Row => fig9.find((x) => x.system === sys && x["SLO ms"] === slo && x.CV === row.CV)!;
      expect(row["$/h (plan)"] as number).toBeLessThanOrEqual(at("cg-peak", row["SLO ms"] as number)["$/h (plan)"] as number);
      // Tighter SLO, dearer plan.
      if (row["SLO ms"] === 100) expect(row["$/h (plan)"] as number).toBeGreaterThan(at("planner", 400)["$/h (plan)"] as number);
    }
    const miss = (figure: string, sys: string): number => rows.find((x) => x.figure === figure && x.system === sys)!["miss %"] as number;
    expect(miss("10", "inferline")).toBeLessThan(miss("10", "planner-only"));
    expect(miss("12", "inferline-plan+inferline-tune")).toBeLessThan(miss("12", "inferline-plan+baseline-tune"));
    expect(miss("12", "inferline-plan+baseline-tune")).toBeLessThan(miss("12", "inferline-plan"));
  });
});
