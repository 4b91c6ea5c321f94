import { scaleCommandSchema, subjects, type Hardware, type ModelRecord, type ScaleCommand, type VariantRecord, type WorkerReport } from "@sloserve/contracts";
import type { Bus } from "@sloserve/bus";
import { footprintOf, heldResources } from "@sloserve/policy";

/**
 * Test pieces for the model autoscaler's shell: registry records for made-up variants, and a test worker
 * that obeys the `scale.model.<worker>` commands the controller publishes (an added instance is ready
 * after its variant's load latency, on the test's clock) and reports on `metrics.worker.<worker>` what
 * it runs, as the executor's worker does (loading instances hold their resources, counted by libs/policy
 * `heldResources`: GPU instances their device memory, Inferentia instances their NeuronCores).
 */

export function modelRecord(name: string, app: string): ModelRecord {
  return {
    name,
    app,
    task: "image-classification",
    dataset: "test",
    platform: "onnxruntime_onnx",
    inputs: [{ name: "x", datatype: "FP32", shape: [-1, 4] }],
    outputs: [{ name: "y", datatype: "FP32", shape: [-1, 2] }],
    object: `model/${name}.onnx`,
    sizeBytes: 1,
    sha256: "0",
    registeredAtMs: 0,
    validationObject: null,
    validationCount: 0,
    profileShape: {},
  };
}

export interface VariantSpec {
  name: string;
  model: string;
  app: string;
  hardware?: Hardware;
  maxBatch?: number;
  threads?: number;
  /** Batch latency by batch size, ms. */
  latencyMs: Record<number, number>;
  peakQps: number;
  loadLatencyMs: number;
  memoryBytes?: number;
  /** GPU variants: device memory one instance takes (its footprint). @default memoryBytes */
  acceleratorMemoryBytes?: number;
}

export function variantRecord(s: VariantSpec): VariantRecord {
  return {
    name: s.name,
    model: s.model,
    app: s.app,
    hardware: s.hardware ?? "cpu",
    maxBatch: s.maxBatch ?? 1,
    batchWaitMs: 0,
    quantization: "fp32",
    threads: s.threads ?? 1,
    object: `model/${s.model}.onnx`,
    accuracy: 0.9,
    profiled: true,
    profile: {
      loadLatencyMs: s.loadLatencyMs,
      latencyMs: Object.fromEntries(Object.entries(s.latencyMs).map(([b, ms]) => [String(b), ms])),
      peakQps: s.peakQps,
      memoryBytes: s.memoryBytes ?? 1e8,
      ...(s.acceleratorMemoryBytes !== undefined ? { acceleratorMemoryBytes: s.acceleratorMemoryBytes } : {}),
      accuracy: 0.9,
      sampleShape: { x: [4] },
      worker: "profiler",
      profiledAtMs: 0,
    },
  };
}

export interface TestWorkerOptions {
  name: string;
  hardware?: Hardware;
  threads?: number;
  memoryBytes?: number;
  accelerators?: number;
  /** GPU workers: memory of each GPU, bytes. @default 16e9 */
  acceleratorMemoryBytes?: number;
  /** Variants whose ready instances it reports Interfered (as the executor's state machine would). @default none */
  interfered?: readonly string[];
  /** Busy fraction of its threads it reports (on its first variant). @default 0 */
  busy?: number;
}

export class TestWorker {
  /** Instances with the time they are (or were) ready. */
  readonly instances: Array<{ variant: VariantRecord; readyAtMs: number }> = [];
  /** Commands as received. */
  readonly received: ScaleCommand[] = [];
  private sub: ReturnType<Bus["nc"]["subscribe"]> | undefined;

  constructor(
    readonly options: TestWorkerOptions,
    private readonly variants: ReadonlyMap<string, VariantRecord>,
  ) {}

  get name(): string {
    return this.options.name;
  }

  /** Instances of a variant ready from the start. */
  preload(variant: string, count: number, atMs: number): this {
    const v = this.variants.get(variant);
    if (!v) throw new Error(`unknown variant ${variant}`);
    for (let i = 0; i < count; i++) this.instances.push({ variant: v, readyAtMs: atMs });
    return this;
  }

