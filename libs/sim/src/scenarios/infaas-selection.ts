/**
 * INFaaS §6.2 "Selecting and scaling model-variants" (papers/infaas.txt §6.2, Fig. 6): ResNet50 on one
 * worker, batch-1 queries, three loads, INFaaS against Clipper+ and SM+ restricted to CPU or GPU.
 *
 * - Workloads (Poisson arrivals): (a) flat 4 QPS; (b) a slow ramp 650 → 700 QPS; (c) 4 QPS with
 *   spikes to 80 QPS at 60-90 s and 150-180 s. Each lasts `durationS` (default 240 s).
 * - Systems: `infaas` (all four ResNet50 variants, starting from one CPU instance); `clipper+-cpu` (two
 *   pre-loaded TensorFlow CPU instances); `clipper+-gpu` (one pre-loaded TensorRT batch-8 GPU instance,
 *   batching adaptively: Wbatch 0, Nbatch 8); `sm+-cpu` and `sm+-gpu` (the CPU variant, or the batch-1
 *   TensorRT variant, scaled horizontally from one instance).
 * - The worker: 8 cores (two CPU instances, as in the paper where the CPU baselines top out at ~10 QPS),
 *   4 NeuronCores (`accelerators`), and a GPU memory budget of 2 GiB for this model (two GPU instances,
 *   each taking 1 GiB and a slot). Cost: each
 *   running variant instance is billed per second at §6.2's normalised price per GB-second × an assumed
 *   1 GB footprint (CPU 0.031, Inferentia 0.190, GPU 0.498 per second).
 * - SLO: 1000 ms (the paper does not state one for §6.2; Clipper's adaptive batching comparison in §6 uses 1 s).
 */
import { DEFAULT_INACTIVE_RULE, type InactiveRule, type VariantProfile } from "@sloserve/policy";
import { Simulator, type SimResult } from "../engine.js";
import type { MachineOptions } from "../entities.js";
import { infaasResnet50Variants } from "../hardware.js";
import { clipperPlus, infaasSystem, smPlus } from "../systems/baselines.js";
import { installInfaas, liveSettingsNote, withInfaasPaperRules, type InfaasSystemOptions } from "../systems/infaas.js";
import { ScheduledArrivals, constantRate, rampRates, spikeRates, type RateSchedule } from "@sloserve/policy";
import type { Chart, Scenario, ScenarioOptions, ScenarioResult, SystemResult } from "../scenario.js";

export const SELECTION_SLO_MS = 1000;

/** The step-2 reading not kept (selection.ts DEFAULT_INACTIVE_RULE is), run as a system of its own. */
const OTHER_RULE: InactiveRule = DEFAULT_INACTIVE_RULE === "inference" ? "load-and-inference" : "inference";
export const OTHER_STEP2 = `infaas (step 2: ${OTHER_RULE})`;

/**
 * The one worker, in the live workers' resource names: `threads` 10 (8 cores for the CPU instances, 4
 * threads each, and a slot for each of the two GPU instances), `accelerators` its 4 NeuronCores and
 * `acceleratorMemoryBytes` its GPU memory budget.
 */
export const SELECTION_WORKER: MachineOptions = {
  type: "infaas-worker",
  kind: "worker",
  pricePerS: 0,
  resources: { threads: 8 + 2, accelerators: 4, acceleratorMemoryBytes: 2 * 1024 ** 3 },
};

export interface SelectionWorkload {
  id: string;
  label: string;
  schedule: RateSchedule;
}

export function selectionWorkloads(durationS: number): SelectionWorkload[] {
  return [
    { id: "flat", label: "flat 4 QPS", schedule: constantRate(4, durationS) },
    { id: "high", label: "650→700 QPS", schedule: rampRates(650, 700, durationS) },
    {
      id: "fluctuating",
      label: "4-80 QPS, spikes at 60-90 s and 150-180 s",
      schedule: spikeRates({ qps: 4, durationS }, [
        { startS: 60, endS: 90, qps: 80 },
        { startS: 150, endS: 180, qps: 80 },
      ]),
    },
  ];
}

