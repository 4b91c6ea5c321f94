import {
  allocate,
  decodeTensors,
  elementCount,
  subjects,
  tensorRows,
  type Clock,
  type ModelProfiledEvent,
  type ModelRecord,
  type ProfileJob,
  type ProfileProgress,
  type Tensor,
  type TensorSpec,
  type VariantProfile,
  type VariantRecord,
} from "@sloserve/contracts";
import type { Bus, Logger } from "@sloserve/bus";
import type { MetadataStore } from "@sloserve/store";
import { DEFAULT_REPEAT, inputClasses, median, needMoreRuns, nextBatchSize, peakQps, quantile, top1Accuracy, type RepeatPolicy } from "@sloserve/policy";
import type { BackendFactory, ModelBackend } from "./backend.js";
import { readCalibrationFile } from "./calibration-file.js";

/**
 * The profiler (INFaaS §3): on a worker of the variant's hardware, measures a model binary's load
 * latency, median and P99 batch latency for batch sizes 1, 2, 4 … 64 (while a batch takes under 2 s;
 * the runs take different rows of the validation set, so the P99 includes the input's effect), the
 * memory it takes, its accuracy on the model's validation set, and for a model with dynamic input
 * dimensions and `sizeClassScales` the same latencies per input size class (libs/policy
 * input-classes.ts); then writes the profile of every
 * variant of the job (they differ only in max batch) to Redis and announces it. Variants whose max
 * batch could not be measured (too slow) are removed. An emulated engine's latencies are not timed but
 * read from the distribution it draws from (backend.ts `emulated.quantiles`); its accuracy is not
 * measured either (its answers are zeros).
 */

export interface ProfileDeps {
  bus: Bus;
  store: MetadataStore;
  backends: BackendFactory;
  worker: string;
  log: Logger;
  clock: Clock;
  /** Called now and then so that the job's message is not redelivered during a long run. */
  keepAlive?: () => void;
  /** Latencies measured once for this host (`PROFILE_CALIBRATION`): they stand for the variants' timings. */
  calibrated?: ProfileCalibration;
}

/**
 * A host's calibration (`npm run calibrate`, libs/contracts calibration.ts) as the profiler reads it:
 * per variant name, the timings the calibration recorded. With it (`PROFILE_CALIBRATION=FILE` on the
 * executors), a variant the calibration measured is recorded with the calibration's batch latencies
 * (median and P99), peak throughput, load latency and memory instead of this run's timings, which on a
 * shared machine vary between two profilings of the same variant by as much as the interference
 * margin (heavy-mlp int8: 12.3 ms and 14.6 ms on the same idle host, an hour apart); the accuracy is
 * still measured. Then every decision reads the same profile as the simulator that predicts the run
 * (`npm run replay`), and a fleet of identical hosts profiles the same. Variants it does not list are
 * profiled as usual.
 */
export interface ProfileCalibration {
  /** Where it came from and when it was measured (for the log). */
  source: string;
  variants: ReadonlyMap<string, Pick<VariantProfile, "latencyMs" | "latencyP99Ms" | "peakQps" | "loadLatencyMs"> & { memoryBytes?: number }>;
}

/** Reads a calibration file for the profiler; throws naming the file and the problem. */
export function readProfileCalibration(path: string): ProfileCalibration {
  const c = readCalibrationFile(path, "profile calibration");
  const variants = new Map<string, Pick<VariantProfile, "latencyMs" | "latencyP99Ms" | "peakQps" | "loadLatencyMs"> & { memoryBytes?: number }>();
  for (const v of c.variants) {
    const batches = c.emulation.variants[v.name]?.batches ?? {};
    const p99 = Object.fromEntries(Object.entries(batches).flatMap(([b, q]) => (q.p99 !== undefined ? [[b, q.p99]] : [])));
    const memoryBytes = v.resources?.memoryBytes;
    variants.set(v.name, { latencyMs: { ...v.latencyMs }, ...(Object.keys(p99).length > 0 ? { latencyP99Ms: p99 } : {}), peakQps: v.peakQps, loadLatencyMs: v.loadLatencyMs, ...(memoryBytes !== undefined ? { memoryBytes } : {}) });
  }
  return { source: `${path} (${c.backend}, ${c.date})`, variants };
}

export interface ValidationSet {
  inputs: Tensor[];
  labels: number[];
}

export function readValidationSet(bytes: Uint8Array): ValidationSet {
  const { tensors } = decodeTensors(bytes);
  const labelsTensor = tensors.find((t) => t.name === "labels");
  const labels = labelsTensor ? Array.from(labelsTensor.data as ArrayLike<number | bigint>, (v) => Number(v)) : [];
  return { inputs: tensors.filter((t) => t.name !== "labels"), labels };
}

/** Distinct batches of validation rows the runs of one batch size cycle through (the latency's dependence on the input). */
const INPUT_VARIETY = 8;

