/**
 * The discrete-event simulator (libs/sim): wall time to simulate one day and one hour at 1 000 QPS,
 * two ways:
 *
 * - `day` (the goal: ≤ 60 s) and `stack` (the summary's hour figure): `stackBenchmark`
 *   (lib/stack-bench.ts), the whole INFaaS policy stack (per-query selection, variant state machine and
 *   model autoscaler every second, VM autoscaler every 2 s, four apps × the four ResNet50 variants of
 *   INFaaS §6.2, machines that boot in 30 s): 86 400 s (≈ 86 M queries) and 3 600 s (≈ 3.6 M). With
 *   `--quick` the day is not run: its figure is the hour's × 24 (`day.scaled`, said in the log). The
 *   day reports the process's RSS after it and its peak (the engine's memory is bounded in the number
 *   of queries: per-second series grow with simulated time, latency samples stop growing past 2^22
 *   values, see libs/sim stats.ts);
 * - `routing`: the engine with only per-query selection on the query path: every arrival is routed by
 *   `SelectionIndex.select` to one of four variants' batched queues (fixed priced replicas, Wbatch 0,
 *   late queries shed), a monitor feeds arrival rates back every second; 700 QPS needing accuracy ≥
 *   75% and 300 QPS with no floor, Gamma arrivals (CV 1), SLO 100 ms. The difference between the two
 *   is what the controllers cost.
 */
import { SelectionIndex, type VariantProfile } from "@sloserve/policy";
import { Simulator, drop, gammaArrivals, type Queue } from "@sloserve/sim";
import { stackBenchmark } from "../lib/stack-bench.js";
import { round } from "../lib/stats.js";

/** The goal for one simulated day at 1 000 QPS through the whole stack, wall seconds. */
export const SIM_DAY_GOAL_S = 60;

export interface SimRun {
  hourS: number;
  arrivals: number;
  events: number;
  eventsPerS: number;
  sloAttainment: number;
  p99Ms: number;
}

export interface SimDayRun {
  /** Wall seconds for the simulated day (with `scaled`: the hour's × 24). */
  dayS: number;
  /** Simulated seconds actually run: 86 400, or 3 600 when scaled. */
  simulatedS: number;
  /** --quick: the day was not run; its wall time, queries and events are the hour's × 24, the rest the hour's. */
  scaled: boolean;
  goalS: number;
  met: boolean;
  arrivals: number;
  events: number;
  eventsPerS: number;
  sloAttainment: number;
  p99Ms: number;
  /** Scaling decisions in the system's log (which keeps the first 5 000). */
  decisions: number;
  /** RSS after the run and the process's peak RSS so far, MB (null when scaled). */
  rssMb: number | null;
  peakRssMb: number | null;
}

export interface SimResultFigure {
  /** Wall seconds for the simulated hour of the whole policy stack (stackBenchmark). */
  hourS: number | null;
  /** Wall seconds for the simulated day of the whole policy stack (goal: ≤ SIM_DAY_GOAL_S). */
  dayS?: number | null;
  day?: SimDayRun;
  stack: SimRun & { decisions: number };
  routing: SimRun;
  simulatedS: number;
  qps: number;
  arrivals: number;
  events: number;
  eventsPerS: number;
  sloAttainment: number;
  p99Ms: number;
  note?: string;
}

export function runSim(options: { quick: boolean; log: (s: string) => void }): SimResultFigure {
  const t0 = performance.now();
  const stackRun = stackBenchmark({ durationS: 3600, qps: 1000, seed: 1 });
  const stackS = (performance.now() - t0) / 1000;
  const stack = {
    hourS: round(stackS),
    arrivals: stackRun.result.arrivals,
    events: stackRun.result.events,
    eventsPerS: Math.round(stackRun.result.events / stackS),
    sloAttainment: round(stackRun.result.sloAttainment, 4),
    p99Ms: round(stackRun.result.latencyMs.p99),
    decisions: stackRun.decisions,
  };
  options.log(`  simulator, whole INFaaS stack: one hour at 1000 QPS (${stack.arrivals} queries, ${stack.events} events, ${stack.decisions} scaling decisions) in ${stack.hourS} s; attainment ${stack.sloAttainment}`);
  const routing = runRouting(options);
  const day = options.quick ? scaledDay(stack, stackS) : runDay(options);
  const goal = `goal ≤ ${SIM_DAY_GOAL_S} s: ${day.met ? "met" : "NOT met"}`;
  if (day.scaled) {
    options.log(`  simulator, whole INFaaS stack: one day at 1000 QPS NOT run (--quick): the hour × 24 = ${day.dayS} s (${goal})`);
  } else {
    options.log(
      `  simulator, whole INFaaS stack: one day at 1000 QPS (${day.arrivals} queries, ${day.events} events, ${day.eventsPerS} events/s, ${day.decisions} scaling decisions) in ${day.dayS} s (${goal}); attainment ${day.sloAttainment}, p99 ${day.p99Ms} ms; RSS ${day.rssMb} MB after, peak ${day.peakRssMb} MB`,
    );
  }
  return {
    hourS: stack.hourS,
    dayS: day.dayS,
    day,
    stack,
    routing,
    simulatedS: 3600,
    qps: 1000,
    arrivals: stack.arrivals,
    events: stack.events,
    eventsPerS: stack.eventsPerS,
    sloAttainment: stack.sloAttainment,
    p99Ms: stack.p99Ms,
    ...(day.scaled ? { note: "--quick: the simulated day was not run; dayS is the hour × 24" } : {}),
  };
}

