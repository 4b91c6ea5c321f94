import type { ServingResult, ModelFigures } from "../benchmarks/serving.js";
import type { SelectionResult } from "../benchmarks/selection.js";
import type { EstimatorResult } from "../benchmarks/estimator.js";
import type { SimResultFigure } from "../benchmarks/sim.js";
import type { Envelope } from "./results.js";

/** bench/results/summary.json: the headline figures, each with the command and date that produced it. */

type PerPath = Record<string, number | null>;

export interface Summary {
  /** Date of the newest figure. */
  date: string;
  /** Low-load latency over raw onnxruntime (same run, same input), by model, for the HTTP and NATS paths. Goal ≤ 1 ms. */
  added_latency_p50_ms: Record<string, PerPath> | null;
  /** Goal ≤ 3 ms. */
  added_latency_p99_ms: Record<string, PerPath> | null;
  /** Saturated throughput / raw onnxruntime at batch 8 (the variant's max batch). Goal ≥ 0.8 for ocr-rec. */
  throughput_vs_raw: Record<string, PerPath> | null;
  /** Saturated throughput / the direct server (Fastify + onnxruntime, no bus). */
  throughput_vs_direct: Record<string, PerPath> | null;
  /** Tiny model: queries/s of each path and of the bare NATS echo, and the ratios to the echo. */
  small_model_qps: Record<string, number | string | null> | null;
  /** Per-query variant selection, p99, µs, catalogue of 1 000 variants. */
  selection_p99_us: number | null;
  /** InferLine estimator, one hour at 150 QPS through a four-stage pipeline, ms. */
  estimator_hour_ms: number | null;
  /** Simulator, one hour at 1 000 QPS with per-query selection, wall seconds. */
  sim_hour_1000qps_s: number | null;
  /** RSS of each process, MiB: idle (models loaded, no traffic) and under load (peak). */
  rss_mb: Record<string, { idle: number | null; load: number | null }> | null;
  /**
   * The data path's goals (issue 14), each a ratio of two figures of one serving run, with the goal,
   * whether it is met, how it is computed and the run (command, date) that produced it; and the server
   * scenario's rates beside the direct server's (issue 28).
   */
  ratios: (Record<RatioName, Ratio> & { server_scenario_qps: ServerScenarioSummary | null }) | null;
  /** HTTP throughput of the tiny model by frontend processes (`--frontends`), when the serving run measured it. */
  frontend_processes: FrontendProcessesSummary | null;
  /** Goal met, by model and path (HTTP, NATS). */
  goals: Record<string, Record<string, boolean> | Record<string, Record<string, boolean>>>;
  sources: Record<string, { command: string; date: string; quick: boolean; error?: string } | null>;
  notes: string[];
}

export const RATIO_NAMES = [
  "nats_added_p50_vs_js_echo_p50",
  "js_echo_p50_vs_echo_p50",
  "http_frontend_added_p50_vs_direct_added_p50",
  "http_cpu_per_query_vs_direct",
  "tiny_nats_qps_vs_direct",
  "tiny_http_qps_vs_direct",
  "ocr_rec_nats_vs_raw",
  "ocr_rec_http_vs_raw",
] as const;
export type RatioName = (typeof RATIO_NAMES)[number];

export interface Ratio {
  value: number | null;
  /** The goal: `value <= goal` (`le`) or `value >= goal` (`ge`). */
  goal: { le: number } | { ge: number };
  met: boolean | null;
  /** How it is computed, with the figures it came from. */
  how: string;
  run: { command: string; date: string; quick: boolean; loadAvgAtStart: number[] } | null;
}

/**
 * MLPerf Inference's server scenario (bench/lib/server-scenario.ts): per model, the p99 bound, the
 * direct server's highest Poisson rate within it (`direct`: HTTP JSON; `direct-bin`: the binary tensor
 * extension), and each protocol's, with the direct server it is compared with and the ratio.
 */
export interface ServerScenarioSummary {
  models: Record<
    string,
    {
      bound_ms: number;
      /** Seconds of arrivals per step (more at a low rate, up to max_step_s, so that a step sends min_queries), grace after it, steps per target at most. */
      step_s: number;
      max_step_s: number;
      min_queries: number;
      grace_s: number;
      max_steps: number;
      direct_qps: Record<string, number>;
      protocols: Record<string, { qps: number; direct: string; direct_qps: number | null; vs_direct: number | null }>;
    }
  >;
  how: string;
  run: Ratio["run"];
}

