/**
 * The "figures that moved" section of reports/README.md: when a shared rule changes, the figures it
 * drives move; each move is stated here with its cause. Written by hand: keep it to the last revision
 * that moved figures.
 */
import { markdownTable } from "./table.js";

const ROWS: Array<{ scenario: string; before: string; after: string; why: string }> = [
  {
    scenario: "inferline-planner",
    before: "12 workloads (100 and 200 QPS): the Planner 2.36× cheaper than CG-Peak at best, 1.29× at worst; 99.34% attainment, up to 1.7% misses in a cell",
    after: "18 workloads (100, 200 and 300 QPS): 3.87× at best, 1.24× at worst; 99.83%; every cell no dearer than CG-Peak and ≤ 0.55% misses",
    why: "Planner moves that escape the greedy trap (IncreaseBatch + RemoveReplica × k, Rebalance, DecreaseBatch paired with a saving elsewhere); the last quarter of the sample is held back and at most 0.5% of it may miss; the planning trace is as long as the live one (it was a third: at CV 4 a 60 s sample under-represents bursts); the grid goes to 300 QPS (InferLine Fig. 5); language identification is now fastest on a K80 (2 ms vs 4 ms on a CPU), as InferLine §4.3 implies (the planner downgrades it from a GPU to a CPU): the CG baselines keep it on K80s, which makes social-media's CG-Peak dearer.",
  },
  {
    scenario: "inferline-rate-change",
    before: "InferLine $2.621, AutoScale $1.919, CG-Peak $2.639",
    after: "$2.616, $2.792, $3.840 (attainment unchanged)",
    why: "The language-identification profile above: the baselines run it on its fastest hardware, now a K80.",
  },
  {
    scenario: "infaas-selection",
    before: "one INFaaS run per workload",
    after: "the same figures, and a second run with the other reading of Algorithm 1 step 2 (load + inference within the SLO): total cost 150.6 vs 157.4, but 86.1% vs 90.8% of the fluctuating workload's queries meet the SLO",
    why: "Both readings measured (selection.ts InactiveRule); the kept one (inference latency alone) has the lower cost at the SLO target: the other never loads the Inferentia variant for a query during a spike (its 3 s load alone exceeds the 1 s SLO), so the spikes queue on the Overloaded CPU variant.",
  },
  {
    scenario: "mark-twitter",
    before: "3 h: MArk 1.93× (on-demand) and 3.99× (spot) cheaper than SageMaker-2x; SageMaker 95.3% within the SLO; Lambda 7.0% / 7.4% of queries",
    after: "8 h (the new default): 2.09× and 5.06× (paper 2.41-3.63× and 5.91-7.83×); SageMaker 94.1% (it misses the SLO under bursts, as in the paper), MArk 99.8%; Lambda 3.4% / 3.3% of queries",
    why: "Trace scaling treats missing data as missing: the daily 28-minute gap and its partial edge minutes no longer enter the percentiles and are interpolated between the full minutes around them (they were carried forward and counted). The `auto` forecaster chooses its model by validation on the history (daily, hourly or no season, or the last value) instead of always fitting a daily season. Why below the paper: the 1% stream has no daily cycle (scaled, its median minute is 35 qps against a 30 qps valley and a 120 qps p99), so MArk's savings come from short spikes, which it meets with Lambda (8% of its on-demand bill, paper 6%) and reactive launches billed from the request with a 200 s start; with the last-value predictor the run gives 2.15× and 5.74× (1.7% to Lambda). The SageMaker premium (1.4× EC2) and its 2× over-provisioning are our reading of the baseline.",
  },
  {
    scenario: "combined",
    before: "MArk alone $9.93, INFaaS $7.62, combined $4.86 (2.04× cheaper than MArk alone)",
    after: "$9.36, $7.50, $4.59 (2.04×)",
    why: "The trace scaling and the forecaster above (it replays the same trace).",
  },
  {
    scenario: "mark-mmpp",
    before: "2 h: MArk 1.54× (on-demand) and 3.08× (spot) cheaper than SageMaker-2x",
    after: "8 h: 2.00× and 4.11×; MArk 99.4% / 99.8% within the SLO, SageMaker 88.6%",
    why: "The MArk runs now last 8 h by default (MArk §5.2: > 8 h; the simulator-speed change), and `auto` chooses the last value over an hourly Holt-Winters by validation on the MMPP's history (state changes do not repeat hourly).",
  },
  {
    scenario: "forecast-backtest",
    before: "auto: MAPE 24.1% (Twitter per minute, a daily Holt-Winters), 27.1% (per second), 17.2% (Azure day); under-provisioned 50.1%, 49.7%, 52.9% of minutes; an origin every minute",
    after: "auto: MAPE 16.8%, 18.4% and 16.7% (Azure, hourly season); under-provisioned 48.3%, 47.7%, 48.8%; the models it chose are listed; an origin every 5 minutes (the table's run time)",
    why: "`auto` chooses its model by validation on the held-back end of the history (daily, hourly or no season, or the last value); on the Twitter traces it moves between the last value and Holt-Winters and comes close to the last value alone (14.9% / 16.7%); on the Azure day it beats the last value (19.9%) and Holt-Winters (18.7%), not seasonal-naive (15.9%).",
  },
];

export function movedSection(): string[] {
  return ["## Figures that moved in the last revision, and why", "", markdownTable(ROWS), ""];
}
