/**
 * Scenario `inferline-real-traces` (InferLine §7.1, Fig. 6): the Tuner against the coarse-grained
 * tuner on traces derived from real workloads, Social Media pipeline, 150 ms P99 SLO.
 *
 * Traces (InferLine §6, after AutoScale): an hour of per-minute rates, re-scaled so that its busiest
 * minute is 300 QPS, each minute played for 30 s as Gamma arrivals with CV 1 (1 800 s in all); the first
 * 25% is the sample the planners see, the remaining 75% is served live. The paper's two AutoScale
 * workloads are not public; ours are the bundled real traces (libs/sim/data/README.md):
 * - (a) Twitter 2021-08, minutes 60-119 of day 0: flat at ~2 800 tweets/min with a spike to ~13 900
 *   at minutes 92-100 (live second ~510), a big spike on a low base like the paper's Fig. 6(a);
 * - (b) Azure Functions 2019 (1 000 functions summed), minutes 70-129: ~10-12k/min, a rise to ~15-16.6k
 *   from minute 90 (live second ~150), a drop to ~6k at minute 116 (live second ~930) and a one-minute
 *   spike at minute 120, like Fig. 6(b)'s smooth rise, spike and drop after 1 000 s.
 *
 * Systems, all judged on the engine (inferline-common.ts serveLive): `inferline` (Planner on the sample,
 * then the Tuner with the paper's rules), `inferline-relative` (the same with tuner.ts's relative
 * scale-up and min-replicated scale-down options), `inferline-no-tuner` (the same plan, never changed),
 * and the coarse-grained baseline
 * (a CG plan, then AutoScale on whole pipeline units: baselines-cg.ts, baselines-autoscale.ts) from
 * either of its plans, `cg-mean+autoscale` and `cg-peak+autoscale`.
 *
 * --duration-s sets the trace length (default 1 800 s: 30 s per minute), --peak-qps the busiest minute.
 */
import {
  autoScaleUnitPlan, configCostPerHour, makeTunerPlan, planCoarseGrained, planPipeline, unitConfig, type PipelineConfig,
} from "@sloserve/policy";
import type { Chart, Scenario, ScenarioResult, SystemResult } from "../scenario.js";
import { parseTrace } from "../trace.js";
import { binCounts } from "@sloserve/policy";
import { INFERLINE_PROFILES, SOCIAL_MEDIA, liveSystemResult, makeTrace, serveLive, type Controller, type LiveOutcome, type Trace } from "./inferline-common.js";

const SLO_MS = 150;
const MINUTES = 60;
/** The planners' share of the trace (InferLine §6: "the first 25% of the trace as the sample"). */
const PLAN_SHARE = 0.25;
const round = (x: number, d = 2): number => Math.round(x * 10 ** d) / 10 ** d;

export interface RealTrace {
  id: string;
  label: string;
  file: string;
  startMinute: number;
}

export const REAL_TRACES: readonly RealTrace[] = [
  { id: "a", label: "(a) Twitter 2021-08, day 0 minutes 60-119", file: "twitter_2021-08_per_minute.csv", startMinute: 60 },
  { id: "b", label: "(b) Azure Functions 2019, minutes 70-129", file: "azure_functions_2019_sample1000_aggregate_per_minute.csv", startMinute: 70 },
];


/**
 * Per-minute rates of `minutes` minutes from `startMinute`, re-scaled so that the busiest is `peakQps`
 * (InferLine §6 after AutoScale). A zero minute (a gap in these traces) takes the previous minute's rate.
 */
export function rescaledMinuteRates(counts: readonly number[], startMinute: number, minutes: number, peakQps: number): number[] {
  if (startMinute + minutes > counts.length) throw new Error(`the trace has ${counts.length} minutes; minutes ${startMinute}-${startMinute + minutes - 1} asked`);
  const raw: number[] = [];
  for (let i = 0; i < minutes; i++) {
    const c = counts[startMinute + i]!;
    raw.push(c > 0 ? c : (raw[i - 1] ?? 0));
  }
  const max = Math.max(...raw);
  if (!(max > 0)) throw new Error(`minutes ${startMinute}-${startMinute + minutes - 1} of the trace are empty`);
  return raw.map((c) => (c * peakQps) / max);
}

