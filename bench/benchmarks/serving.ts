/**
 * The serving benchmark: the real stack (nats-server, redis-server, registrar, dispatcher, one
 * executor-cpu, frontend as processes) against its reference points, in one run, on the same input:
 *
 * - raw: onnxruntime-node in this process, same model, same engine settings as the variant
 *   (1 intra-op thread), batch 1 for latency and batch 8 (the variant's max batch) for throughput;
 * - direct: one process, Fastify + onnxruntime, no bus, same JSON protocol and batching (lib/direct-server.ts);
 * - echo / js-echo: a bare NATS request-reply echo, and the same hops as the system without the model
 *   (core request → relay → JetStream work queue → consumer → reply), with the model's request and
 *   answer sizes (lib/echo-server.ts); js-echo-nt: the same with nats.js's `noAsyncTraces` in the relay.
 *
 * Paths of the system: HTTP (client → frontend → dispatcher → JetStream → executor → frontend → client)
 * and NATS (client → dispatcher → JetStream → executor → client), binary tensors on NATS.
 *
 * The variant is pinned so that the system runs at the same batch size and threads as the references:
 * NATS queries go to `infer.variant.<model>--cpu-fp32-b8-t1`; HTTP queries name the model, and the
 * dispatcher routes them to its active variant, which is that one (the first NATS query loaded it;
 * the answers' served_by.variant is recorded to check it). By default the registrar does not profile
 * (PROFILE_ON_REGISTER=false), so the control plane (variant states, model autoscaler) leaves the
 * pinned variant alone; with `profileVariants` every CPU variant is profiled (and the wait timed)
 * before anything is measured.
 *
 * Figures: low-load latency (one query at a time, interleaved across targets) and its excess over
 * raw; saturated throughput (closed loop, N clients) and its ratio to raw and to direct; CPU time per
 * query of every process; RSS of every process at start, idle and under load; the server scenario
 * (MLPerf Inference's: the highest Poisson arrival rate whose p99 stays within a bound, lib/server-scenario.ts)
 * of every path and of the direct server; with `frontends`, HTTP throughput by frontend processes
 * (lib/frontend-scaling.ts).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { connect, headers as natsHeaders, type NatsConnection } from "@nats-io/transport-node";
import { contentTypes, decodeTensors, headers, subjects, type Tensor } from "@sloserve/contracts";
import { INFERENCE_NICE } from "@sloserve/executor";
import { OnnxRunner } from "@sloserve/runtime";
import { deriveSeed, median, variantName } from "@sloserve/policy";
import { registerOverHttp, startStack, waitForProfiles, type Stack } from "@sloserve/stack";
import { measureFrontendScaling, type FrontendScalingFigure } from "../lib/frontend-scaling.js";
import { HttpClient } from "../lib/http-client.js";
import { makeQuery, recModel, smallModel, type Query } from "../lib/inputs.js";
import { backToBack, closedLoop, interleaved, poissonOpenLoop, type Target } from "../lib/load.js";
import { BENCH_DIR, CpuMeter, RssSampler, atNice, monotonicUs, rssMb, startChild, type Child } from "../lib/proc.js";
import { nextRate, recordStep, searchResult, startSearch, type SearchResult, type SearchState } from "../lib/server-scenario.js";
import { mean, round, roundSummary, summarize, type Summary } from "../lib/stats.js";
import { REQUEST_TIMEOUT_MS, Targets, waitForFirstAnswer } from "../lib/targets.js";

export interface ServingOptions {
  quick: boolean;
  small: "auto" | "digits" | "ocr-cls";
  /** Write CPU profiles of every service and reference server here (lib/cpu-profiler.mjs). */
  profileDir?: string;
  /**
   * Profile every variant at registration, as `npm start` does (PROFILE_ON_REGISTER=true). Off by
   * default: profiled variants enter the variant state machine and the model autoscaler, which (see
   * bench/README.md) take the pinned variant out of service during the run; unprofiled, the data
   * path is measured on its own.
   */
  profileVariants: boolean;
  /**
   * Also measure saturated HTTP throughput of the tiny model through frontends of these many processes
   * (FRONTEND_PROCESSES; 1 is the stack's own frontend), started beside it (lib/frontend-scaling.ts).
   */
  frontends?: number[];
  log: (line: string) => void;
}

export interface PhaseWindow {
  phase: string;
  fromUs: number;
  toUs: number;
}

