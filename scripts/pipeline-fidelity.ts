import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { decodeTensors, pipelineSpecSchema, tensorRows, tensorDataToJson, type PipelineInputSpec, type PipelinePlanStatus, type PipelineSpec, type Tensor, type VariantRecord, type WorkerReport } from "@sloserve/contracts";
import { createRng, estimate, planningModel, quantile, type PipelineConfig, type ReplicaChange } from "@sloserve/policy";
import { ScheduledArrivals, arrivalTimes, constantRate } from "@sloserve/sim";
import { digitsCascadeSpec, digitsModels, ocrModels, ocrPipelineSpec, registerOverHttp, registerPipelineOverHttp, startStack, waitForProfiles, type BundledModel, type Stack } from "@sloserve/stack";

/**
 * `npm run pipeline:fidelity -- --pipeline NAME --qps Q --seconds S`: the Estimator's fidelity
 * (InferLine §4.2, Fig. 8) on the live stack. Replays a Gamma trace (rate Q, CV --cv) of S seconds of
 * queries on the running stack (--base, default http://127.0.0.1:8080) over HTTP, and runs the
 * Estimator (libs/policy estimator.ts, the Planner's simulator) on the same arrival times, with:
 * - the live profiles (the variants' batch latencies, median; a second row with the P99 of the
 *   profiler's runs where profiles have it),
 * - the live replica counts, polled every second during the replay from the workers' reports (ready
 *   instances of each stage's model) and given to the Estimator as a replica schedule,
 * - each query's own route (the stages its answer visited) and the measured items per visit.
 * Prints both P99s and writes DIR/fidelity-<pipeline>.json and .md (--out).
 *
 * Inputs: a pipeline whose single input takes a file (content_types: the ocr pipeline) gets generated
 * text images (libs/ocr synthetic, seed --seed); otherwise a bundled model's validation set that carries
 * every input (the digits models'); otherwise --input-file (binary tensor encoding, N rows per input).
 * --start-stack starts a stack first (libs/stack, two CPU workers, as `npm start` does) with the
 * pipeline's bundled models and spec (digits-cascade or ocr), and waits for the plan.
 */

const USAGE = `usage: npm run pipeline:fidelity -- --pipeline NAME [--qps Q] [--seconds S] [--cv CV] [--base URL | --start-stack]
       [--out DIR] [--seed N] [--input-file FILE] [--warmup-seconds W]`;

const { values } = parseArgs({
  options: {
    pipeline: { type: "string" },
    qps: { type: "string", default: "20" },
    seconds: { type: "string", default: "60" },
    cv: { type: "string", default: "1" },
    base: { type: "string", default: "http://127.0.0.1:8080" },
    "start-stack": { type: "boolean", default: false },
    out: { type: "string" },
    seed: { type: "string", default: "1" },
    "input-file": { type: "string" },
    "warmup-seconds": { type: "string", default: "5" },
    help: { type: "boolean", default: false },
  },
});
if (values.help || !values.pipeline) {
  console.error(USAGE);
  process.exit(values.help ? 0 : 2);
}
const name = values.pipeline;
const qps = Number(values.qps);
const seconds = Number(values.seconds);
const cv = Number(values.cv);
const seed = Number(values.seed);
if (!(qps > 0) || !(seconds > 0) || !(cv >= 0)) {
  console.error(`--qps and --seconds must be positive and --cv at least 0\n${USAGE}`);
  process.exit(2);
}

async function getJson<T>(base: string, path: string): Promise<T> {
  const r = await fetch(`${base}${path}`);
  if (!r.ok) throw new Error(`GET ${path}: ${r.status} ${await r.text()}`);
  return (await r.json()) as T;
}