export function selectionSystems(variants: VariantProfile[]): Array<{ name: string; options: InfaasSystemOptions }> {
  const byName = (n: string): VariantProfile => {
    const v = variants.find((x) => x.name === n);
    if (!v) throw new Error(`missing variant ${n}`);
    return v;
  };
  const cpu = byName("resnet50-tf-cpu-b1");
  const gpuB1 = byName("resnet50-trt-gpu-b1");
  const gpuB8 = byName("resnet50-trt-gpu-b8");
  const common = {
    workers: [SELECTION_WORKER],
    kindOf: () => "worker",
    sloMsByModel: { resnet50: SELECTION_SLO_MS },
    billReplicas: true,
    vmConfig: { maxWorkersPerKind: 1 },
  };
  return [
    { name: "infaas", options: infaasSystem(variants, [{ variant: cpu.name, count: 1 }], common) },
    // The other reading of Algorithm 1 step 2 (selection.ts InactiveRule), measured beside the one kept.
    { name: OTHER_STEP2, options: { ...infaasSystem(variants, [{ variant: cpu.name, count: 1 }], common), inactiveRule: OTHER_RULE } },
    { name: "clipper+-cpu", options: clipperPlus(cpu, 2, common) },
    { name: "clipper+-gpu", options: clipperPlus(gpuB8, 1, common) },
    { name: "sm+-cpu", options: smPlus(cpu, common) },
    { name: "sm+-gpu", options: smPlus(gpuB1, common) },
  ];
}

export interface SelectionRun {
  workload: string;
  system: string;
  result: SimResult;
  demandQps: number;
  throughputQps: number;
  activeSeconds: Record<string, number>;
}

/** Which runs of the setting: some workloads (by id), other systems (built from the variants and this scenario's own). */
export interface SelectionPick {
  workloads?: readonly string[];
  systems?: (variants: VariantProfile[], base: Array<{ name: string; options: InfaasSystemOptions }>) => Array<{ name: string; options: InfaasSystemOptions }>;
}

export function runSelection(options: ScenarioOptions, pick: SelectionPick = {}): SelectionRun[] {
  const durationS = options.durationS ?? 240;
  const variants = infaasResnet50Variants();
  const runs: SelectionRun[] = [];
  const systems = pick.systems ? pick.systems(variants, selectionSystems(variants)) : selectionSystems(variants);
  for (const w of selectionWorkloads(durationS).filter((x) => pick.workloads?.includes(x.id) ?? true)) {
    for (const s of systems) {
      const sim = new Simulator({ seed: options.seed, durationMs: durationS * 1000, drainMs: 5_000 });
      sim.addStream({ app: "classify", sloMs: SELECTION_SLO_MS, process: new ScheduledArrivals(w.schedule, 1) });
      const sys = installInfaas(sim, withInfaasPaperRules(s.options));
      const result = sim.run();
      runs.push({
        workload: w.id,
        system: s.name,
        result,
        demandQps: result.arrivals / durationS,
        throughputQps: result.sloMet / durationS,
        activeSeconds: Object.fromEntries(sys.activeSeconds),
      });
    }
  }
  return runs;
}

const PAPER =
  "INFaaS §6.2 / Fig. 6 (ResNet50, one worker, batch-1 queries): flat 4 QPS: INFaaS picks CPU variants, 21.6× / 21.3× cheaper than Clipper+GPU / SM+GPU. " +
  "650-700 QPS: CPU baselines serve ~10 QPS; INFaaS picks the batch-8 GPU variant; SM+GPU (two batch-1 GPU instances) costs 5% more and serves 15% fewer QPS. " +
  "4-80 QPS with spikes at 60-90 s and 150-180 s: INFaaS uses CPU, then Inferentia at the spikes: 3× cheaper than the GPU baselines.";

