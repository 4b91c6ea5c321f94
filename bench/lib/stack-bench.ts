/**
 * The whole INFaaS policy stack in the simulator (libs/sim) under load, for measuring the simulator's
 * speed (benchmarks/sim.ts; bench/test/stack-bench.test.ts runs it as a soak test):
 * `apps` applications, each with the four ResNet50 variants of INFaaS §6.2 (CPU, Inferentia, GPU batch 1
 * and 8), Poisson arrivals at `qps` in total, per-query selection (Algorithm 1), the variant state
 * machine and model autoscaler every second, the VM autoscaler every 2 s, with CPU, Inferentia and GPU
 * workers priced as AWS instances (c5.4xlarge, inf1.xlarge, p3.2xlarge) that boot in 30 s.
 */
import { pricePerSecond, type VariantProfile } from "@sloserve/policy";
import { ScheduledArrivals, Simulator, constantRate, infaasResnet50Variants, installInfaas, withInfaasPaperRules, type MachineOptions, type SimResult } from "@sloserve/sim";

export interface StackBenchOptions {
  durationS: number;
  qps: number;
  seed: number;
  /** @default 4 */
  apps?: number;
}

export const BENCH_WORKERS: Readonly<Record<string, MachineOptions>> = {
  cpu: { type: "c5.4xlarge", kind: "cpu", pricePerS: pricePerSecond("c5.4xlarge"), bootMs: 30_000, resources: { cores: 16 } },
  inferentia: { type: "inf1.xlarge", kind: "inferentia", pricePerS: pricePerSecond("inf1.xlarge"), bootMs: 30_000, resources: { neuronCores: 4 } },
  gpu: { type: "p3.2xlarge", kind: "gpu", pricePerS: pricePerSecond("p3.2xlarge"), bootMs: 30_000, resources: { gpus: 1 } },
};

/**
 * A §6.2 variant for app i, priced by the share of its worker it takes: a CPU instance 4 of the
 * c5.4xlarge's 16 cores, an Inferentia instance 1 of the inf1.xlarge's 4 NeuronCores, a GPU instance
 * the whole V100 of a p3.2xlarge.
 */
function benchVariant(v: VariantProfile, i: number): VariantProfile {
  const share: Record<string, [number, Record<string, number>]> = {
    cpu: [pricePerSecond("c5.4xlarge") / 4, { cores: 4 }],
    inferentia: [pricePerSecond("inf1.xlarge") / 4, { neuronCores: 1 }],
    gpu: [pricePerSecond("p3.2xlarge"), { gpus: 1 }],
  };
  const [pricePerS, resources] = share[String(v.hardware)] ?? [v.pricePerS, v.resources ?? {}];
  // Frozen: nothing changes a variant once built, and the model autoscaler's plan checks a catalog
  // that cannot change the faster (libs/policy model-actions.ts `asScaledVariant`).
  return Object.freeze({ ...v, name: `app${i}-${v.name}`, model: `app${i}-resnet50`, pricePerS, resources: Object.freeze({ ...resources }) });
}

export function stackBenchmark(o: StackBenchOptions): { result: SimResult; decisions: number } {
  const apps = o.apps ?? 4;
  const sim = new Simulator({ seed: o.seed, durationMs: o.durationS * 1000 });
  const variants = Array.from({ length: apps }, (_, i) => infaasResnet50Variants(`app${i}`).map((v) => benchVariant(v, i))).flat();
  const sloMsByModel: Record<string, number> = {};
  for (let i = 0; i < apps; i++) {
    sloMsByModel[`app${i}-resnet50`] = 300;
    sim.addStream({ app: `app${i}`, sloMs: 300, process: new ScheduledArrivals(constantRate(o.qps / apps, o.durationS), 1) });
  }
  const sys = installInfaas(sim, withInfaasPaperRules({
    mode: "infaas",
    variants,
    workers: [BENCH_WORKERS.cpu as MachineOptions, BENCH_WORKERS.inferentia as MachineOptions, BENCH_WORKERS.gpu as MachineOptions],
    templates: BENCH_WORKERS,
    preload: variants.filter((v) => v.hardware === "cpu").map((v) => ({ variant: v.name, count: 1 })),
    sloMsByModel,
  }));
  const result = sim.run();
  return { result, decisions: sys.log.length };
}
