/**
 * The contract every named simulator scenario fulfils (`npm run sim -- <scenario>`).
 * A scenario is pure: it takes parsed options (and trace data already read by the CLI) and returns
 * numbers; the CLI prints the table, writes `reports/<scenario>.json` and draws the charts.
 */
import type { Predictor } from "@sloserve/policy";
import type { TraceData } from "./trace.js";

/** One system (policy) measured in a scenario. slo_attainment is a fraction in 0..1. */
export interface SystemResult {
  name: string;
  cost_dollars: number;
  slo_attainment: number;
  p99_ms: number;
  [extra: string]: unknown;
}

export interface ChartSeries {
  name: string;
  /** [x, y] points. */
  points: Array<[number, number]>;
}

export interface Chart {
  /** File stem, e.g. "mark-twitter-cost" → reports/mark-twitter-cost.svg */
  id: string;
  title: string;
  xLabel: string;
  yLabel: string;
  kind: "line" | "bar";
  series: ChartSeries[];
}

export interface ScenarioResult {
  scenario: string;
  /** What the paper reports for this experiment, in words and numbers, for reports/README.md. */
  paper: string;
  systems: SystemResult[];
  /** Rows printed as the scenario's table (keys are column names). */
  table: Array<Record<string, string | number>>;
  charts: Chart[];
  /** Free-form notes: where and why our figure differs from the paper's. */
  notes: string[];
  [extra: string]: unknown;
}

/** Options the CLI parses for every scenario. Trace-driven scenarios get the trace's counts. */
export interface ScenarioOptions {
  seed: number;
  /**
   * Counts per bin of the trace read by the CLI: --trace FILE, else the bundled Twitter trace
   * (libs/sim/data/). Without it (tests, other callers) trace-driven scenarios use a synthetic load.
   */
  trace?: TraceData;
  tracePath?: string;
  peakQps?: number;
  /** Simulated duration in seconds, where the scenario allows choosing it. */
  durationS?: number;
  /**
   * The MArk systems' predictor (`--predictor`; libs/policy predictors.ts, the registry the live
   * forecaster uses; a `module:` one is loaded by the CLI). @default auto
   */
  predictor?: Predictor;
  /**
   * Reads a file of libs/sim/data by name (the CLI passes one; tests pass their own), for scenarios
   * that replay several bundled traces (inferline-real-traces), which stay pure.
   */
  readDataFile?: (name: string) => string;
}

export interface Scenario {
  name: string;
  description: string;
  run(options: ScenarioOptions): ScenarioResult;
}