export interface ThroughputFigure {
  /** Median over the rotations. */
  qps: number;
  qpsPerRotation: number[];
  firstError?: string;
  concurrency: number;
  durationS: number;
  errors: number;
  latencyMs: Summary;
  meanBatch: number | null;
  /** CPU time per answered query, µs, by process. */
  cpuUsPerQuery: Record<string, number>;
}

/** One step of a server-scenario search: a Poisson rate tried, and what it gave. */
export interface ServerScenarioStep {
  qps: number;
  /** Seconds of arrivals (longer than the plan's step at a low rate, so that it sends enough queries). */
  durationS: number;
  /** p99 over every query sent, ms from its arrival time; null: infinite (a query failed or went unanswered past the step's end + grace). */
  p99Ms: number | null;
  p50Ms: number | null;
  pass: boolean;
  sent: number;
  late: number;
  failed: number;
  firstError?: string;
  /** How late the load generator sent its queries, p99, ms. */
  sendLagP99Ms: number;
}

/** The server scenario of one model (lib/server-scenario.ts): per target, the highest Poisson rate whose p99 stayed within the bound. */
export interface ServerScenarioFigure {
  boundMs: number;
  /** Seconds of arrivals per step (up to maxStepS at a low rate, so that a step sends minQueries queries), and the grace after them for the last answers. */
  stepS: number;
  maxStepS: number;
  minQueries: number;
  graceS: number;
  /** Steps per target at most. */
  maxSteps: number;
  seed: number;
  /** `ended` "low-load": the target's median latency one query at a time (the low-load phase) was already over the bound, so it was not searched (0). */
  targets: Record<string, { maxQps: number; failQps: number | null; startQps: number; ended: SearchResult["ended"] | "low-load"; steps: ServerScenarioStep[] }>;
  /** The reference of each path: the direct server in JSON (`direct`) or in the binary tensor extension (`direct-bin`). */
  reference: Record<string, string>;
  /** maxQps ÷ its reference's maxQps. */
  vsDirect: Record<string, number | null>;
}

export interface ModelFigures {
  model: string;
  /** The variant the NATS queries name (max batch 8, 1 thread, fp32). */
  variant: string;
  /** Seconds from the registration request to its answer (and, with profileVariants, to every CPU variant profiled). */
  registerAndProfileS: number;
  /** Variants that answered, by path, with counts (low load and throughput phases). */
  servedBy: Record<string, Record<string, number>>;
  note: string;
  inputShape: number[];
  maxRelDiffVsRaw: number;
  lowLoad: {
    rounds: number;
    latencyMs: Record<string, Summary>;
    /** Latency over raw at the same quantile: p50(path) − p50(raw), p99(path) − p99(raw). */
    addedMs: Record<string, { p50: number; p99: number }>;
    /** Server-side timing of the NATS path (the executor's timing_ms), medians. */
    serverTimingMs: { queue: number; inference: number; total: number } | null;
    /** System answers at low load that came in a batch larger than 1 (should be 0). */
    batchedAnswers: number;
    /** Failed queries by target (excluded from the latencies). */
    errors: Record<string, { count: number; first: string }>;
  };
  throughput: {
    /** Rounds of (raw, every target); figures are medians over them, ratios are taken within a round. */
    rotations: number;
    rawB1Qps: number;
    rawB8QpsPerRotation: number[];
    rawB8Qps: number;
    rawB8BatchMs: number;
    targets: Record<string, ThroughputFigure>;
    vsRaw: Record<string, number | null>;
    vsDirect: Record<string, number | null>;
    vsEcho: Record<string, number | null>;
  };
  /** Absent in results files written before it was measured. */
  serverScenario?: ServerScenarioFigure;
}

export interface ServingResult {
  models: { small: ModelFigures; rec: ModelFigures };
  /** With the `frontends` option only. */
  frontends?: FrontendScalingFigure;
  rssMb: Record<string, { start: number | null; idle: number | null; load: number | null }>;
  windows: PhaseWindow[];
  pids: Record<string, number>;
  settings: Record<string, unknown>;
}

interface Plan {
  lowLoad: { rounds: number; warmupRounds: number; maxMs: number };
  /** Rounds of the throughput phases. */
  rotations: number;
  raw: { warmupMs: number; durationMs: number };
  load: { warmupMs: number; durationMs: number; concurrency: number };
  /**
   * The server scenario: p99 bound, steps per target, time of arrivals per step (longer at low rates,
   * up to maxStepMs, so that a step sends minQueries queries: no rate is tried that would send fewer),
   * grace for the last answers, and the longest wait for an overloaded step's backlog to drain before
   * the next step.
   */
  serverScenario: { boundMs: number; steps: number; stepMs: number; maxStepMs: number; minQueries: number; graceMs: number; drainMs: number };
}

