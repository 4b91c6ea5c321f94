import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { INFAAS_ARCHITECTURES, infaasE2eVariants } from "../src/infaas-architectures.js";
import { apportion, e2eModels, e2eSystemOptions, e2eWorkload, runE2e, zipfExponentForShare } from "../src/scenarios/infaas-e2e.js";
import { scenarios } from "../src/scenarios/index.js";
import { DEFAULT_TWITTER_TRACE, parseTrace } from "../src/trace.js";

const trace = parseTrace(readFileSync(fileURLToPath(new URL("../data/twitter_2021-08_per_minute.csv", import.meta.url)), "utf8"));

describe("infaas-e2e (INFaaS §6.1)", () => {
  it("infaas-e2e - 22 architectures; Zipf popularity gives the four popular models 80% of the load at 50 ms", () => {
    expect(INFAAS_ARCHITECTURES).toHaveLength(22);
    expect(new Set(INFAAS_ARCHITECTURES.map((a) => a.name)).size).toBe(22);
    const models = e2eModels(1);
    const popular = models.filter((m) => m.popular);
    expect(popular.map((m) => m.name)).toEqual(["densenet121", "resnet50", "vgg16", "inception-v3"]);
    expect(popular.reduce((s, m) => s + m.share, 0)).toBeCloseTo(0.8, 9);
    expect(models.reduce((s, m) => s + m.share, 0)).toBeCloseTo(1, 9);
    for (const m of popular) expect(m.sloMs).toBe(50);
    // Cold: 1.5 × the CPU variant's batch-1 latency (ResNet18: 8 + 192 × 1.82 / 4.11 = 93.02 ms).
    const variants = infaasE2eVariants();
    for (const m of models.filter((x) => !x.popular)) {
      const cpu = variants.find((v) => v.name === `${m.name}-tf-cpu-b1`);
      expect(m.sloMs).toBeCloseTo(1.5 * (cpu?.latencyMs[1] ?? NaN), 9);
    }
    expect(models.find((m) => m.name === "resnet18")?.sloMs).toBeCloseTo(139.53, 2);
    // Zipf: shares fall with rank.
    for (let i = 1; i < models.length; i++) expect(models[i]!.share).toBeLessThan(models[i - 1]!.share);
    expect(zipfExponentForShare(22, 4, 0.8)).toBeGreaterThan(1);
  });

  it("infaas-e2e - a day of the Twitter trace mapped to 10-1000 QPS holds the paper's 113 420 queries", () => {
    const w = e2eWorkload({ seed: 1, trace, tracePath: DEFAULT_TWITTER_TRACE });
    const rates = Array.from(w.rates.rates);
    expect(rates).toHaveLength(1440);
    expect(Math.min(...rates)).toBeCloseTo(10, 6);
    expect(Math.max(...rates)).toBeCloseTo(1000, 6);
    expect(w.expectedQueries).toBeCloseTo(113_420, 0);
  });

  it("infaas-e2e - apportion splits instances by weight, at least one each", () => {
    // 3 left after one each: 1.875, 0.611, 0.315, 0.199 → floors 1, 0, 0, 0, then the two largest remainders.
    expect(apportion(7, [0.5, 0.163, 0.084, 0.053])).toEqual([3, 2, 1, 1]);
    // 16 left: 8, 2.67, 2.67, 2.67 → 8, 2, 2, 2, and the 2 left go to the first two of the equal remainders.
    expect(apportion(20, [3, 1, 1, 1])).toEqual([9, 4, 4, 3]);
    expect(apportion(3, [1, 1, 1, 1])).toEqual([1, 1, 1, 1]);
  });

  it("infaas-e2e - the baselines pre-load GPU variants for the popular models and CPU variants for the rest; INFaaS what Algorithm 1 loads first", () => {
    const variants = infaasE2eVariants();
    const models = e2eModels(1);
    const clipper = e2eSystemOptions("clipper+", variants, models);
    expect(clipper.workers.filter((w) => w.kind === "gpu")).toHaveLength(7);
    expect(clipper.workers.filter((w) => w.kind === "cpu")).toHaveLength(5);
    expect(clipper.preload?.filter((p) => p.variant.includes("-trt-gpu-b8")).reduce((s, p) => s + p.count, 0)).toBe(7);
    expect(clipper.preload?.filter((p) => p.variant.includes("-tf-cpu-b1")).reduce((s, p) => s + p.count, 0)).toBe(20);
    const infaas = e2eSystemOptions("infaas", variants, models);
    expect(infaas.workers.map((w) => w.kind).sort()).toEqual([...new Array<string>(5).fill("cpu"), ...new Array<string>(5).fill("gpu"), "inferentia", "inferentia"]);
    // A popular model at 50 ms cannot use its CPU variant; a cold one starts on its CPU variant.
    const first = new Map(infaas.preload?.map((p) => [p.variant.split("-").slice(0, -3).join("-"), p.variant]));
    expect(first.get("resnet50")).toBe("resnet50-neuron-inf-b1");
    expect(first.get("resnet18")).toBe("resnet18-tf-cpu-b1");
  });

  it("infaas-e2e - reduced run (the first 4 h of the day, 10-250 QPS): INFaaS keeps SLO violations under 4%, serves the popular models on accelerators, and beats Clipper+ on violations and cost", () => {
    const [infaas, clipper] = runE2e({ seed: 1, trace, tracePath: DEFAULT_TWITTER_TRACE, peakQps: 250 }, ["infaas", "clipper+"], { fromMinute: 0, minutes: 240 });
    if (!infaas || !clipper) throw new Error("missing runs");
    expect(infaas.result.arrivals).toBe(clipper.result.arrivals);
    expect(infaas.result.arrivals).toBeGreaterThan(3000);
    const viol = (x: typeof infaas): number => 1 - x.result.sloAttainment;
    expect(viol(infaas)).toBeLessThan(0.04);
    expect(viol(infaas)).toBeLessThan(viol(clipper));
    expect(infaas.popularOnAccelerators).toBeGreaterThan(0.99);
    // The cold models stay on their cheap CPU variants for most of their queries.
    expect(infaas.servedByHardware.cpu ?? 0).toBeGreaterThan(0);
    expect(infaas.result.costDollars).toBeLessThan(clipper.result.costDollars);
    expect(infaas.gpuDramUtilisation).toBeGreaterThan(0);
    // Every query is accounted for: served or shed.
    expect(infaas.result.completed + infaas.result.dropped).toBe(infaas.result.arrivals);
  });

  it("infaas-e2e - is registered", () => {
    expect(scenarios.map((s) => s.name)).toContain("infaas-e2e");
  });
});