/** Starts a stack with the pipeline's bundled models and spec; waits for the profiles and the plan. */
async function ownStack(): Promise<Stack> {
  const spec = name === "ocr" ? ocrPipelineSpec() : name === "digits-cascade" ? digitsCascadeSpec({ planning: { rate_qps: qps, cv } }) : undefined;
  if (!spec) throw new Error(`--start-stack knows the bundled pipelines only (digits-cascade, ocr), not ${name}`);
  const wanted = new Set(spec.stages.map((s) => s.model).filter((m): m is string => m !== undefined));
  const models = [...(name === "ocr" ? ocrModels() : await digitsModels())].filter((m) => wanted.has(m.name));
  console.error(`starting a stack (2 CPU workers) and registering ${[...wanted].join(", ")} …`);
  const stack = await startStack({ cpuWorkers: 2, workerThreads: 4, env: { VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "1,8", VARIANT_CPU_THREADS: "1" } });
  for (const m of models) {
    const r = await registerOverHttp(stack.httpUrl, m);
    if (r.status !== 201) throw new Error(`registering ${m.name}: ${r.status} ${JSON.stringify(r.body)}`);
  }
  for (const m of models) await waitForProfiles(stack.httpUrl, m.name, "cpu", 600_000);
  const r = await registerPipelineOverHttp(stack.httpUrl, spec);
  if (r.status !== 201) throw new Error(`registering ${name}: ${r.status} ${JSON.stringify(r.body)}`);
  const deadline = Date.now() + 120_000;
  for (;;) {
    const shown = await getJson<{ plan: PipelinePlanStatus | null }>(stack.httpUrl, `/v1/pipelines/${name}`);
    if (shown.plan?.state === "planned") break;
    if (shown.plan?.state === "infeasible" || Date.now() > deadline) throw new Error(`no plan for ${name}: ${shown.plan?.reason ?? "none within 120 s"}`);
    await new Promise((res) => setTimeout(res, 500));
  }
  console.error(`stack up at ${stack.httpUrl}; logs in ${stack.logPath}`);
  return stack;
}

type Body = { json: unknown } | { bytes: Uint8Array; contentType: string };

/** One request body per row: generated images, a bundled validation set, or --input-file. */
async function inputs(spec: PipelineSpec, signature: PipelineInputSpec[]): Promise<Body[]> {
  const asJson = (tensors: Tensor[]): Body => ({ json: { inputs: tensors.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape, data: tensorDataToJson(t) })) } });
  const rowsOf = (tensors: Tensor[]): Body[] => {
    const n = Math.min(...signature.map((s) => tensors.find((t) => t.name === s.name)?.shape[0] ?? 0));
    if (!(n > 0)) throw new Error(`the input tensors do not carry every pipeline input (${signature.map((s) => s.name).join(", ")})`);
    return Array.from({ length: Math.min(n, 1000) }, (_, i) => asJson(signature.map((s) => tensorRows(tensors.find((t) => t.name === s.name)!, i, 1))));
  };
  if (values["input-file"]) return rowsOf(decodeTensors(readFileSync(resolve(values["input-file"]))).tensors);
  const only = signature.length === 1 ? signature[0] : undefined;
  if (only?.content_types && only.content_types.length > 0) {
    const { syntheticSet } = await import("@sloserve/ocr/synthetic");
    const images = await syntheticSet(seed, 60);
    return images.filter((i) => only.content_types!.includes(i.contentType)).map((i) => ({ bytes: i.bytes, contentType: i.contentType }));
  }
  const models = new Set(spec.stages.map((s) => s.model));
  const bundled: BundledModel[] = [...ocrModels(), ...(await digitsModels())];
  for (const m of bundled) {
    if (!models.has(m.name) || !m.validation) continue;
    const tensors = decodeTensors(m.validation).tensors;
    if (signature.every((s) => tensors.some((t) => t.name === s.name))) return rowsOf(tensors);
  }
  throw new Error(`no input source for pipeline ${spec.name}: pass --input-file (binary tensor encoding with N rows of ${signature.map((s) => s.name).join(", ")})`);
}

interface Answer {
  visits?: Record<string, number>;
  timing_ms?: { total: number };
  missed_slo?: boolean;
}

interface Sent {
  offsetMs: number;
  clientMs: number;
  serverMs: number | undefined;
  visits: Record<string, number>;
  error: string | undefined;
}

async function send(base: string, body: Body): Promise<{ answer?: Answer; error?: string }> {
  const init: RequestInit = "json" in body
    ? { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body.json) }
    : { method: "POST", headers: { "content-type": body.contentType }, body: body.bytes };
  try {
    const r = await fetch(`${base}/v1/pipelines/${name}/infer`, init);
    const answer = (await r.json()) as Answer & { code?: string; error?: string };
    return r.ok ? { answer } : { error: `${r.status} ${answer.code ?? ""}: ${answer.error ?? ""}` };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

/** Ready instances per model over the live workers. */
function readyByModel(workers: WorkerReport[], variants: ReadonlyMap<string, VariantRecord>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const w of workers) {
    for (const v of w.variants) {
      const rec = variants.get(v.variant);
      if (!rec || v.state === "loading" || v.state === "unloading") continue;
      out[rec.model] = (out[rec.model] ?? 0) + v.instances;
    }
  }
  return out;
}

const p99 = (xs: number[]): number => (xs.length > 0 ? quantile(xs, 0.99) : NaN);
const r1 = (x: number): number => Math.round(x * 10) / 10;

