import { INSTANCE_PRICES, type SpotPriceSeries } from "@sloserve/policy";
import { describe, expect, it } from "vitest";
import { attainmentIn, lambdaShareIn } from "../src/scenarios/mark-micro.js";
import { runInterruptions } from "../src/scenarios/mark-interruptions.js";
import { markModels } from "../src/scenarios/mark-models.js";
import { runSurge, surgeRates } from "../src/scenarios/mark-surge.js";
import { historyFromRates, inceptionV3, runMark } from "../src/scenarios/mark-system.js";

describe("mark microbenchmarks", () => {
  it("mark-surge - the rate ramps from the 11th minute over 2 minutes and stays up", () => {
    const r = surgeRates(100, 0.5, 20);
    expect(r).toHaveLength(120);
    expect(r[65]).toBe(100); // 10:50-11:00
    expect(r[66]).toBeCloseTo(100 * (1 + 0.5 * (0.5 / 6 / 2)), 9); // the middle of the first bin of the ramp
    expect(r[78]).toBe(150); // 13:00 on
    expect(r[119]).toBe(150);
  });

  it("mark-surge - MArk overflows at the surge, grows its fleet and recovers after it; SageMaker falls further behind", () => {
    const [sm, mo, ms] = runSurge({ baseQps: 150, surge: 1, minutes: 24, seed: 3 });
    const fleet = (r: typeof mo, minute: number): number => r!.run.perMinute.find((m) => m.minute === minute)!.instances;
    expect(sm!.before).toBeGreaterThanOrEqual(0.98);
    for (const r of [mo!, ms!]) {
      expect(r.before).toBeGreaterThanOrEqual(0.98);
      expect(r.lambdaDuring).toBeGreaterThan(lambdaShareIn(r.run, 0, 11) + 0.1);
      expect(fleet(r, 22)).toBeGreaterThan(fleet(r, 9));
      expect(r.after).toBeGreaterThan(r.during);
    }
    expect(sm!.during).toBeLessThan(mo!.during);
  });

  it("mark-interruptions - 80% of the cluster taken back: Lambda's share rises until the replacements are up", () => {
    const [standby, lambdaOnly] = runInterruptions({ qps: 84, fraction: 0.8, minutes: 16, seed: 3 });
    for (const r of [standby!, lambdaOnly!]) {
      expect(r.run.interruptions).toBe(Math.ceil(0.8 * r.clusterAtNotice));
      expect(r.before).toBeGreaterThanOrEqual(0.98);
      expect(attainmentIn(r.run, 14, 16)).toBeGreaterThanOrEqual(0.98);
    }
    // Without standbys Lambda takes the lost capacity's load; the standbys take most of it.
    expect(lambdaOnly!.lambdaTakenBack).toBeGreaterThan(lambdaOnly!.lambdaBefore + 0.3);
    expect(standby!.lambdaTakenBack).toBeLessThan(lambdaOnly!.lambdaTakenBack);
  });

  const rates = { binMs: 60_000, rates: new Array<number>(20).fill(60) };
  const history = [historyFromRates(new Array<number>(1440).fill(60), 4)];
  const base = { models: [inceptionV3()], seed: 5, rates, history, season: 60 };

  it("mark-spot - a spot market above on-demand all along: MArk-spot runs as MArk-ondemand", () => {
    const dear: SpotPriceSeries = Object.fromEntries(inceptionV3().instances.map((p) => [p.type, [{ atMs: 0, perHour: 1.2 * INSTANCE_PRICES[p.type]!.onDemandPerHour }]]));
    const spot = runMark({ ...base, system: "mark-spot", spotPrices: dear });
    const od = runMark({ ...base, system: "mark-ondemand" });
    expect(spot.launches!.every((l) => l.market === "on-demand")).toBe(true);
    expect(spot.launches!.map((l) => l.type)).toEqual(od.launches!.map((l) => l.type));
    expect(spot.costDollars).toBe(od.costDollars);
  });

  it("mark-spot - a series flat at the price table's spot prices bills as the static spot prices", () => {
    const flat: SpotPriceSeries = Object.fromEntries(inceptionV3().instances.map((p) => [p.type, [{ atMs: 0, perHour: INSTANCE_PRICES[p.type]!.spotPerHour }]]));
    const along = runMark({ ...base, system: "mark-spot", spotPrices: flat });
    const fixed = runMark({ ...base, system: "mark-spot" });
    expect(along.launches).toEqual(fixed.launches);
    expect(along.costDollars).toBeCloseTo(fixed.costDollars, 9);
  });

  // OpenNMT is the exception, documented in the scenario's notes: its Lambda (3.1 s) misses the SLO and the tuned batch leaves little room for queueing.
  it("mark-models - the three models; NASNet and LSTM-ptb cheaper with MArk than with SageMaker; spot along the series", () => {
    const r = markModels.run({ seed: 3, durationS: 20 * 60 });
    expect(r.systems.map((s) => s.name)).toEqual([
      "nasnet sagemaker-2x", "nasnet mark-ondemand", "nasnet mark-spot",
      "opennmt sagemaker-2x", "opennmt mark-ondemand", "opennmt mark-spot",
      "lstm-ptb sagemaker-2x", "lstm-ptb mark-ondemand", "lstm-ptb mark-spot",
    ]);
    for (const s of r.systems) {
      expect(s.cost_dollars).toBeCloseTo((s.ec2_dollars as number) + (s.lambda_dollars as number), 3);
      if (s.name.endsWith("mark-ondemand") && !s.name.startsWith("opennmt")) expect(s.cheaper_than_sagemaker as number).toBeGreaterThan(1);
      if (s.name.endsWith("mark-spot")) expect(s.spot_launches as number).toBeGreaterThan(0);
    }
  });
});