/** Saturated HTTP queries/s of the tiny model by frontend processes (FRONTEND_PROCESSES), by path. */
export interface FrontendProcessesSummary {
  model: string;
  /** Path → process count → queries/s (median over rotations). */
  qps: Record<string, Record<string, number>>;
  /** Path → process count → queries/s ÷ with one process (median of within-rotation ratios). */
  vs_one: Record<string, Record<string, number | null>>;
  /** Path → process count → (queries/s − with one) ÷ the processes added. */
  per_added_process_qps: Record<string, Record<string, number | null>>;
  run: Ratio["run"];
}

const r3 = (x: number): number => Math.round(x * 1000) / 1000;

/** The server scenario of a serving run, or null when it has none (results written before it was measured). */
export function serverScenarioSummary(serving: Envelope<ServingResult>): ServerScenarioSummary | null {
  const s = serving.result;
  if (!s) return null;
  const models: ServerScenarioSummary["models"] = {};
  for (const m of [s.models.small, s.models.rec]) {
    const sc = m.serverScenario;
    if (!sc) continue;
    const protocols: ServerScenarioSummary["models"][string]["protocols"] = {};
    const direct: Record<string, number> = {};
    for (const [name, t] of Object.entries(sc.targets)) {
      const reference = sc.reference?.[name];
      if (reference === undefined) direct[name] = t.maxQps;
      else protocols[name] = { qps: t.maxQps, direct: reference, direct_qps: sc.targets[reference]?.maxQps ?? null, vs_direct: sc.vsDirect[name] ?? null };
    }
    models[m.model] = { bound_ms: sc.boundMs, step_s: sc.stepS, max_step_s: sc.maxStepS, min_queries: sc.minQueries, grace_s: sc.graceS, max_steps: sc.maxSteps, direct_qps: direct, protocols };
  }
  if (Object.keys(models).length === 0) return null;
  return {
    models,
    how: "the highest Poisson arrival rate (open loop, seeded) at which p99 latency, over every query sent in a step (step_s, longer at a low rate so that it sends min_queries; a query failed or unanswered grace_s after the step counts as over), stays within the model's bound (bound_ms); bracketed from a third of the saturated closed-loop rate, then bisected, at most max_steps steps per target (0, not searched: a path whose low-load p50 is over the bound); vs_direct: ÷ the one-process direct server's rate in the same encoding (HTTP JSON: direct; HTTP binary and NATS: direct-bin, the binary tensor extension)",
    run: { command: serving.command, date: serving.date, quick: serving.quick, loadAvgAtStart: serving.machine.loadAvgAtStart },
  };
}

/** The frontend-process figures of a serving run measured with `--frontends`, or null. */
export function frontendProcessesSummary(serving: Envelope<ServingResult> | null): FrontendProcessesSummary | null {
  const f = serving?.result?.frontends;
  if (!serving || !f) return null;
  const qps: FrontendProcessesSummary["qps"] = {};
  for (const [path, byCount] of Object.entries(f.paths)) qps[path] = Object.fromEntries(Object.entries(byCount).map(([n, x]) => [n, x.qps]));
  return { model: f.model, qps, vs_one: f.vsOne, per_added_process_qps: f.perAddedProcessQps, run: { command: serving.command, date: serving.date, quick: serving.quick, loadAvgAtStart: serving.machine.loadAvgAtStart } };
}

/** Sum of a target's CPU µs per query over the given processes (those that have a figure). */
function cpuOver(perQuery: Record<string, number> | undefined, processes: readonly string[]): number | null {
  if (!perQuery) return null;
  let sum = 0;
  let any = false;
  for (const p of processes) {
    const us = perQuery[p];
    if (us !== undefined) {
      sum += us;
      any = true;
    }
  }
  return any ? sum : null;
}

/**
 * The ratios of issue 14 from one serving run (all on the tiny model but the two ocr-rec ones).
 * Latencies are low-load p50s; "added" is over raw onnxruntime's p50. HTTP is the JSON path (what
 * the issue measured), except ocr-rec's, which is the binary extension (issue 11's must-show).
 */