async function main(): Promise<void> {
  const stack = values["start-stack"] ? await ownStack() : undefined;
  const base = stack?.httpUrl ?? values.base;
  try {
    const shown = await getJson<{ spec: unknown; inputs: PipelineInputSpec[]; plan: PipelinePlanStatus | null }>(base, `/v1/pipelines/${name}`);
    const spec = pipelineSpecSchema.parse(shown.spec);
    const bodies = await inputs(spec, shown.inputs);
    const times = arrivalTimes(new ScheduledArrivals(constantRate(qps, seconds), cv), createRng(seed));
    console.error(`${name}: ${times.length} queries at ${qps} qps (CV ${cv}) over ${seconds} s; SLO ${spec.slo.p99_ms} ms; plan: ${shown.plan ? `${shown.plan.state}, ${Object.entries(shown.plan.stages).map(([s, p]) => `${s} ${p.replicas}×${p.variant}`).join(", ")}` : "none"}`);

    // Warm-up, evenly at the trace's rate (a burst would be traffic the Tuner reacts to): the first queries
    // of a cold stack load variants and warm the runtimes; they are not part of the trace.
    const warmup = Number(values["warmup-seconds"]);
    const warmupStart = Date.now();
    const warming: Array<Promise<void>> = [];
    for (let i = 0; i < warmup * qps; i++) {
      const wait = warmupStart + (i * 1000) / qps - Date.now();
      if (wait > 0) await new Promise((res) => setTimeout(res, wait));
      warming.push(send(base, bodies[i % bodies.length]!).then((r) => void (r.error && console.error(`warm-up query failed: ${r.error}`))));
    }
    await Promise.all(warming);

    // The replay, open loop, with the live replica counts polled every second.
    const status0 = await getJson<{ variants: VariantRecord[]; workers: WorkerReport[] }>(base, "/v1/status");
    const variants = new Map(status0.variants.map((v) => [v.name, v]));
    const polls: Array<{ offsetMs: number; ready: Record<string, number> }> = [];
    const t0 = Date.now() + 200;
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const offsetMs = Date.now() - t0;
        try {
          const s = await getJson<{ workers: WorkerReport[] }>(base, "/v1/status");
          polls.push({ offsetMs, ready: readyByModel(s.workers, variants) });
        } catch (err) {
          console.error(`status poll failed: ${(err as Error).message}`);
        }
        await new Promise((res) => setTimeout(res, 1000));
      }
    })();
    const sent: Sent[] = [];
    const pending: Array<Promise<void>> = [];
    for (let i = 0; i < times.length; i++) {
      const wait = t0 + times[i]! - Date.now();
      if (wait > 0) await new Promise((res) => setTimeout(res, wait));
      const started = Date.now();
      pending.push(send(base, bodies[i % bodies.length]!).then((r) => {
        sent[i] = { offsetMs: times[i]!, clientMs: Date.now() - started, serverMs: r.answer?.timing_ms?.total, visits: r.answer?.visits ?? {}, error: r.error };
      }));
    }
    await Promise.all(pending);
    polling = false;
    await poller;

    // The Estimator on the same arrivals, routes and items, with the live profiles and replica counts.
    const status = await getJson<{ variants: VariantRecord[] }>(base, "/v1/status");
    const byModel = new Map<string, VariantRecord[]>();
    for (const v of status.variants) byModel.set(v.model, [...(byModel.get(v.model) ?? []), v]);
    const ok = sent.filter((q) => q.error === undefined);
    const counts = { queries: ok.length, visits: {} as Record<string, number>, items: {} as Record<string, number> };
    for (const q of ok) {
      for (const [s, n] of Object.entries(q.visits)) {
        if (n <= 0) continue;
        counts.visits[s] = (counts.visits[s] ?? 0) + 1;
        counts.items[s] = (counts.items[s] ?? 0) + n;
      }
    }
    const planned = (await getJson<{ plan: PipelinePlanStatus | null }>(base, `/v1/pipelines/${name}`)).plan;
    const rows: Array<Record<string, string | number>> = [];
    for (const latency of ["median", "p99"] as const) {
      const model = planningModel(spec, (m) => byModel.get(m) ?? [], counts, { latency, minQueriesForShares: 1 });
      if (model.problems.length > 0) throw new Error(model.problems.join("; "));
      // Each stage at its planned variant (hardware and max batch), else its model's most common one.
      const config: Record<string, PipelineConfig[string]> = {};
      for (const stage of model.pipeline.models) {
        const chosen = planned?.stages[stage];
        const options = model.variantOf[stage] ?? {};
        let hardware = chosen?.hardware;
        let maxBatch = chosen?.maxBatch;
        if (!hardware || !options[hardware]?.[maxBatch ?? -1]) {
          hardware = Object.keys(options)[0]!;
          maxBatch = Math.max(...Object.keys(options[hardware] ?? {}).map(Number));
        }
        config[stage] = { hardware, maxBatch: maxBatch!, replicas: Math.max(1, polls[0]?.ready[model.modelOf[stage]!] ?? 1) };
      }
      const schedule: ReplicaChange[] = [];
      for (const p of polls.slice(1)) {
        for (const stage of model.pipeline.models) {
          const n = Math.max(1, p.ready[model.modelOf[stage]!] ?? 1);
          const last = [...schedule].reverse().find((c) => c.model === stage)?.replicas ?? config[stage]!.replicas;
          if (n !== last) schedule.push({ atMs: Math.max(0, p.offsetMs), model: stage, replicas: n });
        }
      }
      // Each query's own route: bit j of its mask is the j-th conditional edge, taken when its target ran.
      const conditional = model.pipeline.edges.filter((e) => (e.probability ?? 1) < 1);
      const routes = Uint32Array.from(ok, (q) => conditional.reduce((mask, e, j) => ((q.visits[e.to] ?? 0) > 0 ? mask | (1 << j) : mask), 0));
      const arrivals = Float64Array.from(ok, (q) => q.offsetMs);
      const est = estimate({ pipeline: model.pipeline, profiles: model.profiles, config, arrivalsMs: arrivals, routes, replicaSchedule: schedule.sort((a, b) => a.atMs - b.atMs) });
      rows.push({
        "profile latency": latency,
        "estimated P99 ms": r1(est.p99Ms),
        "estimated mean ms": r1(est.meanMs),
        config: model.pipeline.models.map((m) => `${m} ${config[m]!.replicas}×${config[m]!.hardware} b${config[m]!.maxBatch}`).join(", "),
        "replica changes": schedule.length,
        "scale factors": Object.entries(model.scaleFactor).filter(([s]) => model.modelOf[s]).map(([s, v]) => `${s} ${v.toFixed(3)}`).join(", "),
      });
    }
    const server = ok.map((q) => q.serverMs).filter((x): x is number => x !== undefined);
    const client = ok.map((q) => q.clientMs);
    const result = {
      pipeline: name, qps, seconds, cv, seed, sloMs: spec.slo.p99_ms, queries: sent.length, failed: sent.length - ok.length,
      measured: { p99Ms: r1(p99(server)), p50Ms: r1(quantile(server, 0.5)), meanMs: r1(server.reduce((a, b) => a + b, 0) / Math.max(1, server.length)), clientP99Ms: r1(p99(client)), sloAttainment: server.filter((x) => x <= spec.slo.p99_ms).length / Math.max(1, server.length) },
      estimated: rows, plan: planned, replicaPolls: polls,
      /** The profiles the Estimator used: per model, each fp32 variant's median and P99 batch latencies. */
      profiles: Object.fromEntries([...new Set(spec.stages.map((st) => st.model).filter((m): m is string => m !== undefined))].map((m) => [
        m, Object.fromEntries((byModel.get(m) ?? []).filter((v) => v.profile && v.quantization === "fp32").map((v) => [v.name, { median: v.profile!.latencyMs, p99: v.profile!.latencyP99Ms ?? null }])),
      ])),
    };
    const table = [
      `| ${name}, ${qps} qps CV ${cv}, ${seconds} s (${ok.length} queries) | P99 ms | mean ms |`,
      "|---|---|---|",
      `| measured (dispatcher: arrival at the frontend → answer) | ${result.measured.p99Ms} | ${result.measured.meanMs} |`,
      `| measured by the client (HTTP round trip) | ${result.measured.clientP99Ms} | ${r1(client.reduce((a, b) => a + b, 0) / Math.max(1, client.length))} |`,
      ...rows.map((r) => `| Estimator, ${r["profile latency"]} batch latencies (${r.config}; ${r["replica changes"]} replica changes) | ${r["estimated P99 ms"]} | ${r["estimated mean ms"]} |`),
    ].join("\n");
    console.log(table);
    console.log(`scale factors measured: ${String(rows[0]?.["scale factors"])}; failed queries: ${result.failed}`);
    if (values.out) {
      const dir = resolve(values.out);
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, `fidelity-${name}.json`), JSON.stringify(result, null, 2));
      writeFileSync(join(dir, `fidelity-${name}.md`), `${table}\n`);
      console.error(`wrote ${join(dir, `fidelity-${name}.json`)} and .md`);
    }
  } finally {
    await stack?.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