function run(options: ScenarioOptions): ScenarioResult {
  const durationS = options.durationS ?? 240;
  const runs = runSelection(options);
  const cost = (w: string, s: string): number => runs.find((r) => r.workload === w && r.system === s)?.result.costDollars ?? NaN;
  const table: ScenarioResult["table"] = runs.map((r) => {
    const infaas = cost(r.workload, "infaas");
    return {
      workload: r.workload,
      system: r.system,
      "demand QPS": round(r.demandQps, 1),
      "goodput QPS (met SLO)": round(r.throughputQps, 1),
      cost: round(r.result.costDollars, 2),
      "cost / infaas": round(r.result.costDollars / infaas, 2),
      "SLO met": round(r.result.sloAttainment, 4),
      "p99 ms": round(r.result.latencyMs.p99, 1),
      "variants used (s active)": Object.entries(r.activeSeconds)
        .map(([v, s]) => `${v.replace("resnet50-", "")}:${Math.round(s)}`)
        .join(" "),
    };
  });
  const systems: SystemResult[] = runs.map((r) => ({
    name: `${r.system} (${r.workload})`,
    cost_dollars: r.result.costDollars,
    slo_attainment: r.result.sloAttainment,
    p99_ms: r.result.latencyMs.p99,
    goodput_qps: r.throughputQps,
    demand_qps: r.demandQps,
  }));
  const ratio = (w: string, s: string): number => cost(w, s) / cost(w, "infaas");
  const find = (w: string, s: string): SelectionRun | undefined => runs.find((r) => r.workload === w && r.system === s);
  const flatInf = find("flat", "infaas")?.activeSeconds["resnet50-neuron-inf-b1"] ?? 0;
  const highInfaas = find("high", "infaas");
  const highSm = find("high", "sm+-gpu");
  const highCpu = find("high", "clipper+-cpu");
  const ours =
    `flat 4 QPS: Clipper+GPU / INFaaS ${round(ratio("flat", "clipper+-gpu"), 1)}×, SM+GPU / INFaaS ${round(ratio("flat", "sm+-gpu"), 1)}×. ` +
    `650-700 QPS: CPU baselines serve ${round(highCpu?.throughputQps ?? NaN, 1)} QPS within the SLO; INFaaS runs the batch-8 GPU variant ${Math.round(highInfaas?.activeSeconds["resnet50-trt-gpu-b8"] ?? 0)} of ${durationS} s and serves ${round(highInfaas?.throughputQps ?? NaN, 0)} QPS; SM+GPU (two batch-1 GPU instances) costs ${round(ratio("high", "sm+-gpu"), 2)}× INFaaS and serves ${round(highSm?.throughputQps ?? NaN, 0)} QPS. ` +
    `4-80 QPS: Clipper+GPU / INFaaS ${round(ratio("fluctuating", "clipper+-gpu"), 1)}×, SM+GPU / INFaaS ${round(ratio("fluctuating", "sm+-gpu"), 1)}×.`;
  const notes = [
    liveSettingsNote(withInfaasPaperRules(selectionSystems(infaasResnet50Variants())[0]?.options ?? { mode: "infaas", variants: [], workers: [], sloMsByModel: {} }), "The INFaaS system (INFaaS's own rules)"),
    `Flat 4 QPS: Clipper+GPU / INFaaS = ${round(ratio("flat", "clipper+-gpu"), 1)}×, SM+GPU / INFaaS = ${round(ratio("flat", "sm+-gpu"), 1)}× (paper 21.6× / 21.3×). With equal 1 GB footprints the GPU/CPU price ratio is 0.498/0.031 = 16.1×; the paper's GPU variants have larger footprints than its CPU one, which we do not know. INFaaS also pays for short excursions: Poisson bursts that cross the CPU variant's 5 QPS peak in the state machine's 5 s load window (libs/policy variant-state, as on the executors) mark it Overloaded and load the Inferentia variant (${Math.round(flatInf)} s of ${durationS} s here).`,
    `Fluctuating 4-80 QPS: Clipper+GPU / INFaaS = ${round(ratio("fluctuating", "clipper+-gpu"), 1)}×, SM+GPU / INFaaS = ${round(ratio("fluctuating", "sm+-gpu"), 1)}× (paper ~3×). Our low phases sit at 4 QPS, where INFaaS runs one CPU instance; the paper's curve between spikes is not recoverable from the text, and a higher base load would keep Inferentia busy longer and bring the ratio toward 3×.`,
    `650-700 QPS: SM+GPU / INFaaS = ${round(ratio("high", "sm+-gpu"), 2)}× (paper 1.05×). Under equal footprints two batch-1 GPU instances cost twice one batch-8 instance; the paper's 5% implies a batch-8 footprint ~1.9× the batch-1 one, which contradicts its own 21.6× vs 21.3× at 4 QPS, so we keep equal footprints.`,
    `Algorithm 1 step 2, both readings (selection.ts InactiveRule; kept: ${DEFAULT_INACTIVE_RULE}): ` +
      selectionWorkloads(durationS).map((w) => {
        const kept = find(w.id, "infaas");
        const other = find(w.id, OTHER_STEP2);
        const at = (r: SelectionRun | undefined): string => `cost ${round(r?.result.costDollars ?? NaN, 2)}, SLO met ${round(100 * (r?.result.sloAttainment ?? NaN), 1)}%`;
        return `${w.id}: ${DEFAULT_INACTIVE_RULE} ${at(kept)}; ${OTHER_RULE} ${at(other)}`;
      }).join(". ") + `. ${step2Verdict(runs, durationS)}`,
    `The SLO (${SELECTION_SLO_MS} ms) and load latencies (CPU 2 s, Inferentia 3 s, GPU 5 s) are our assumptions; §6.2 reports throughput and cost only. Goodput counts queries that met the SLO; executors shed queries that can no longer meet it.`,
  ];
  const charts: Chart[] = [];
  for (const w of selectionWorkloads(durationS)) {
    charts.push({
      id: `infaas-selection-${w.id}-throughput`,
      title: `INFaaS §6.2 (${w.label}): goodput every 2 s`,
      xLabel: "time (s)",
      yLabel: "queries per second meeting the SLO",
      kind: "line",
      series: runs
        .filter((r) => r.workload === w.id)
        .map((r) => ({ name: r.system, points: perTwoSeconds(r.result.series.met) })),
    });
  }
  const workloads = selectionWorkloads(durationS);
  charts.push({
    id: "infaas-selection-cost",
    title: "INFaaS §6.2: total cost per workload (1 = flat 4 QPS, 2 = 650-700 QPS, 3 = 4-80 QPS fluctuating)",
    xLabel: "workload",
    yLabel: "cost (normalised units)",
    kind: "bar",
    series: ["infaas", "clipper+-cpu", "clipper+-gpu", "sm+-cpu", "sm+-gpu"].map((s) => ({
      name: s,
      points: workloads.map((w, i) => [i + 1, cost(w.id, s)] as [number, number]),
    })),
  });
  return { scenario: "infaas-selection", paper: PAPER, ours, systems, table, charts, notes };
}

