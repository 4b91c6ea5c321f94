/**
 * Scenario `mark-surge` (MArk §5.3, Fig. 8a-c): an unforeseen load surge. LSTM-ptb (100 ms SLO, CPU
 * only, MArk §5.1) serves a flat load the forecaster has learnt over a day; from the 11th minute the
 * rate rises linearly by 50%, 75% or 100% within 2 minutes and stays there. MArk (on-demand and spot)
 * against the SageMaker-style baseline, the systems of mark-twitter (mark-system.ts, unchanged): SLO
 * attainment before, during and after the surge, and cost.
 *
 * Load: `--peak-qps` sets the flat rate before the surge (default 150 qps, three c5.xlarge at LSTM-ptb's
 * 51.7 qps); 10 s bins (Poisson arrivals within each), so the 2-minute ramp has 12 steps. No spot
 * interruptions are drawn (the surge alone is measured). Windows, by arrival minute: before [0, 11),
 * during [11, 19) (the ramp, the 200 s boot of what is launched for it, and a margin), after [19, end).
 */
import type { Scenario, SystemResult } from "../scenario.js";
import { attainments, flatHistory, lambdaShareIn, percent, perMinuteCharts, round, systemRow } from "./mark-micro.js";
import { lstmPtb, runMark, type MarkRunResult, type MarkSystem } from "./mark-system.js";

export const SURGES = [0.5, 0.75, 1] as const;
const SURGE_START_MIN = 11;
const RAMP_MIN = 2;
const DURING_MIN = 8;

/** 10 s bins: `baseQps` until `startMin`, a linear ramp to (1 + surge) × baseQps over `rampMin`, then flat. */
export function surgeRates(baseQps: number, surge: number, minutes: number, startMin = SURGE_START_MIN, rampMin = RAMP_MIN): number[] {
  const bins = minutes * 6;
  return Array.from({ length: bins }, (_, i) => {
    const tMin = (i + 0.5) / 6;
    const f = Math.min(1, Math.max(0, (tMin - startMin) / rampMin));
    return baseQps * (1 + surge * f);
  });
}

export interface SurgeRun {
  surge: number;
  run: MarkRunResult;
  before: number;
  during: number;
  after: number;
  lambdaDuring: number;
}

export function runSurge(o: { baseQps: number; surge: number; minutes: number; seed: number; systems?: readonly MarkSystem[] }): SurgeRun[] {
  const model = lstmPtb();
  const history = flatHistory(o.baseQps, o.seed + 1);
  const rates = { binMs: 10_000, rates: surgeRates(o.baseQps, o.surge, o.minutes) };
  const end = SURGE_START_MIN + DURING_MIN;
  return (o.systems ?? ["sagemaker-2x", "mark-ondemand", "mark-spot"]).map((system) => {
    const run = runMark({ system, models: [model], seed: o.seed, rates, history: [history], season: 60, spotMeanLifetimeS: Infinity });
    return {
      surge: o.surge, run,
      ...attainments(run, { before: [0, SURGE_START_MIN], during: [SURGE_START_MIN, end], after: [end, o.minutes] }),
      lambdaDuring: lambdaShareIn(run, SURGE_START_MIN, end),
    };
  });
}

