/**
 * Tables, charts and system rows for the MArk scenarios (mark-twitter, mark-mmpp): one row per system
 * with its cost split EC2 / Lambda, SLO attainment (the share of queries within the SLO; MArk asks for
 * 98%), P99 and the cost ratio against the SageMaker-style baseline.
 */
import type { Chart, ScenarioResult, SystemResult } from "../scenario.js";
import type { MarkRunResult } from "./mark-system.js";

const round = (x: number, d = 2): number => Math.round(x * 10 ** d) / 10 ** d;

export function markResult(scenario: string, runs: MarkRunResult[], paper: string, notes: string[], extra: Record<string, unknown> = {}): ScenarioResult {
  const sm = runs.find((r) => r.system === "sagemaker-2x");
  const systems: SystemResult[] = runs.map((r) => ({
    name: r.system,
    cost_dollars: round(r.costDollars, 4),
    slo_attainment: round(r.sim.sloAttainment, 5),
    p99_ms: round(r.sim.latencyMs.p99, 1),
    ec2_dollars: round(r.ec2Dollars, 4),
    lambda_dollars: round(r.lambdaDollars, 4),
    lambda_share: round(r.lambdaShare, 4),
    cheaper_than_sagemaker: sm ? round(sm.costDollars / r.costDollars, 2) : null,
    queries: r.sim.arrivals,
    dropped: r.sim.dropped,
    max_instances: Math.max(0, ...r.perMinute.map((m) => m.instances)),
    spot_interruptions: r.interruptions,
    monitor_launches: r.monitorLaunches,
    lambda_cold_starts: r.sim.coldStarts,
  }));
  const table = systems.map((s) => ({
    system: s.name,
    "EC2 $": s.ec2_dollars as number,
    "Lambda $": s.lambda_dollars as number,
    "total $": s.cost_dollars,
    "× cheaper than SageMaker": (s.cheaper_than_sagemaker as number | null) ?? "-",
    "SLO attainment %": round(100 * s.slo_attainment, 2),
    "P99 ms": s.p99_ms,
    "to Lambda %": round(100 * (s.lambda_share as number), 2),
  }));
  const first = runs[0];
  const charts: Chart[] = [
    {
      id: `${scenario}-cost`, title: `${scenario}: cost by system ($)`, xLabel: "system", yLabel: "dollars", kind: "bar",
      series: [
        { name: "EC2", points: runs.map((r, i) => [i, round(r.ec2Dollars, 4)] as [number, number]) },
        { name: "Lambda", points: runs.map((r, i) => [i, round(r.lambdaDollars, 4)] as [number, number]) },
      ],
    },
    {
      id: `${scenario}-load`, title: `${scenario}: load, MArk's forecast and provisioned capacity`, xLabel: "minute", yLabel: "queries per second", kind: "line",
      series: [
        ...(first ? [{ name: "max rate (5 s samples)", points: first.perMinute.map((m) => [m.minute, round(m.maxRateQps, 1)] as [number, number]) }] : []),
        ...runs.filter((r) => r.system !== "sagemaker-2x").slice(0, 1).map((r) => ({
          name: `forecast τ = 5 min (${r.system})`, points: r.perMinute.filter((m) => !Number.isNaN(m.forecastQps)).map((m) => [m.minute, round(m.forecastQps, 1)] as [number, number]),
        })),
        ...runs.map((r) => ({ name: `capacity ${r.system}`, points: r.perMinute.map((m) => [m.minute, round(m.capacityQps, 1)] as [number, number]) })),
      ],
    },
    {
      id: `${scenario}-instances`, title: `${scenario}: instances running`, xLabel: "minute", yLabel: "instances", kind: "line",
      series: runs.map((r) => ({ name: r.system, points: r.perMinute.map((m) => [m.minute, m.instances] as [number, number]) })),
    },
  ];
  return { scenario, paper, systems, table, charts, notes, ...extra };
}