export function servingRatios(serving: Envelope<ServingResult>): Summary["ratios"] {
  const s = serving.result;
  if (!s) return null;
  const run = { command: serving.command, date: serving.date, quick: serving.quick, loadAvgAtStart: serving.machine.loadAvgAtStart };
  const small = s.models.small;
  const lat = small.lowLoad.latencyMs;
  const added = small.lowLoad.addedMs;
  const tp = small.throughput;
  const ratio = (value: number | null | undefined, goal: Ratio["goal"], how: string): Ratio => {
    const v = value === null || value === undefined || !Number.isFinite(value) ? null : r3(value);
    return { value: v, goal, met: v === null ? null : "le" in goal ? v <= goal.le : v >= goal.ge, how, run };
  };
  const div = (a: number | null | undefined, b: number | null | undefined): number | null => (a === null || a === undefined || b === null || b === undefined || b === 0 ? null : a / b);
  const natsAdded = added.nats?.p50;
  const jsEcho = lat["js-echo"]?.p50;
  const echo = lat.echo?.p50;
  const httpAdded = added.http?.p50;
  const directAdded = added.direct?.p50;
  const frontendAdded = httpAdded !== undefined && natsAdded !== undefined ? httpAdded - natsAdded : null;
  const system = (s.settings["systemProcesses"] as string[] | undefined) ?? [];
  const httpCpu = cpuOver(tp.targets.http?.cpuUsPerQuery, system);
  const directCpu = cpuOver(tp.targets.direct?.cpuUsPerQuery, ["direct-small"]);
  const rec = s.models.rec.throughput;
  return {
    nats_added_p50_vs_js_echo_p50: ratio(div(natsAdded, jsEcho), { le: 1.1 }, `${small.model}: NATS path added p50 ${natsAdded} ms / js-echo p50 ${jsEcho} ms`),
    js_echo_p50_vs_echo_p50: ratio(div(jsEcho, echo), { le: 1.5 }, `js-echo p50 ${jsEcho} ms / bare NATS echo p50 ${echo} ms`),
    http_frontend_added_p50_vs_direct_added_p50: ratio(
      div(frontendAdded, directAdded),
      { le: 1.1 },
      `${small.model}: (HTTP JSON added p50 ${httpAdded} ms − NATS added p50 ${natsAdded} ms) / direct server's added p50 ${directAdded} ms`,
    ),
    http_cpu_per_query_vs_direct: ratio(
      div(httpCpu, directCpu),
      { le: 2 },
      `${small.model} saturated, HTTP JSON: CPU µs per query summed over the system's processes (${system.join(", ")}) ${httpCpu === null ? "–" : Math.round(httpCpu)} / the direct server's ${directCpu === null ? "–" : Math.round(directCpu)} (the load generator excluded from both)`,
    ),
    tiny_nats_qps_vs_direct: ratio(tp.vsDirect.nats, { ge: 1 }, `${small.model} saturated: NATS path queries/s / direct server's, median of within-rotation ratios (${tp.targets.nats?.qps} / ${tp.targets.direct?.qps} queries/s, medians)`),
    tiny_http_qps_vs_direct: ratio(tp.vsDirect.http, { ge: 0.8 }, `${small.model} saturated: HTTP JSON queries/s / direct server's, median of within-rotation ratios (${tp.targets.http?.qps} / ${tp.targets.direct?.qps} queries/s, medians)`),
    ocr_rec_nats_vs_raw: ratio(rec.vsRaw.nats, { ge: 0.8 }, `ocr-rec saturated: NATS path queries/s / raw onnxruntime batch 8, median of within-rotation ratios (${rec.targets.nats?.qps} / ${rec.rawB8Qps} queries/s, medians)`),
    ocr_rec_http_vs_raw: ratio(rec.vsRaw["http-bin"], { ge: 0.8 }, `ocr-rec saturated: HTTP with the binary tensor extension queries/s / raw onnxruntime batch 8, median of within-rotation ratios (${rec.targets["http-bin"]?.qps} / ${rec.rawB8Qps} queries/s, medians; HTTP JSON: ${rec.vsRaw.http})`),
    server_scenario_qps: serverScenarioSummary(serving),
  };
}

function perModelBool(s: ServingResult, pick: (m: ModelFigures) => Record<string, boolean>): Record<string, Record<string, boolean>> {
  return { [s.models.small.model]: pick(s.models.small), [s.models.rec.model]: pick(s.models.rec) };
}

function perModel(s: ServingResult, pick: (m: ModelFigures) => PerPath): Record<string, PerPath> {
  return { [s.models.small.model]: pick(s.models.small), [s.models.rec.model]: pick(s.models.rec) };
}