export const markSurge: Scenario = {
  name: "mark-surge",
  description: "MArk §5.3: unforeseen surges of +50/75/100% within 2 minutes (LSTM-ptb, 100 ms SLO), MArk vs SageMaker",
  run(options) {
    const baseQps = options.peakQps ?? 150;
    const minutes = Math.max(SURGE_START_MIN + DURING_MIN + 1, Math.round((options.durationS ?? 30 * 60) / 60));
    const all = SURGES.flatMap((surge) => runSurge({ baseQps, surge, minutes, seed: options.seed }));
    const label = (r: SurgeRun): string => `${r.run.system} +${Math.round(r.surge * 100)}%`;
    const systems: SystemResult[] = all.map((r) => systemRow(label(r), r.run, {
      slo_before: round(r.before, 5),
      slo_during: round(r.during, 5),
      slo_after: round(r.after, 5),
      lambda_share_during: round(r.lambdaDuring, 5),
      monitor_launches: r.run.monitorLaunches,
      max_instances: Math.max(0, ...r.run.perMinute.map((m) => m.instances)),
    }));
    const table = all.map((r) => ({
      surge: `+${Math.round(r.surge * 100)}%`,
      system: r.run.system,
      "SLO before %": round(100 * r.before, 2),
      "SLO during %": round(100 * r.during, 2),
      "SLO after %": round(100 * r.after, 2),
      "to Lambda during %": round(100 * r.lambdaDuring, 2),
      "total $": round(r.run.costDollars),
      "max instances": Math.max(0, ...r.run.perMinute.map((m) => m.instances)),
    }));
    const ours = SURGES.map((s) => {
      const rs = all.filter((r) => r.surge === s);
      return `+${Math.round(s * 100)}%: SLO during / after the surge ${rs.map((r) => `${r.run.system} ${percent(r.during)} / ${percent(r.after)} ($${r.run.costDollars.toFixed(3)})`).join(", ")}`;
    }).join("; ");
    return {
      scenario: "mark-surge",
      paper: "MArk §5.3 / Fig. 8a-c (LSTM-ptb; the request rate rises by 50%, 75% and 100% within 2 minutes from the 11th minute; MArk-spot vs SageMaker): " +
        "neither can foresee it; MArk's latency rises for a much shorter time and by much less than SageMaker's, because Lambda takes the overflow at once " +
        "and the SLO monitor requests instances right away, while SageMaker queues until its next scaling cycle. The latencies of the figure did not survive extraction.",
      ours,
      systems,
      table,
      charts: SURGES.flatMap((s) => perMinuteCharts(`mark-surge-${Math.round(s * 100)}`, `mark-surge +${Math.round(s * 100)}%`, all.filter((r) => r.surge === s).map((r) => ({ label: r.run.system, run: r.run })))),
      notes: [
        `Load: flat ${baseQps} qps (Poisson in 10 s bins; the forecaster, auto, has a day of it), then +50/75/100% over minutes ${SURGE_START_MIN}-${SURGE_START_MIN + RAMP_MIN}, held to minute ${minutes}.`,
        `Windows by arrival minute: before [0, ${SURGE_START_MIN}), during [${SURGE_START_MIN}, ${SURGE_START_MIN + DURING_MIN}), after [${SURGE_START_MIN + DURING_MIN}, ${minutes}).`,
        "We report SLO attainment (98% of queries within 100 ms is MArk's target) where the paper plots latency over time; both MArk variants are shown (the paper shows MArk-spot only, MArk-ondemand \"can only be better\").",
        ...SURGES.flatMap((x) => {
          const rs = all.filter((r) => r.surge === x);
          const sm = rs.find((r) => r.run.system === "sagemaker-2x");
          const mark = rs.filter((r) => r.run.system !== "sagemaker-2x");
          if (!sm || mark.every((r) => r.during > sm.during)) return [];
          return [`+${Math.round(x * 100)}%: SageMaker meets the SLO during the surge as well as MArk or better (${percent(sm.during)} vs ${mark.map((r) => percent(r.during)).join(" / ")}): its 2× over-provisioning leaves 100% headroom, and a +${Math.round(x * 100)}% surge fits in it; our instances serve at their profiled rate up to saturation, while the paper's SageMaker latency rises at every surge level (the paper does not say why; instances that slow down before saturation would do it, and our profiles do not model that). MArk plans at full utilisation and lets Lambda take the excess (${mark.map((r) => percent(r.lambdaDuring)).join(" / ")} of the queries during the surge).`];
        }),
        "LSTM-ptb: c5.xlarge only ([repo] 3100 rpm, T(1) = 19.4 ms); SageMaker runs ml.c5.xlarge (c5.large is not profiled for it) at 1.4× the EC2 price; Lambda 35 ms (assumed: Inception-v3's Lambda/EC2 ratio), cold start 2 s; instances start 200 s after the request; no spot interruptions drawn.",
      ],
      model: "lstm-ptb",
      slo_ms: 100,
    };
  },
};