/** The seed of the server scenario's arrival times (each step's: derived from it, the model, the target and the step). */
const SERVER_SCENARIO_SEED = 28;
/**
 * The paths whose server scenario is measured, and the references beside them: the direct server in
 * JSON (the bench's "direct") for HTTP JSON, and in the binary tensor extension ("direct-bin") for the
 * binary paths, HTTP binary and NATS.
 */
const SERVER_SCENARIO_TARGETS = ["http", "http-bin", "nats", "direct", "direct-bin"] as const;
const SERVER_SCENARIO_REFERENCE: Record<string, string> = { http: "direct", "http-bin": "direct-bin", nats: "direct-bin" };

function plan(role: "small" | "rec", quick: boolean): Plan {
  // The server scenario's bounds: 15 ms for the tiny model, 100 ms for ocr-rec (issue 28).
  if (role === "small") {
    return quick
      ? { lowLoad: { rounds: 400, warmupRounds: 40, maxMs: 20_000 }, rotations: 2, raw: { warmupMs: 300, durationMs: 1_500 }, load: { warmupMs: 1_500, durationMs: 3_000, concurrency: 32 }, serverScenario: { boundMs: 15, steps: 5, stepMs: 1_500, maxStepMs: 1_500, minQueries: 20, graceMs: 250, drainMs: 5_000 } }
      : { lowLoad: { rounds: 2_000, warmupRounds: 100, maxMs: 60_000 }, rotations: 4, raw: { warmupMs: 500, durationMs: 2_500 }, load: { warmupMs: 2_000, durationMs: 6_000, concurrency: 32 }, serverScenario: { boundMs: 15, steps: 7, stepMs: 5_000, maxStepMs: 5_000, minQueries: 100, graceMs: 250, drainMs: 10_000 } };
  }
  return quick
    ? { lowLoad: { rounds: 50, warmupRounds: 5, maxMs: 25_000 }, rotations: 2, raw: { warmupMs: 300, durationMs: 2_500 }, load: { warmupMs: 3_000, durationMs: 5_000, concurrency: 32 }, serverScenario: { boundMs: 100, steps: 4, stepMs: 2_500, maxStepMs: 6_000, minQueries: 20, graceMs: 500, drainMs: 5_000 } }
    : { lowLoad: { rounds: 200, warmupRounds: 10, maxMs: 90_000 }, rotations: 4, raw: { warmupMs: 500, durationMs: 5_000 }, load: { warmupMs: 4_000, durationMs: 10_000, concurrency: 32 }, serverScenario: { boundMs: 100, steps: 6, stepMs: 8_000, maxStepMs: 24_000, minQueries: 60, graceMs: 500, drainMs: 10_000 } };
}

function maxRelDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return Infinity;
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs((a[i] as number) - (b[i] as number)) / Math.max(1, Math.abs(b[i] as number)));
  return worst;
}

/**
 * The server scenario of one model: a search per target (lib/server-scenario.ts), advanced in turn
 * (step k of every target before step k + 1 of any: they see the same machine), each starting at a
 * third of the target's saturated closed-loop rate (direct-bin, not measured in the closed loop: of
 * the higher of direct's and http-bin's) and trying at most twice that rate. A step is a seeded open
 * loop (lib/load.ts poissonOpenLoop) of `stepMs`, or longer at a low rate so that it sends
 * `minQueries` queries, up to `maxStepMs`: no rate is tried below minQueries per maxStepMs.
 */
