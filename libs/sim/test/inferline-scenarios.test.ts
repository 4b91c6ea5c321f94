import { describe, expect, it } from "vitest";
import { inferlinePlanner } from "../src/scenarios/inferline-planner.js";
import { inferlineRateChange } from "../src/scenarios/inferline-rate-change.js";

describe("inferline scenarios", () => {
  it("inferline-planner - the planner is never dearer than CG-Peak, and CG-Peak meets the SLO", () => {
    const r = inferlinePlanner.run({ seed: 1, durationS: 30 });
    expect(r.table).toHaveLength(3 * 2 * 3 * 3); // pipelines × CVs × rates (100, 200, 300 QPS) × systems
    const rows = r.table as Array<Record<string, string | number>>;
    for (const row of rows.filter((x) => x.system === "inferline")) {
      const peak = rows.find((x) => x.system === "cg-peak" && x.pipeline === row.pipeline && x.CV === row.CV && x.QPS === row.QPS)!;
      expect(row["$/h"] as number).toBeLessThanOrEqual(peak["$/h"] as number);
    }
    const sys = Object.fromEntries(r.systems.map((s) => [s.name, s]));
    expect(sys["cg-peak"]!.slo_attainment).toBeGreaterThan(0.99);
    expect(sys["cg-mean"]!.slo_attainment).toBeLessThan(sys.inferline!.slo_attainment);
    expect(sys.inferline!.max_cheaper_than_cg_peak as number).toBeGreaterThan(1);
  });

  it("inferline-rate-change - the Tuner keeps the SLO that the plan alone loses", () => {
    const r = inferlineRateChange.run({ seed: 1, durationS: 180 });
    const sys = Object.fromEntries(r.systems.map((s) => [s.name, s]));
    expect(Object.keys(sys)).toEqual(["inferline", "inferline-relative", "inferline-no-tuner", "autoscale", "cg-peak"]);
    expect(sys.inferline!["attainment rate 150→250"] as number).toBeGreaterThan(0.99);
    expect(sys["inferline-no-tuner"]!["attainment rate 150→250"] as number).toBeLessThan(0.9);
    expect(sys.inferline!.slo_attainment).toBeGreaterThan(sys.autoscale!.slo_attainment);
    expect(sys.inferline!.scaling_actions as number).toBeGreaterThan(0);
    expect(sys["inferline-no-tuner"]!.scaling_actions).toBe(0);
  });
});