/** A batch of `batch` rows: from the validation set (cycled, from row `offset`) when there is one, else seeded noise. */
function sampleBatch(specs: readonly TensorSpec[], shapes: Record<string, number[]>, validation: ValidationSet | undefined, batch: number, offset = 0): Tensor[] {
  return specs.map((spec) => {
    const v = validation?.inputs.find((t) => t.name === spec.name);
    const trailing = v ? v.shape.slice(1) : (shapes[spec.name] ?? spec.shape.slice(1).map((d) => (d > 0 ? d : 1)));
    const rowSize = elementCount(trailing);
    const data = allocate(spec.datatype, batch * rowSize);
    if (v) {
      const n = v.shape[0] ?? 1;
      for (let r = 0; r < batch; r++) (data as Float32Array).set(tensorRows(v, (offset + r) % n, 1).data as Float32Array, r * rowSize);
    } else if (data instanceof Float32Array || data instanceof Float64Array) {
      let s = 12345;
      for (let i = 0; i < data.length; i++) {
        s = (s * 1103515245 + 12345) & 0x7fffffff;
        data[i] = s / 0x7fffffff;
      }
    }
    return { name: spec.name, datatype: spec.datatype, shape: [batch, ...trailing], data };
  });
}

async function timeRun(backend: ModelBackend, inputs: Tensor[]): Promise<number> {
  const t0 = performance.now();
  await backend.runBatch([inputs]);
  return performance.now() - t0;
}

async function accuracyOf(backend: ModelBackend, model: ModelRecord, validation: ValidationSet, chunk: number): Promise<number | null> {
  const out = model.outputs[0];
  const classes = out?.shape[out.shape.length - 1] ?? -1;
  if (!out || classes <= 0 || validation.labels.length === 0) return null;
  const n = validation.labels.length;
  const scores = new Float32Array(n * classes);
  for (let from = 0; from < n; from += chunk) {
    const count = Math.min(chunk, n - from);
    const [result] = await backend.runBatch([validation.inputs.map((t) => tensorRows(t, from, count))]);
    scores.set(result?.[0]?.data as Float32Array, from * classes);
  }
  return top1Accuracy(scores, classes, validation.labels);
}

/** Repeats per batch size of a size class: fewer than the main profile's (a model has several classes). */
const CLASS_REPEAT: RepeatPolicy = { minRuns: 2, maxRuns: 5, budgetMs: 500 };

/**
 * Median and P99 latency of batches of 1, 2, 4 … `maxBatch` rows (while a batch takes under 2 s) of
 * inputs of `shapes` (or the validation set's rows): each run takes the next rows of the validation set
 * (up to INPUT_VARIETY distinct batches), so the runs' spread includes how the latency depends on the
 * input; without one, seeded noise. Also the peak RSS seen and the shape measured. An emulated engine
 * that says its distribution (`emulated.quantiles`): its median and P99 at each batch size, as they are
 * (the runs would only be draws of it), after one run of the batch (the RSS and the shape as for any
 * engine).
 */
export async function measureLatencies(
  backend: ModelBackend,
  specs: readonly TensorSpec[],
  shapes: Record<string, number[]>,
  validation: ValidationSet | undefined,
  maxBatch: number,
  onStep: (message: string) => void = () => undefined,
  repeat: RepeatPolicy = DEFAULT_REPEAT,
): Promise<{ latencyMs: Record<string, number>; latencyP99Ms: Record<string, number>; sampleShape: Record<string, number[]>; peakRss: number }> {
  const latencyMs: Record<string, number> = {};
  const latencyP99Ms: Record<string, number> = {};
  let peakRss = process.memoryUsage().rss;
  let sampleShape: Record<string, number[]> = {};
  const rowsAvailable = validation?.inputs[0]?.shape[0] ?? 0;
  const quantiles = backend.emulated?.quantiles;
  for (let b: number | undefined = 1; b !== undefined; ) {
    const batches = Array.from({ length: validation ? Math.max(1, Math.min(INPUT_VARIETY, Math.ceil(rowsAvailable / b))) : 1 }, (_, i) => sampleBatch(specs, shapes, validation, b!, i * b!));
    const inputs = batches[0]!;
    sampleShape = Object.fromEntries(inputs.map((t) => [t.name, t.shape.slice(1)]));
    await timeRun(backend, inputs); // warm-up
    if (quantiles) {
      // (an emulated engine's distribution: its figures, not a few draws of it)
      const q = quantiles(b);
      latencyMs[String(b)] = q.p50;
      latencyP99Ms[String(b)] = q.p99;
      peakRss = Math.max(peakRss, process.memoryUsage().rss);
      onStep(`batch ${b}: ${q.p50.toFixed(2)} ms (the emulated engine's median)`);
      b = nextBatchSize(b, q.p50, maxBatch);
      continue;
    }
    const runs: number[] = [];
    while (needMoreRuns(runs, repeat)) runs.push(await timeRun(backend, batches[runs.length % batches.length]!));
    const m = median(runs);
    latencyMs[String(b)] = Math.round(m * 1000) / 1000;
    latencyP99Ms[String(b)] = Math.round(quantile(runs, 0.99) * 1000) / 1000;
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
    onStep(`batch ${b}: ${m.toFixed(2)} ms (median of ${runs.length})`);
    b = nextBatchSize(b, m, maxBatch);
  }
  return { latencyMs, latencyP99Ms, sampleShape, peakRss };
}