/** The arrivals before `atMs` (the sample) and those after, shifted to start at 0 (the live trace). */
export function splitTrace(t: Trace, atMs: number): { sample: Trace; live: Trace } {
  let k = 0;
  while (k < t.arrivalsMs.length && t.arrivalsMs[k]! < atMs) k++;
  const live = Float64Array.from(t.arrivalsMs.subarray(k), (x) => x - atMs);
  return {
    sample: { arrivalsMs: t.arrivalsMs.slice(0, k), routes: t.routes.slice(0, k), durationMs: atMs },
    live: { arrivalsMs: live, routes: t.routes.slice(k), durationMs: t.durationMs - atMs },
  };
}

interface Run {
  trace: RealTrace;
  system: string;
  out: LiveOutcome;
  queries: number;
  initial: string;
}

export const inferlineRealTraces: Scenario = {
  name: "inferline-real-traces",
  description: "InferLine's Tuner vs the coarse-grained AutoScale tuner on real-workload traces rescaled to 300 QPS (Fig. 6), Social Media, 150 ms SLO",
  run(options): ScenarioResult {
    const read = options.readDataFile;
    if (!read) throw new Error("inferline-real-traces replays bundled traces: pass options.readDataFile (the CLI does)");
    const durationS = Math.max(MINUTES, Math.round(options.durationS ?? MINUTES * 30));
    const segmentMs = (1000 * durationS) / MINUTES;
    const peakQps = options.peakQps ?? 300;
    const pipeline = SOCIAL_MEDIA;
    const profiles = INFERLINE_PROFILES;
    const runs: Run[] = [];
    const loads: Array<{ trace: RealTrace; perSecond: number[] }> = [];
    const describe = (c: PipelineConfig): string => pipeline.models.map((m) => `${m} ${c[m]!.replicas}×${c[m]!.hardware}/b${c[m]!.maxBatch}`).join(", ");
    REAL_TRACES.forEach((rt, i) => {
      const rates = rescaledMinuteRates(parseTrace(read(rt.file)).counts, rt.startMinute, MINUTES, peakQps);
      const whole = makeTrace(pipeline, { binMs: segmentMs, rates }, 1, options.seed * 1000 + i + 1);
      const splitMs = Math.round(PLAN_SHARE * whole.durationMs);
      const { sample, live } = splitTrace(whole, splitMs);
      loads.push({ trace: rt, perSecond: binCounts(live.arrivalsMs, 1000, live.durationMs) });
      const plan = planPipeline({ pipeline, profiles, sloMs: SLO_MS, arrivalsMs: sample.arrivalsMs, routes: sample.routes });
      if (!plan.config) throw new Error(`inferline-real-traces ${rt.id}: the planner found no configuration (${plan.reason})`);
      const serve = (system: string, config: PipelineConfig, controller: Controller): void => {
        runs.push({
          trace: rt, system, out: serveLive(pipeline, profiles, config, live, SLO_MS, controller), queries: live.arrivalsMs.length,
          initial: `${describe(config)} ($${configCostPerHour(profiles, config).toFixed(2)}/h)`,
        });
      };
      const tunerPlan = makeTunerPlan(pipeline, profiles, plan.config, sample.arrivalsMs);
      serve("inferline", plan.config, { kind: "tuner", plan: tunerPlan });
      serve("inferline-relative", plan.config, { kind: "tuner", plan: tunerPlan, options: { scaleUpRule: "relative", scaleDownRho: "min-replicated" } });
      serve("inferline-no-tuner", plan.config, { kind: "none" });
      for (const mode of ["mean", "peak"] as const) {
        const cg = planCoarseGrained({ pipeline, profiles, sloMs: SLO_MS, arrivalsMs: sample.arrivalsMs, mode });
        if (!cg.config) throw new Error(`inferline-real-traces ${rt.id}: CG-${mode} found no configuration (${cg.reason})`);
        const unit = unitConfig(pipeline, profiles, cg.batch, 1);
        serve(`cg-${mode}+autoscale`, cg.config, { kind: "autoscale", units: cg.units, plan: autoScaleUnitPlan(pipeline, profiles, unit, cg.units, cg.rateQps) });
      }
    });

    const names = [...new Set(runs.map((r) => r.system))];
    const miss = (r: Run): number => 1 - r.out.sloAttainment;
    const systems: SystemResult[] = names.map((name) => {
      const mine = runs.filter((r) => r.system === name);
      return liveSystemResult(name, mine, Object.fromEntries(mine.flatMap((r) => [[`cost $ ${r.trace.id}`, round(r.out.costDollars, 4)], [`attainment ${r.trace.id}`, round(r.out.sloAttainment, 5)]])));
    });
    const table = runs.map((r) => ({
      trace: r.trace.label, system: r.system, "cost $": round(r.out.costDollars, 4), "miss %": round(100 * miss(r), 2), "P99 ms": round(r.out.p99Ms, 1),
      "max replicas": Math.max(...r.out.replicasPerSecond), "scaling actions": r.out.changes, "initial configuration": r.initial,
    }));
    const series = (rt: RealTrace, f: (o: LiveOutcome) => number[]): Chart["series"] =>
      runs.filter((r) => r.trace === rt).map((r) => ({ name: r.system, points: f(r.out).map((v, s) => [s, round(v, 3)] as [number, number]) }));
    const charts: Chart[] = REAL_TRACES.flatMap((rt) => [
      { id: `inferline-real-traces-${rt.id}-load`, title: `${rt.label}: live arrivals per second (busiest minute ${peakQps} QPS)`, xLabel: "second", yLabel: "queries/s", kind: "line" as const,
        series: [{ name: "arrivals", points: loads.find((l) => l.trace === rt)!.perSecond.map((v, s) => [s, v] as [number, number]) }] },
      { id: `inferline-real-traces-${rt.id}-cost`, title: `${rt.label}: cost of the running replicas ($/h)`, xLabel: "second", yLabel: "$/h", kind: "line" as const, series: series(rt, (o) => o.costPerHourPerSecond) },
      { id: `inferline-real-traces-${rt.id}-misses`, title: `${rt.label}: SLO misses per second (by arrival second)`, xLabel: "second", yLabel: "misses", kind: "line" as const, series: series(rt, (o) => o.missesPerSecond) },
    ]);
    const ratios = REAL_TRACES.map((rt) => {
      const of = (system: string): Run => runs.find((r) => r.trace === rt && r.system === system)!;
      const cgs = runs.filter((r) => r.trace === rt && r.system.startsWith("cg-"));
      const versus = (il: Run): string => cgs.map((cg) => (miss(il) > 0 ? `${round(miss(cg) / miss(il), 1)}×` : "∞×")).join(" / ");
      const il = of("inferline");
      const rel = of("inferline-relative");
      return `Trace ${rt.label}: missed (cost) InferLine ${round(100 * miss(il), 2)}% ($${round(il.out.costDollars, 2)}), InferLine relative ${round(100 * miss(rel), 2)}% ($${round(rel.out.costDollars, 2)}), ` +
        `${cgs.map((cg) => `${cg.system} ${round(100 * miss(cg), 2)}% ($${round(cg.out.costDollars, 2)})`).join(", ")}: CG-Mean / CG-Peak miss ${versus(il)} InferLine's rate, ${versus(rel)} InferLine relative's.`;
    });
    // CG's miss rate over this run's, for both CG systems on the run's trace (∞ when the run missed none).
    const ratioToCg = (r: Run): number[] => runs.filter((x) => x.trace === r.trace && x.system.startsWith("cg-")).map((cg) => miss(cg) / miss(r));
    const range = (system: string, f: (r: Run) => number | number[], unit: string, prefix = ""): string => {
      const v = runs.filter((r) => r.system === system).flatMap((r) => f(r));
      const lo = round(Math.min(...v), 2);
      const hi = round(Math.max(...v), 2);
      return lo === hi ? `${prefix}${lo}${unit}` : `${prefix}${lo}-${hi}${unit}`;
    };
    return {
      scenario: "inferline-real-traces",
      paper: "InferLine Fig. 6 (Social Media, 150 ms SLO, two AutoScale-derived traces rescaled to 300 QPS, first 25% for planning): (a) InferLine 99.8% attainment at $8.50 vs CG 93.7% at $36.30; " +
        "(b) InferLine 99.3% at $15.27 vs CG 75.8% at $24.63, a 34.5× lower miss rate; the Planner's initial configuration is 5× cheaper than CG's, the Tuner scales up at the spike and down after it, the CG tuner reacts too slowly.",
      systems,
      table,
      charts,
      notes: [
        ...ratios,
        `Traces: the paper's two AutoScale workloads are not public; ours are the bundled Twitter 2021-08 (day 0, minutes 60-119: a spike ~5× the base at minutes 92-100) and Azure Functions 2019 (minutes 70-129: a rise from minute 90, a drop at minute 116, a one-minute spike at minute 120) per-minute traces, busiest minute rescaled to ${peakQps} QPS, each minute played for ${round(segmentMs / 1000, 1)} s as Gamma CV 1 arrivals (${durationS} s in all; --duration-s sets it); the first ${100 * PLAN_SHARE}% is the planning sample, the rest (${round((1 - PLAN_SHARE) * durationS, 0)} s) is served live.`,
        `Where we differ from the paper: (1) InferLine's Tuner misses ${range("inferline", (r) => 100 * miss(r), "%")} of the queries (the paper 0.2% and 0.7%), so CG misses ${range("inferline", ratioToCg, "×")} as often rather than up to 34.5×; ` +
          `with tuner.ts's relative scale-up and min-replicated scale-down InferLine misses ${range("inferline-relative", (r) => 100 * miss(r), "%")} and CG ${range("inferline-relative", ratioToCg, "×")} as often. ` +
          `(2) InferLine costs ${range("inferline", (r) => r.out.costDollars, "", "$")} with the paper's rules against CG's ${range("cg-mean+autoscale", (r) => r.out.costDollars, "", "$")} (CG-Mean) and ${range("cg-peak+autoscale", (r) => r.out.costDollars, "", "$")} (CG-Peak), where the paper's InferLine is 1.6-4.3× cheaper: ` +
          "the paper's scale-up provisions for the rate of the shortest envelope window that exceeds the plan (a burst far above the mean), and its scale-down divides by ρ_p = min ρ_m, which the one-replica stages (langid on one CPU, lightly loaded) hold near zero, so after a spike it keeps most of its replicas while the load is back at its base (the cost charts); " +
          `the relative variant (${range("inferline-relative", (r) => r.out.costDollars, "", "$")}) scales back. ` +
          "(3) Our CG costs less than the paper's ($36.30 and $24.63): AutoScale here removes units after 120 s of lower demand, and our CG plans on the first quarter of the trace, before the spike and the rise, starting small. " +
          "(4) All costs are smaller than the paper's: profiles assumed for all models but ResNet152 (inferline-common.ts), and prices per InferLine §6 (a K80 at (p2.8xlarge − r4.8xlarge) / 8 = $0.634/h, a CPU at r4.8xlarge / 32 = $0.0665/h).",
        "CG: the Coarse-Grained plan (one batch for the whole pipeline, replicated as a unit for the sample's mean or SLO-window peak rate), then AutoScale (baselines-autoscale.ts: a unit more once the 10 s rate exceeds capacity, fewer after 120 s of lower demand); InferLine: Planner, then the Tuner (tuner.ts, the paper's rules). Scale-ups take 5 s to activate and are billed from the decision.",
      ],
    };
  },
};