async function measureServerScenario(
  model: string,
  targets: Record<string, Target>,
  saturatedQps: Record<string, number | undefined>,
  lowLoadP50Ms: Record<string, number | undefined>,
  s: Plan["serverScenario"],
  mark: (phase: string, fn: () => Promise<void>) => Promise<void>,
  log: (line: string) => void,
): Promise<ServerScenarioFigure> {
  // A target whose median latency one query at a time is over the bound meets it at no rate: not searched.
  const hopeless = Object.keys(targets).filter((n) => (lowLoadP50Ms[n] ?? 0) > s.boundMs);
  const names = Object.keys(targets).filter((n) => !hopeless.includes(n));
  const minQps = s.minQueries / (s.maxStepMs / 1000);
  const searches: Record<string, SearchState> = {};
  const steps: Record<string, ServerScenarioStep[]> = {};
  for (const name of names) {
    const saturated = saturatedQps[name] ?? 0;
    const startQps = Math.max(minQps, saturated / 3);
    searches[name] = startSearch({ boundMs: s.boundMs, startQps, steps: s.steps, minQps, maxQps: Math.max(startQps, 2 * saturated) });
    steps[name] = [];
  }
  if (hopeless.length > 0) log(`  ${model}: server scenario: ${hopeless.map((n) => `${n} (low-load p50 ${round(lowLoadP50Ms[n] as number)} ms)`).join(", ")} over the ${s.boundMs} ms bound at low load already: 0, not searched`);
  log(`  ${model}: server scenario, p99 ≤ ${s.boundMs} ms: ${names.join(", ")}, up to ${s.steps} steps of ${s.stepMs / 1000}${s.maxStepMs > s.stepMs ? `-${s.maxStepMs / 1000}` : ""} s each (+ ${s.graceMs / 1000} s grace)`);
  const finite = (x: number): number | null => (Number.isFinite(x) ? round(x) : null);
  for (let k = 0; k < s.steps; k++) {
    for (const name of names) {
      const qps = nextRate(searches[name] as SearchState);
      if (qps === null) continue;
      const durationMs = Math.min(s.maxStepMs, Math.max(s.stepMs, (1000 * s.minQueries) / qps));
      await mark(`server-${name}`, async () => {
        const r = await poissonOpenLoop(targets[name] as Target, { qps, durationMs, graceMs: s.graceMs, drainMs: s.drainMs, seed: deriveSeed(SERVER_SCENARIO_SEED, `${model}:${name}:${k}`) });
        searches[name] = recordStep(searches[name] as SearchState, qps, r.p99Ms);
        const pass = r.p99Ms <= s.boundMs;
        (steps[name] as ServerScenarioStep[]).push({ qps, durationS: round(durationMs / 1000), p99Ms: finite(r.p99Ms), p50Ms: finite(r.p50Ms), pass, sent: r.sent, late: r.late, failed: r.failed, ...(r.firstError ? { firstError: r.firstError } : {}), sendLagP99Ms: round(r.sendLagP99Ms) });
        log(`    ${name} step ${k + 1}: ${qps}/s for ${round(durationMs / 1000)} s → p99 ${Number.isFinite(r.p99Ms) ? `${round(r.p99Ms)} ms` : "∞"} (${pass ? "within" : "over"} the bound; ${r.sent} sent, ${r.late} late, ${r.failed} failed${r.undrained > 0 ? `, ${r.undrained} still pending` : ""})`);
        if (r.firstError) log(`      first error: ${r.firstError}`);
      });
    }
  }
  const figure: ServerScenarioFigure["targets"] = {};
  for (const name of names) {
    const r = searchResult(searches[name] as SearchState);
    figure[name] = { maxQps: r.maxQps, failQps: r.failQps, startQps: round((searches[name] as SearchState).options.startQps), ended: r.ended, steps: steps[name] as ServerScenarioStep[] };
  }
  for (const name of hopeless) figure[name] = { maxQps: 0, failQps: null, startQps: 0, ended: "low-load", steps: [] };
  const vsDirect: Record<string, number | null> = {};
  for (const [name, reference] of Object.entries(SERVER_SCENARIO_REFERENCE)) {
    const direct = figure[reference]?.maxQps;
    if (figure[name]) vsDirect[name] = direct ? round(figure[name].maxQps / direct) : null;
  }
  log(`    server scenario: ${names.map((n) => `${n} ${figure[n]?.maxQps}/s`).join(", ")}`);
  return {
    boundMs: s.boundMs,
    stepS: s.stepMs / 1000,
    maxStepS: s.maxStepMs / 1000,
    minQueries: s.minQueries,
    graceS: s.graceMs / 1000,
    maxSteps: s.steps,
    seed: SERVER_SCENARIO_SEED,
    targets: figure,
    reference: SERVER_SCENARIO_REFERENCE,
    vsDirect,
  };
}