  /** Obeys the commands published for this worker (applied at the time they carry). */
  listen(bus: Bus): this {
    this.sub = bus.nc.subscribe(subjects.scaleModel(this.name), { callback: (_err, msg) => this.apply(scaleCommandSchema.parse(msg.json())) });
    return this;
  }

  stop(): void {
    this.sub?.unsubscribe();
  }

  apply(command: ScaleCommand): void {
    this.received.push(command);
    const v = this.variants.get(command.variant);
    if (!v) return;
    const mine = this.instances.filter((i) => i.variant.name === v.name);
    if (command.action === "unload") {
      // The executor unloads loaded instances, the newest first (the oldest first with `oldest`).
      const ready = mine.filter((i) => i.readyAtMs <= command.atMs).sort((a, b) => (command.oldest ? a.readyAtMs - b.readyAtMs : b.readyAtMs - a.readyAtMs));
      for (const i of ready.slice(0, command.count ?? ready.length)) this.instances.splice(this.instances.indexOf(i), 1);
      return;
    }
    if (command.action === "load" && mine.length > 0) return;
    const n = command.action === "load" ? 1 : (command.count ?? 1);
    for (let k = 0; k < n; k++) this.instances.push({ variant: v, readyAtMs: command.atMs + (v.profile?.loadLatencyMs ?? 0) });
  }

  /** Ready and loading instances of each variant at `nowMs`. */
  runs(nowMs: number): Map<string, { ready: number; loading: number }> {
    const out = new Map<string, { ready: number; loading: number }>();
    for (const i of this.instances) {
      const e = out.get(i.variant.name) ?? { ready: 0, loading: 0 };
      if (i.readyAtMs <= nowMs) e.ready++;
      else e.loading++;
      out.set(i.variant.name, e);
    }
    return out;
  }

  /**
   * The one-second report at `nowMs`. `arrivals`: per model, the queries of the last second; they go to
   * the model's first variant with a ready instance here (the autoscaler reads a model's total).
   */
  report(nowMs: number, arrivals: Readonly<Record<string, number>> = {}): WorkerReport {
    const runs = this.runs(nowMs);
    const left = new Map(Object.entries(arrivals));
    const variants = [...runs].map(([name, e], index) => {
      const v = this.variants.get(name) as VariantRecord;
      const a = e.ready > 0 ? (left.get(v.model) ?? 0) : 0;
      if (e.ready > 0) left.delete(v.model);
      return {
        variant: name,
        state: e.ready > 0 ? (this.options.interfered?.includes(name) ? ("interfered" as const) : ("active" as const)) : ("loading" as const),
        instances: e.ready,
        loading: e.loading,
        sloMisses: 0,
        batchP50Ms: 0,
        batchSizeP50: 0,
        arrivals: a,
        served: a,
        errors: 0,
        batches: 0,
        queueLength: 0,
        latencyP50Ms: 0,
        latencyP99Ms: 0,
        utilisation: index === 0 ? (this.options.busy ?? 0) * (this.options.threads ?? 4) : 0,
      };
    });
    // What the instances hold, by the rule the executor's worker reports with.
    const held = heldResources(this.instances.map((i) => ({ footprint: footprintOf(i.variant), count: 1 })));
    const hardware = this.options.hardware ?? "cpu";
    return {
      worker: this.name,
      hardware,
      atMs: nowMs,
      startedAtMs: 0,
      threads: this.options.threads ?? 4,
      threadsUsed: held.threads,
      memoryBytes: this.options.memoryBytes ?? 8e9,
      memoryUsedBytes: held.memoryBytes,
      accelerators: this.options.accelerators ?? 0,
      acceleratorsUsed: held.accelerators,
      ...(hardware === "gpu" ? { acceleratorMemoryBytes: this.options.acceleratorMemoryBytes ?? 16e9, acceleratorMemoryUsedBytes: held.acceleratorMemoryBytes } : {}),
      rssBytes: 1e8,
      variants,
    };
  }

  async publishReport(bus: Bus, nowMs: number, arrivals: Readonly<Record<string, number>> = {}): Promise<void> {
    await bus.js.publish(subjects.workerMetrics(this.name), JSON.stringify(this.report(nowMs, arrivals)));
  }
}