export async function runProfile(job: ProfileJob, deps: ProfileDeps): Promise<VariantRecord[]> {
  const { bus, store, backends, worker, log, clock } = deps;
  const model = await store.getModel(job.model);
  if (!model) throw new Error(`model ${job.model} is no longer registered`);
  const variants = (await Promise.all(job.variants.map((v) => store.getVariant(v)))).filter((v): v is VariantRecord => v !== undefined);
  const maxBatch = Math.max(...variants.map((v) => v.maxBatch), 1);
  let step = 0;
  const steps = Math.log2(maxBatch) + 3; // load, batch sizes, accuracy
  const progress = (phase: ProfileProgress["phase"], message: string): void => {
    const event: ProfileProgress = { model: job.model, job: job.id, hardware: job.hardware, phase, step, steps, message, worker, atMs: clock.now() };
    // Progress is for people watching; profiling goes on without it.
    bus.js.publish(subjects.profileProgress(job.model), JSON.stringify(event)).catch((err: unknown) => log.debug({ err, model: job.model, phase }, "profile progress not published"));
    deps.keepAlive?.();
  };
  progress("started", `profiling ${job.variants.length} variants (${job.quantization}, ${job.threads} threads)`);

  const rssBefore = process.memoryUsage().rss;
  const t0 = performance.now();
  const bytes = await bus.models.getBlob(job.object);
  if (!bytes) throw new Error(`binary ${job.object} is missing from the repository`);
  const backend = await backends.load(bytes, { threads: job.threads, model: job.model, quantization: job.quantization, variant: job.variants[0] ?? job.model, ...(job.settings ? { settings: job.settings } : {}), outputs: model.outputs, profile: variants[0]?.profile ?? null });
  const loadLatencyMs = performance.now() - t0;
  step++;
  progress("step", `loaded in ${loadLatencyMs.toFixed(0)} ms`);
  try {
    const validation = model.validationObject ? readValidationSet((await bus.models.getBlob(model.validationObject)) ?? new Uint8Array()) : undefined;
    const base = await measureLatencies(backend, model.inputs, model.profileShape, validation, maxBatch, (m) => {
      step++;
      progress("step", m);
    });
    // Models whose latency depends on the input's size: each size class too (libs/policy input-classes.ts).
    const classes: NonNullable<VariantProfile["inputClasses"]> = [];
    for (const c of inputClasses(model.inputs, model.profileShape, model.sizeClassScales ?? [])) {
      const measured = await measureLatencies(backend, model.inputs, c.shapes, undefined, maxBatch, (m) => progress("step", `${c.name}: ${m}`), CLASS_REPEAT);
      classes.push({ ...c, latencyMs: measured.latencyMs, latencyP99Ms: measured.latencyP99Ms });
      base.peakRss = Math.max(base.peakRss, measured.peakRss);
    }
    const { latencyMs, latencyP99Ms, sampleShape, peakRss } = base;
    // An emulated engine answers zeros: its calibration's accuracy, or the variants' earlier one, stands for a measure.
    const accuracy = backend.emulated
      ? (backend.emulated.accuracy ?? variants.find((v) => v.accuracy !== null)?.accuracy ?? null)
      : validation
        ? await accuracyOf(backend, model, validation, 64)
        : null;
    step = steps;
    const profiledAtMs = clock.now();
    const memoryBytes = Math.max(0, peakRss - rssBefore);
    const updated: VariantRecord[] = [];
    for (const v of variants) {
      const peak = peakQps(latencyMs, v.maxBatch);
      if (peak === undefined) {
        await store.deleteVariant(v.name);
        log.info({ variant: v.name }, "variant removed: its max batch is too slow to be useful");
        continue;
      }
      const measured: VariantProfile = { loadLatencyMs, latencyMs, latencyP99Ms, peakQps: peak, memoryBytes, accuracy, sampleShape, ...(classes.length > 0 ? { inputClasses: classes } : {}), worker, profiledAtMs };
      const calibrated = deps.calibrated?.variants.get(v.name);
      const profile: VariantProfile = calibrated ? { ...measured, ...calibrated, latencyP99Ms: calibrated.latencyP99Ms ?? latencyP99Ms } : measured;
      if (calibrated) log.info({ variant: v.name, calibration: deps.calibrated?.source, measuredMs: latencyMs, calibratedMs: calibrated.latencyMs }, "profile: the calibration's timings");
      const record: VariantRecord = { ...v, accuracy, profiled: true, profile };
      await store.putVariant(record);
      updated.push(record);
    }
    const event: ModelProfiledEvent = { model: job.model, variants: updated, removed: variants.filter((v) => !updated.some((u) => u.name === v.name)).map((v) => v.name) };
    await bus.js.publish(subjects.modelProfiled(job.model), JSON.stringify(event));
    progress("done", `profiled ${updated.length} variants; accuracy ${accuracy === null ? "n/a" : accuracy.toFixed(4)}`);
    return updated;
  } catch (err) {
    progress("failed", (err as Error).message);
    throw err;
  } finally {
    await backend.release();
  }
}
