import { describe, expect, it } from "vitest";
import type { AppForecast, ScalingPolicy } from "@sloserve/policy";
import { ScheduledArrivals, Simulator, constantRate, installInfaas } from "../src/index.js";
import { infaasResnet50Variants } from "../src/hardware.js";

/**
 * The scaling policy in the simulator's INFaaS system (libs/policy scaling-policy.ts; the
 * vm-autoscaler's SCALING_POLICY): one CPU worker, a load above what it serves, a forecast of it, SLO
 * outcomes fed to the plan and a function pool for overflow, all given to every policy; the policy
 * decides which the plan reads and whether queries overflow.
 */
function run(policy: ScalingPolicy | undefined) {
  const durationS = 120;
  const sim = new Simulator({ seed: 1, durationMs: durationS * 1000 });
  const cpu = infaasResnet50Variants().filter((v) => v.hardware === "cpu");
  sim.addStream({ app: "classify", sloMs: 1000, process: new ScheduledArrivals(constantRate(30, durationS), 1) });
  const worker = { type: "c5.xlarge", kind: "cpu", pricePerS: 0.17 / 3600, bootMs: 20_000, resources: { threads: 4 } };
  const pool = sim.addFunctionPool({ name: "lambda", latencyMs: 300 });
  const forecasts = (nowMs: number): AppForecast[] => [{ app: "classify", atMs: Math.floor(nowMs / 60_000) * 60_000, stepMs: 60_000, values: new Array<number>(60).fill(30) }];
  const sys = installInfaas(sim, {
    mode: "infaas",
    variants: cpu,
    workers: [worker],
    preload: [{ variant: "resnet50-tf-cpu-b1", count: 1 }],
    sloMsByModel: { resnet50: 1000 },
    forecasts,
    sloMonitor: true,
    overflow: { pool },
    ...(policy ? { scalingPolicy: policy } : {}),
  });
  const r = sim.run();
  const vm = sys.log.filter((e) => e.source === "vm-autoscaler");
  return { r, vm, machines: sim.machines.length, overflowed: pool.invocations };
}

describe("simulator - scaling policy", () => {
  it("simulator - the scaling policy selects the plan's rules and the overflow", () => {
    const combined = run("combined");
    // The default is combined: the same run.
    expect(run(undefined).r).toEqual(combined.r);
    expect(combined.machines).toBeGreaterThan(1);
    expect(combined.overflowed).toBeGreaterThan(0);

    // static: the one worker, no overflow.
    const fixed = run("static");
    expect(fixed.machines).toBe(1);
    expect(fixed.vm).toEqual([]);
    expect(fixed.overflowed).toBe(0);

    // infaas: INFaaS's adds only, no overflow.
    const infaas = run("infaas");
    expect(infaas.machines).toBeGreaterThan(1);
    expect(infaas.vm.every((e) => e.action === "add cpu" && /^INFaaS: /.test(e.reason) && !/predictive plan|SLO monitor/.test(e.reason))).toBe(true);
    expect(infaas.overflowed).toBe(0);

    // mark: launches from the plan and the SLO monitor, none of INFaaS's; overflow on.
    const mark = run("mark");
    expect(mark.machines).toBeGreaterThan(1);
    expect(mark.vm.length).toBeGreaterThan(0);
    expect(mark.vm.some((e) => /^predictive plan: /.test(e.reason))).toBe(true);
    expect(mark.vm.some((e) => /INFaaS/.test(e.reason))).toBe(false);
    expect(mark.overflowed).toBeGreaterThan(0);
  });
});