export function buildSummary(
  serving: Envelope<ServingResult> | null,
  selection: Envelope<SelectionResult> | null,
  estimator: Envelope<EstimatorResult> | null,
  sim: Envelope<SimResultFigure> | null,
): Summary {
  const notes: string[] = [];
  const s = serving?.result ?? null;
  const source = (e: Envelope<unknown> | null) => (e ? { command: e.command, date: e.date, quick: e.quick, ...(e.error ? { error: e.error } : {}) } : null);
  const dates = [serving, selection, estimator, sim].filter((e): e is Envelope<never> => e !== null).map((e) => e.date).sort();
  let goals: Summary["goals"] = {};
  let smallQps: Summary["small_model_qps"] = null;
  let rss: Summary["rss_mb"] = null;
  if (s) {
    const paths = ["http", "http-bin", "nats"];
    const byPath = (m: ModelFigures, ok: (p: string) => boolean): Record<string, boolean> => Object.fromEntries(paths.map((p) => [p, ok(p)]));
    const rec = s.models.rec;
    goals = {
      added_latency_p50_le_1ms: perModelBool(s, (m) => byPath(m, (p) => (m.lowLoad.addedMs[p]?.p50 ?? Infinity) <= 1)),
      added_latency_p99_le_3ms: perModelBool(s, (m) => byPath(m, (p) => (m.lowLoad.addedMs[p]?.p99 ?? Infinity) <= 3)),
      ocr_rec_throughput_vs_raw_ge_0_8: byPath(rec, (p) => (rec.throughput.vsRaw[p] ?? 0) >= 0.8),
    };
    const t = s.models.small.throughput;
    smallQps = {
      model: s.models.small.model,
      http: t.targets.http?.qps ?? null,
      nats: t.targets.nats?.qps ?? null,
      direct: t.targets.direct?.qps ?? null,
      raw_b8: t.rawB8Qps,
      raw_b1: t.rawB1Qps,
      nats_echo: t.targets.echo?.qps ?? null,
      jetstream_echo: t.targets["js-echo"]?.qps ?? null,
      http_vs_echo: t.vsEcho.http ?? null,
      nats_vs_echo: t.vsEcho.nats ?? null,
    };
    rss = {};
    for (const [name, r] of Object.entries(s.rssMb)) rss[name] = { idle: r.idle, load: r.load };
    if (!s.models.small.note.startsWith("smallest digits")) notes.push(`small model: ${s.models.small.model}: ${s.models.small.note}`);
    if (s.settings.variantsProfiledOnRegister === false) {
      notes.push(
        `serving: variant ${s.models.rec.variant.replace(s.models.rec.model, "<model>")} pinned, registered with PROFILE_ON_REGISTER=false so that the variant state machine and model autoscaler leave it alone (with profiling on, see "Bugs found" in bench/README.md)`,
      );
    }
    notes.push("added latency = the path's quantile minus raw onnxruntime's same quantile, same run, same input; throughput ratios are medians of within-rotation ratios");
  } else {
    notes.push(`serving benchmark: ${serving?.error ?? "not run yet"}`);
  }
  if (!selection?.result) notes.push(`selection: ${selection?.error ?? "not run yet"}`);
  if (!estimator?.result) notes.push(`estimator: ${estimator?.error ?? "not run yet"}`);
  if (!sim?.result) notes.push(`sim: ${sim?.error ?? "not run yet"}`);
  return {
    date: dates[dates.length - 1] ?? new Date().toISOString(),
    added_latency_p50_ms: s ? perModel(s, (m) => ({ http: m.lowLoad.addedMs.http?.p50 ?? null, "http-bin": m.lowLoad.addedMs["http-bin"]?.p50 ?? null, nats: m.lowLoad.addedMs.nats?.p50 ?? null })) : null,
    added_latency_p99_ms: s ? perModel(s, (m) => ({ http: m.lowLoad.addedMs.http?.p99 ?? null, "http-bin": m.lowLoad.addedMs["http-bin"]?.p99 ?? null, nats: m.lowLoad.addedMs.nats?.p99 ?? null })) : null,
    throughput_vs_raw: s ? perModel(s, (m) => ({ http: m.throughput.vsRaw.http ?? null, "http-bin": m.throughput.vsRaw["http-bin"] ?? null, nats: m.throughput.vsRaw.nats ?? null, direct: m.throughput.vsRaw.direct ?? null })) : null,
    throughput_vs_direct: s ? perModel(s, (m) => ({ http: m.throughput.vsDirect.http ?? null, "http-bin": m.throughput.vsDirect["http-bin"] ?? null, nats: m.throughput.vsDirect.nats ?? null })) : null,
    small_model_qps: smallQps,
    ratios: serving ? servingRatios(serving) : null,
    frontend_processes: frontendProcessesSummary(serving),
    selection_p99_us: selection?.result?.p99UsAt1000 ?? null,
    estimator_hour_ms: estimator?.result?.hourMs ?? null,
    sim_hour_1000qps_s: sim?.result?.hourS ?? null,
    rss_mb: rss,
    goals,
    sources: { serving: source(serving), selection: source(selection), estimator: source(estimator), sim: source(sim) },
    notes,
  };
}