/** A reading is at the SLO target on a workload when it meets the SLO within this many points of the other reading. */
const STEP2_ATTAINMENT_TOLERANCE = 0.01;

/**
 * Which step-2 reading has the lower cost at the SLO target: a reading that meets the SLO more than
 * one point less often than the other on some workload is not at the target; among those that are
 * on every workload, the lower total cost wins.
 */
function step2Verdict(runs: readonly SelectionRun[], durationS: number): string {
  const ids = selectionWorkloads(durationS).map((w) => w.id);
  const of = (w: string, s: string): SimResult | undefined => runs.find((r) => r.workload === w && r.system === s)?.result;
  const readings = [{ rule: DEFAULT_INACTIVE_RULE, system: "infaas" }, { rule: OTHER_RULE, system: OTHER_STEP2 }];
  const scored = readings.map((x) => {
    const short = ids.filter((w) => (of(w, x.system)?.sloAttainment ?? 0) < Math.max(...readings.map((y) => of(w, y.system)?.sloAttainment ?? 0)) - STEP2_ATTAINMENT_TOLERANCE);
    return { ...x, short, cost: ids.reduce((a, w) => a + (of(w, x.system)?.costDollars ?? NaN), 0) };
  });
  const at = scored.filter((x) => x.short.length === 0).sort((a, b) => a.cost - b.cost);
  const win = at[0];
  const lines = scored.map((x) => `${x.rule}: total cost ${round(x.cost, 2)}${x.short.length > 0 ? `, more than ${STEP2_ATTAINMENT_TOLERANCE * 100} point below the other's attainment on ${x.short.join(", ")}` : ""}`);
  const verdict = win === undefined ? "neither reading is at the target on every workload" : `${win.rule} has the lower cost at the SLO target${win.rule === DEFAULT_INACTIVE_RULE ? " and is the one kept" : `, but ${DEFAULT_INACTIVE_RULE} is kept: change DEFAULT_INACTIVE_RULE`}`;
  return `Step 2 at the SLO target (${lines.join("; ")}): ${verdict}.`;
}

/** Completions within the SLO, averaged over 2 s (the paper measures throughput every 2 s). */
function perTwoSeconds(met: number[]): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let i = 0; i + 1 < met.length; i += 2) out.push([i + 2, ((met[i] ?? 0) + (met[i + 1] ?? 0)) / 2]);
  return out;
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

export const infaasSelection: Scenario = {
  name: "infaas-selection",
  description: "INFaaS §6.2: ResNet50 at flat 4 QPS, 650-700 QPS and 4-80 QPS spikes; INFaaS vs Clipper+ and SM+ on CPU/GPU",
  run,
};
