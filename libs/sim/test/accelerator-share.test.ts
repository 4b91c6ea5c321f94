import { describe, expect, it } from "vitest";
import { footprintPricePerSecond, instanceOffer, pricePerSecond, variantResources, type VariantFootprint, type VariantProfile } from "@sloserve/policy";
import { Simulator } from "../src/engine.js";
import { installInfaas } from "../src/systems/infaas.js";
import { ScheduledArrivals, constantRate } from "@sloserve/policy";

/**
 * Accelerators shared and priced by footprint (INFaaS §4.2.1 constraint 3, §6.2) in the simulator's
 * INFaaS system: GPU variants take the resources and price libs/policy accelerator-share.ts gives them
 * (their GPU memory, a slot; their share of p3.2xlarge), GPU machines offer what `instanceOffer` says
 * (one V100: 16 GiB). Two variants of 6 and 10 GiB share the first GPU; a third of 4 GiB, asked for
 * later, has no room there and goes to a second machine the VM autoscaler launches.
 */
const GiB = 1024 ** 3;
const gpuVariant = (app: string, gib: number): VariantProfile => {
  const f: VariantFootprint = { hardware: "gpu", threads: 1, memoryBytes: 1e8, acceleratorMemoryBytes: gib * GiB };
  return {
    name: `${app}-gpu`, model: app, app, hardware: "gpu", batchSize: 1, accuracy: 0.9, latencyMs: { 1: 10 }, peakQps: 100, loadLatencyMs: 1000,
    pricePerS: footprintPricePerSecond(f), profiled: true, resources: variantResources(f), concurrency: 1,
  };
};
// Replicas are billed at their share (INFaaS §6.2); the machines themselves at 0 so that the bill is theirs.
const GPU = { type: "p3.2xlarge", kind: "gpu", pricePerS: 0, bootMs: 5_000, resources: instanceOffer("gpu", "p3.2xlarge", 4, 61e9) };

describe("simulator - accelerators shared by footprint", () => {
  it("simulator - two GPU variants share one GPU by memory and each pays its share; a third that does not fit gets a machine of its own", () => {
    const durationS = 120;
    const variants = [gpuVariant("a", 6), gpuVariant("b", 10), gpuVariant("c", 4)];
    const sim = new Simulator({ seed: 1, durationMs: durationS * 1000 });
    sim.addStream({ app: "a", sloMs: 200, process: new ScheduledArrivals(constantRate(20, durationS)) });
    sim.addStream({ app: "b", sloMs: 200, process: new ScheduledArrivals(constantRate(20, durationS)) });
    sim.addStream({ app: "c", sloMs: 2000, process: new ScheduledArrivals({ binMs: 1000, rates: [...new Array<number>(30).fill(0), ...new Array<number>(durationS - 30).fill(5)] }) });
    installInfaas(sim, { mode: "infaas", variants, workers: [GPU], preload: [{ variant: "a-gpu", count: 1 }, { variant: "b-gpu", count: 1 }], sloMsByModel: { a: 200, b: 200, c: 2000 }, billReplicas: true });
    const result = sim.run();
    // a and b on the first machine (6 + 10 GiB = its GPU), c on a second one.
    const where = (name: string): string[] => sim.replicas.filter((r) => r.queue.name === name).map((r) => r.machine?.name ?? "?");
    const [first, second] = sim.machines.map((m) => m.name);
    expect(sim.machines.length).toBe(2);
    expect(where("a-gpu")).toEqual([first]);
    expect(where("b-gpu")).toEqual([first]);
    expect(where("c-gpu")).toEqual([second]);
    expect(result.byApp.c?.completed).toBeGreaterThan(0);
    // The price split: 6/16 and 10/16 of the GPU's price — a and b together pay one GPU.
    const perS = pricePerSecond("p3.2xlarge");
    expect(variants[0]!.pricePerS).toBeCloseTo((perS * 6) / 16, 15);
    expect(variants[1]!.pricePerS).toBeCloseTo((perS * 10) / 16, 15);
    expect(variants[0]!.pricePerS + variants[1]!.pricePerS).toBeCloseTo(perS, 15);
    // The bill: a and b for the whole run (one GPU's price), c (4/16) from its load on.
    const ab = perS * durationS;
    expect(result.costDollars).toBeGreaterThan(ab);
    expect(result.costDollars).toBeLessThan(ab + (perS * 4 * (durationS - 30 + 60)) / 16);
  });
});