export async function runServing(options: ServingOptions): Promise<ServingResult> {
  const { log, quick } = options;
  const small = await smallModel(options.small);
  const rec = recModel();
  log(`serving: small model ${small.model.name} (${small.note}); compute-bound model ${rec.model.name}`);
  // node refuses --cpu-prof in NODE_OPTIONS: a preloaded module runs the inspector's profiler instead.
  const profEnv: Record<string, string> = options.profileDir
    ? { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --import ${join(BENCH_DIR, "lib", "cpu-profiler.mjs")}`.trim(), BENCH_CPU_PROFILE_DIR: options.profileDir }
    : {};
  const stackEnv: Record<string, string> = { ...profEnv, PROFILE_ON_REGISTER: options.profileVariants ? "true" : "false" };

  const children: Child[] = [];
  let stack: Stack | undefined;
  let nc: NatsConnection | undefined;
  const clients: HttpClient[] = [];
  const windows: PhaseWindow[] = [];
  /** The nice value raw onnxruntime's throughput windows ran at (the executor's inference threads' when the process may take it). */
  let rawNice: number | undefined;
  try {
    const t0 = Date.now();
    stack = await startStack({ cpuWorkers: 1, workerThreads: 2, logLevel: "info", env: stackEnv }); // "info": the services announce "ready" at info level
    log(`  stack up in ${((Date.now() - t0) / 1000).toFixed(1)} s (${stack.httpUrl}, ${stack.nats.url})`);
    const pids: Record<string, number> = { "nats-server": stack.nats.process.pid as number, "redis-server": stack.redis.process.pid as number };
    for (const s of stack.services) pids[s.name] = s.process.pid as number;
    const systemPids = { ...pids };
    const rssStart: Record<string, number | null> = Object.fromEntries(Object.entries(pids).map(([n, p]) => [n, rssMb(p)]));

    const registerS: Record<string, number> = {};
    const variants: Record<string, string> = {};
    for (const m of [small, rec]) {
      const t1 = Date.now();
      const r = await registerOverHttp(stack.httpUrl, m.model);
      if (r.status !== 201) throw new Error(`registering ${m.model.name}: HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
      if (options.profileVariants) {
        let last = "";
        await waitForProfiles(stack.httpUrl, m.model.name, "cpu", 400_000, (done, total) => {
          const now = `${done}/${total}`;
          if (now !== last) log(`  ${m.model.name}: ${now} CPU variants profiled (${((Date.now() - t1) / 1000).toFixed(0)} s)`);
          last = now;
        });
      }
      registerS[m.role] = round((Date.now() - t1) / 1000);
      const meta = (await (await fetch(`${stack.httpUrl}/v2/models/${m.model.name}`)).json()) as { parameters?: { variants?: string[] } };
      const names = meta.parameters?.variants ?? [];
      const wanted = variantName(m.model.name, "cpu", "fp32", 8, 1);
      if (!names.includes(wanted)) throw new Error(`${m.model.name} has no variant ${wanted}; it has ${names.join(", ")}`);
      variants[m.role] = wanted;
      log(`  ${m.model.name}: registered${options.profileVariants ? " and profiled" : ""} in ${registerS[m.role]} s; ${names.length} variants; measuring ${wanted}`);
    }
    nc = await connect({ servers: stack.nats.url, name: "bench-client" });
    const system = new HttpClient(stack.httpUrl);
    clients.push(system);

    // Reference servers: one direct server per model, the echo responders.
    const directs: Record<string, HttpClient> = {};
    for (const m of [small, rec]) {
      const child = await startChild(`direct-${m.role}`, "direct-server.ts", { MODEL_PATH: m.model.path, MODEL_NAME: m.model.name, MAX_BATCH: "8", THREADS: "1", ...profEnv });
      children.push(child);
      pids[child.name] = child.pid;
      const client = new HttpClient(`http://127.0.0.1:${String(child.info.port)}`);
      clients.push(client);
      directs[m.role] = client;
    }

    const runners: Record<string, OnnxRunner> = {};
    const queries: Record<string, Query> = {};
    for (const m of [small, rec]) {
      runners[m.role] = await OnnxRunner.load(readFileSync(m.model.path), { intraOpThreads: 1 });
      queries[m.role] = makeQuery(m);
    }

    // First answers (the variants load on demand) and a correctness check against raw.
    const maxDiff: Record<string, number> = {};
    const replyBytes: Record<string, number> = {};
    for (const m of [small, rec]) {
      const q = queries[m.role] as Query;
      const reply = await nc.request(subjects.inferVariant(variants[m.role] as string), q.wire, { timeout: REQUEST_TIMEOUT_MS, headers: (() => { const h = natsHeaders(); h.set(headers.contentType, contentTypes.wire); return h; })() });
      if (reply.headers?.get(headers.error)) throw new Error(`${m.model.name}: NATS query failed: ${new TextDecoder().decode(reply.data).slice(0, 300)}`);
      const got = decodeTensors(reply.data).tensors[0] as Tensor;
      const want = ((await (runners[m.role] as OnnxRunner).runOne(q.tensors))[0] as Tensor).data as Float32Array;
      maxDiff[m.role] = maxRelDiff(got.data as Float32Array, want);
      if (maxDiff[m.role]! > 1e-4) throw new Error(`${m.model.name}: the system's answer differs from onnxruntime's (max relative difference ${maxDiff[m.role]})`);
      replyBytes[m.role] = reply.data.length;
      await waitForFirstAnswer(system, m, q, log);
    }
    // The echo responders (the relay creates the stream the consumer needs, so it starts first).
    for (const [name, env] of [
      ["echo-core", { ROLE: "core" }],
      ["echo-relay", { ROLE: "relay" }],
      ["echo-relay-nt", { ROLE: "relay", IN_SUBJECT: "bench.relay-nt", NO_ASYNC_TRACES: "1" }],
      ["echo-consumer", { ROLE: "consumer" }],
    ] as const) {
      const child = await startChild(name, "echo-server.ts", { NATS_URL: stack.nats.url, ...env, ...profEnv });
      children.push(child);
      pids[child.name] = child.pid;
    }

    await new Promise((r) => setTimeout(r, 2_000));
    const rssIdle: Record<string, number | null> = Object.fromEntries(Object.entries(pids).map(([n, p]) => [n, rssMb(p)]));
    const loadSampler = new RssSampler(pids);

    const figures: Partial<Record<"small" | "rec", ModelFigures>> = {};
    for (const m of [small, rec]) {
      const p = plan(m.role, quick);
      const q = queries[m.role] as Query;
      const runner = runners[m.role] as OnnxRunner;
      const t = new Targets(m, q, system, directs[m.role] as HttpClient, nc, runner, q.wire, variants[m.role] as string, replyBytes[m.role] as number);
      const mark = (phase: string, fn: () => Promise<void>) => async (): Promise<void> => {
        const fromUs = monotonicUs();
        await fn();
        windows.push({ phase: `${m.role}:${phase}`, fromUs, toUs: monotonicUs() });
      };

      // ---- low load: one query at a time, interleaved ----
      const lowTargets: Record<string, Target> = { raw: t.raw, http: t.http, "http-bin": t.httpBinary, nats: t.nats, direct: t.direct_, echo: t.echo, "js-echo": t.jsEcho };
      log(`  ${m.model.name}: low-load latency (${Object.keys(lowTargets).join(", ")}), up to ${p.lowLoad.rounds} rounds`);
      let low: Awaited<ReturnType<typeof interleaved>> | undefined;
      t.reset();
      await mark("low-load", async () => {
        low = await interleaved(lowTargets, p.lowLoad);
      })();
      if (!low) throw new Error("unreachable");
      for (const [name, e] of Object.entries(low.errors)) log(`    ${name}: ${e.count} failed queries; first: ${e.first}`);
      const lowBatched = t.batchSizes.filter((b) => b > 1).length;
      const timing = t.timings.length > 0
        ? { queue: round(summarize(t.timings.map((x) => x.queue)).p50), inference: round(summarize(t.timings.map((x) => x.inference)).p50), total: round(summarize(t.timings.map((x) => x.total)).p50) }
        : null;
      const lat: Record<string, Summary> = {};
      for (const [name, xs] of Object.entries(low.latencies)) lat[name] = summarize(xs);
      const raw = lat.raw as Summary;
      const added: Record<string, { p50: number; p99: number }> = {};
      for (const name of ["http", "http-bin", "nats", "direct"]) {
        const s = lat[name] as Summary;
        added[name] = { p50: round(s.p50 - raw.p50), p99: round(s.p99 - raw.p99) };
      }

      // ---- saturated throughput, in rotations ----
      // The machine is shared, so its speed drifts: every rotation measures raw and every target back
      // to back, ratios are taken within a rotation, and the reported figure is the median.
      const batch8 = Array.from({ length: 8 }, () => q.tensors);
      const loadTargets: Record<string, Target> = { http: t.http, "http-bin": t.httpBinary, nats: t.nats, direct: t.direct_, echo: t.echo, "js-echo": t.jsEcho, "js-echo-nt": t.jsEchoNoTraces };
      const names = Object.keys(loadTargets);
      const rawB1: number[] = [];
      const rawB8: number[] = [];
      const rawB8Ms: number[] = [];
      const qpsBy: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
      const ratioRaw: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
      const ratioDirect: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
      const ratioEcho: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
      const acc: Record<string, { completed: number; errors: number; firstError?: string; latencies: number[]; batches: number[]; cpu: Record<string, number> }> = Object.fromEntries(
        names.map((n) => [n, { completed: 0, errors: 0, latencies: [], batches: [], cpu: {} }]),
      );
      for (let rot = 0; rot < p.rotations; rot++) {
        log(`  ${m.model.name}: throughput rotation ${rot + 1}/${p.rotations}: raw b1, raw b8, ${names.join(", ")} (${p.load.concurrency} clients, ${p.load.durationMs / 1000} s each)`);
        // Raw onnxruntime at the priority of the executor's inference thread (bench/lib/proc.ts atNice).
        await mark("raw-b1", async () => {
          const { result, nice } = await atNice(INFERENCE_NICE, () => backToBack(() => runner.runOne(q.tensors), p.raw));
          rawB1.push(result.callsPerS);
          rawNice = nice;
        })();
        await mark("raw-b8", async () => {
          const { result: r } = await atNice(INFERENCE_NICE, () => backToBack(() => runner.runBatch(batch8), p.raw));
          rawB8.push(r.callsPerS * 8);
          rawB8Ms.push(summarize(r.msPerCall).p50);
        })();
        const thisRot: Record<string, number> = {};
        for (const name of names) {
          const meter = new CpuMeter(pids);
          let fromUs = 0;
          t.reset();
          loadSampler.start();
          // The echoes need no warm-up to speak of, and are fast: shorter windows keep the run short.
          const echo = name.includes("echo");
          const r = await closedLoop(loadTargets[name] as Target, {
            ...p.load,
            durationMs: echo ? Math.min(p.load.durationMs, 4_000) : p.load.durationMs,
            warmupMs: echo ? 500 : rot === 0 ? p.load.warmupMs : Math.min(p.load.warmupMs, 1_000),
            onWindow: (edge) => {
              if (edge === "start") {
                meter.mark();
                fromUs = monotonicUs();
              } else {
                windows.push({ phase: `${m.role}:load-${name}`, fromUs, toUs: monotonicUs() });
              }
            },
          });
          const cpu = meter.delta();
          loadSampler.stop();
          const a = acc[name] as (typeof acc)[string];
          a.completed += r.completed;
          a.errors += r.errors;
          if (r.firstError) a.firstError ??= r.firstError;
          a.latencies.push(...r.latencies);
          a.batches.push(...t.batchSizes);
          for (const [proc, ms] of Object.entries(cpu)) a.cpu[proc] = (a.cpu[proc] ?? 0) + ms;
          thisRot[name] = r.qps;
          (qpsBy[name] as number[]).push(r.qps);
          if (r.errors > 0) log(`    ${name}: ${r.errors} errors, first: ${r.firstError}`);
        }
        for (const name of names) {
          const x = thisRot[name] as number;
          (ratioRaw[name] as number[]).push(x / (rawB8[rawB8.length - 1] as number));
          if (thisRot.direct) (ratioDirect[name] as number[]).push(x / thisRot.direct);
          if (thisRot.echo) (ratioEcho[name] as number[]).push(x / thisRot.echo);
        }
        log(`    raw b8 ${round(rawB8[rawB8.length - 1] as number)}/s; ${names.map((n) => `${n} ${round(thisRot[n] as number)}/s`).join(", ")}`);
      }
      const tp: Record<string, ThroughputFigure> = {};
      for (const name of names) {
        const a = acc[name] as (typeof acc)[string];
        const perQuery: Record<string, number> = {};
        for (const [proc, ms] of Object.entries(a.cpu)) if (ms > 0 && a.completed > 0) perQuery[proc] = round((ms * 1000) / a.completed);
        tp[name] = {
          qps: round(median(qpsBy[name] as number[])),
          qpsPerRotation: (qpsBy[name] as number[]).map((x) => round(x)),
          concurrency: p.load.concurrency,
          durationS: (name.includes("echo") ? Math.min(p.load.durationMs, 4_000) : p.load.durationMs) / 1000,
          errors: a.errors,
          ...(a.firstError ? { firstError: a.firstError } : {}),
          latencyMs: roundSummary(summarize(a.latencies)),
          meanBatch: a.batches.length > 0 ? round(mean(a.batches)) : null,
          cpuUsPerQuery: perQuery,
        };
      }
      const med = (xs: number[] | undefined): number | null => (xs && xs.length > 0 ? round(median(xs)) : null);
      const vsRaw: Record<string, number | null> = {};
      const vsDirect: Record<string, number | null> = {};
      const vsEcho: Record<string, number | null> = {};
      for (const name of ["http", "http-bin", "nats", "direct"]) vsRaw[name] = med(ratioRaw[name]);
      for (const name of ["http", "http-bin", "nats"]) vsDirect[name] = med(ratioDirect[name]);
      if (tp.echo) for (const name of ["http", "http-bin", "nats", "direct", "js-echo", "js-echo-nt"]) vsEcho[name] = med(ratioEcho[name]);

      // ---- server scenario: the highest Poisson rate whose p99 stays within the bound ----
      const all: Record<string, Target> = { ...loadTargets, "direct-bin": t.directBinary };
      const scenarioTargets = Object.fromEntries(SERVER_SCENARIO_TARGETS.map((n) => [n, all[n] as Target]));
      const saturated = { ...Object.fromEntries(Object.entries(tp).map(([n, f]) => [n, f.qps])), "direct-bin": Math.max(tp.direct?.qps ?? 0, tp["http-bin"]?.qps ?? 0) };
      const lowLoadP50 = Object.fromEntries(Object.entries(lat).map(([n, x]) => [n, x.p50]));
      const serverScenario = await measureServerScenario(m.model.name, scenarioTargets, saturated, lowLoadP50, p.serverScenario, (phase, fn) => mark(phase, fn)(), log);

      figures[m.role] = {
        model: m.model.name,
        variant: variants[m.role] as string,
        registerAndProfileS: registerS[m.role] as number,
        servedBy: t.served,
        note: m.note,
        inputShape: m.shape,
        maxRelDiffVsRaw: maxDiff[m.role] as number,
        lowLoad: {
          rounds: low.rounds,
          latencyMs: Object.fromEntries(Object.entries(lat).map(([k, v]) => [k, roundSummary(v)])),
          addedMs: added,
          serverTimingMs: timing,
          batchedAnswers: lowBatched,
          errors: low.errors,
        },
        throughput: {
          rotations: p.rotations,
          rawB1Qps: round(median(rawB1)),
          rawB8Qps: round(median(rawB8)),
          rawB8QpsPerRotation: rawB8.map((x) => round(x)),
          rawB8BatchMs: round(median(rawB8Ms)),
          targets: tp,
          vsRaw,
          vsDirect,
          vsEcho,
        },
        serverScenario,
      };
    }
    let frontends: FrontendScalingFigure | undefined;
    if (options.frontends && options.frontends.length > 0) {
      const q = queries.small as Query;
      const t = (client: HttpClient): Targets =>
        new Targets(small, q, client, directs.small as HttpClient, nc as NatsConnection, runners.small as OnnxRunner, q.wire, variants.small as string, replyBytes.small as number);
      frontends = await measureFrontendScaling({ stack, processes: options.frontends, model: small.model.name, targets: t, systemPids, plan: plan("small", quick).load, rotations: plan("small", quick).rotations, clients, windows, log });
    }
    const rssLoad = loadSampler.stop();
    const rss: ServingResult["rssMb"] = {};
    for (const name of Object.keys(pids)) {
      const r = (x: number | null | undefined): number | null => (x === null || x === undefined ? null : Math.round(x));
      rss[name] = { start: r(rssStart[name]), idle: r(rssIdle[name]), load: r(rssLoad[name]) };
    }
    return {
      models: { small: figures.small as ModelFigures, rec: figures.rec as ModelFigures },
      ...(frontends ? { frontends } : {}),
      rssMb: rss,
      windows,
      pids,
      settings: {
        cpuWorkers: 1,
        workerThreads: 2,
        variantThreads: 1,
        variantMaxBatch: 8,
        batchWaitMs: 0,
        rawIntraOpThreads: 1,
        // Raw onnxruntime's throughput windows and the executor's inference thread: the same priority.
        rawThroughputNice: rawNice ?? null,
        executorInferenceNice: INFERENCE_NICE,
        systemProcesses: Object.keys(systemPids),
        plan: { small: plan("small", quick), rec: plan("rec", quick) },
        cpuProfiled: Boolean(options.profileDir),
        variantsProfiledOnRegister: options.profileVariants,
      },
    };
  } finally {
    for (const c of clients) c.close();
    await nc?.close().catch(() => undefined);
    for (const c of children.reverse()) await c.stop();
    await stack?.stop();
  }
}