/** One simulated day (86 400 s) at 1 000 QPS through the whole stack. */
function runDay(options: { log: (s: string) => void }): SimDayRun {
  options.log("  simulator, whole INFaaS stack: one day at 1000 QPS (86 400 simulated s) ...");
  const t0 = performance.now();
  const run = stackBenchmark({ durationS: 86_400, qps: 1000, seed: 1 });
  const wallS = (performance.now() - t0) / 1000;
  const r = run.result;
  return {
    dayS: round(wallS),
    simulatedS: 86_400,
    scaled: false,
    goalS: SIM_DAY_GOAL_S,
    met: wallS <= SIM_DAY_GOAL_S,
    arrivals: r.arrivals,
    events: r.events,
    eventsPerS: Math.round(r.events / wallS),
    sloAttainment: round(r.sloAttainment, 4),
    p99Ms: round(r.latencyMs.p99),
    decisions: run.decisions,
    rssMb: Math.round(process.memoryUsage().rss / 1e6),
    peakRssMb: Math.round((process.resourceUsage().maxRSS * 1024) / 1e6),
  };
}

/** --quick: the day's figures from the hour's, × 24. */
function scaledDay(stack: SimRun & { decisions: number }, hourWallS: number): SimDayRun {
  const dayS = hourWallS * 24;
  return {
    dayS: round(dayS),
    simulatedS: 3600,
    scaled: true,
    goalS: SIM_DAY_GOAL_S,
    met: dayS <= SIM_DAY_GOAL_S,
    arrivals: stack.arrivals * 24,
    events: stack.events * 24,
    eventsPerS: stack.eventsPerS,
    sloAttainment: stack.sloAttainment,
    p99Ms: stack.p99Ms,
    decisions: stack.decisions,
    rssMb: null,
    peakRssMb: null,
  };
}

function runRouting(options: { quick: boolean; log: (s: string) => void }): SimRun {
  const variants: VariantProfile[] = [
    { name: "rn50-gpu-b8", model: "rn50", app: "classify", hardware: "gpu", batchSize: 8, accuracy: 0.76, latencyMs: { 1: 5, 8: 16 }, peakQps: 500, loadLatencyMs: 8_000, pricePerS: 0.0009, profiled: true },
    { name: "rn50-inf-b4", model: "rn50", app: "classify", hardware: "inferentia", batchSize: 4, accuracy: 0.759, latencyMs: { 1: 8, 4: 14 }, peakQps: 285, loadLatencyMs: 6_000, pricePerS: 0.0006, profiled: true },
    { name: "mobilenet-cpu-b1", model: "mobilenet", app: "classify", hardware: "cpu", batchSize: 1, accuracy: 0.7, latencyMs: { 1: 20 }, peakQps: 50, loadLatencyMs: 1_000, pricePerS: 0.00005, profiled: true },
    { name: "rn50-cpu-b1", model: "rn50", app: "classify", hardware: "cpu", batchSize: 1, accuracy: 0.76, latencyMs: { 1: 60 }, peakQps: 16, loadLatencyMs: 2_000, pricePerS: 0.0001, profiled: true },
  ];
  const replicasOf: Record<string, number> = { "rn50-gpu-b8": 2, "rn50-inf-b4": 1, "mobilenet-cpu-b1": 8, "rn50-cpu-b1": 0 };
  const qps = 1000;
  const durationS = 3600;
  const sim = new Simulator({ seed: 1, durationMs: durationS * 1000, drainMs: 10_000 });
  const index = new SelectionIndex(variants);
  const queues = new Map<string, Queue>();
  for (const v of variants) {
    const q = sim.addQueue({ name: v.name, maxBatch: v.batchSize, waitMs: 0, shedLate: true });
    queues.set(v.name, q);
    const n = replicasOf[v.name] ?? 0;
    for (let i = 0; i < n; i++) sim.addReplica(q, null, { latencyMs: v.latencyMs, pricePerS: v.pricePerS, label: v.name });
    index.setRuntime(v.name, { state: n > 0 ? "active" : "inactive", instances: n, qps: 0, workers: n > 0 ? [{ worker: `w-${v.name}`, qps: 0 }] : [] });
  }
  sim.addStream({ app: "classify", sloMs: 100, minAccuracy: 0.75, process: gammaArrivals(qps * 0.7, 1, durationS) });
  sim.addStream({ app: "classify", sloMs: 100, process: gammaArrivals(qps * 0.3, 1, durationS) });
  sim.setRouter((query, _from, cause) => {
    if (cause === "served") return null;
    if (cause === "late") return drop("deadline exceeded");
    const d = index.select(query.app, { latencyMs: query.sloMs, minAccuracy: query.minAccuracy });
    if (d.kind !== "active") return drop(d.reason);
    return queues.get(d.variant.name) ?? drop("no queue");
  });
  sim.every(1000, (nowMs) => {
    for (const v of variants) {
      const q = queues.get(v.name) as Queue;
      const n = q.readyReplicas();
      const rate = q.rateQps(nowMs);
      index.setRuntime(v.name, { state: n > 0 ? "active" : "inactive", instances: n, qps: rate, workers: n > 0 ? [{ worker: `w-${v.name}`, qps: rate }] : [] });
    }
  });
  const t0 = performance.now();
  const r = sim.run();
  const wallS = (performance.now() - t0) / 1000;
  const fig: SimRun = {
    hourS: round(wallS),
    arrivals: r.arrivals,
    events: r.events,
    eventsPerS: Math.round(r.events / wallS),
    sloAttainment: round(r.sloAttainment, 4),
    p99Ms: round(r.latencyMs.p99),
  };
  options.log(`  simulator, routing only: one hour at ${qps} QPS (${r.arrivals} queries, ${r.events} events) in ${fig.hourS} s; attainment ${fig.sloAttainment}, p99 ${fig.p99Ms} ms`);
  return fig;
}
