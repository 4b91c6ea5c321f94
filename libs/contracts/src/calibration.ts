/**
 * The calibration file (`npm run calibrate`): what the simulator knows of this machine and these
 * variants, measured before and apart from any run it predicts, and what emulated executors serve
 * (`EMULATED_CALIBRATION`: the file's `emulation` part, or a file of that part alone).
 */
import { z } from "zod";

const quantilesSchema = z
  .object({ p50: z.number().nonnegative(), p99: z.number().nonnegative().optional() })
  .strict()
  .refine((q) => q.p99 === undefined || q.p99 >= q.p50, { message: "p99 must be ≥ p50" });

/** One variant's (or one model's on one hardware) calibration. */
export const calibrationEntrySchema = z
  .object({
    /** Batch size (rows) → median and P99 of one batch, ms. */
    batches: z
      .record(z.string(), quantilesSchema)
      .refine((b) => Object.keys(b).length > 0, { message: "at least one batch size" })
      .refine((b) => Object.keys(b).every((k) => /^[1-9][0-9]*$/.test(k)), { message: "batch sizes are positive integers" }),
    /** Time a load takes, ms; absent: the variant's profiled load latency, else none. */
    loadMs: z.number().nonnegative().optional(),
    /** The accuracy the profiler records for the variant (answers are zeros: nothing to measure); absent: its earlier accuracy, else none. */
    accuracy: z.number().min(0).max(1).optional(),
  })
  .strict();
export type CalibrationEntry = z.infer<typeof calibrationEntrySchema>;

/**
 * The calibration file (EMULATED_CALIBRATION), JSON: per variant name, or per model and hardware kind,
 * batch size → `{ "p50": ms, "p99": ms }` (p99 optional), with an optional `loadMs` and `accuracy`.
 * A variant's own entry wins over its model's on its hardware; either overrides the variant's profile.
 *
 * ```json
 * { "variants": { "digits-tiny--gpu-fp32-b8-t1": { "batches": { "1": { "p50": 0.9, "p99": 1.6 }, "8": { "p50": 1.4, "p99": 2.5 } } } },
 *   "models": { "ocr-rec": { "inferentia": { "batches": { "1": { "p50": 6, "p99": 9 } }, "loadMs": 4000, "accuracy": 0.92 } } } }
 * ```
 */
export const emulationCalibrationSchema = z
  .object({
    variants: z.record(z.string(), calibrationEntrySchema).default({}),
    models: z.record(z.string(), z.object({ cpu: calibrationEntrySchema, gpu: calibrationEntrySchema, inferentia: calibrationEntrySchema }).partial().strict()).default({}),
  })
  .strict();
export type EmulationCalibration = z.infer<typeof emulationCalibrationSchema>;


/** An emulated engine's latency without calibration (EMULATED_LATENCY_MS): `<ms per batch>+<ms per row>` (or `<ms per batch>`) → `{ batchMs, itemMs }`. */
export const linearLatencySchema = z
  .string()
  .default("5+1")
  .transform((s, ctx) => {
    const m = /^\s*(\d+(?:\.\d+)?)\s*(?:\+\s*(\d+(?:\.\d+)?)\s*)?$/.exec(s);
    if (!m) {
      ctx.addIssue({ code: "custom", message: `${JSON.stringify(s)}: use <ms per batch>+<ms per row>, e.g. 5+1` });
      return z.NEVER;
    }
    return { batchMs: Number(m[1]), itemMs: Number(m[2] ?? 0) };
  });

/** Batch time over the profile on a host, at a demand and with processes booting (one sweep point). */
export const contentionPointSchema = z
  .object({
    /** Σ over the host's workers of their busy share at their profiled batch times (CPU-seconds of inference asked per second). */
    demand: z.number().nonnegative(),
    /** Worker processes starting on the host meanwhile. */
    booting: z.number().int().nonnegative(),
    /** Observed over profiled busy time (mean batch time over the profile). */
    slowdown: z.number().positive(),
    /** The median batch over its profile (what the variant-state rule and the overflow estimate read). */
    p50Ratio: z.number().positive(),
    /** Worker reports behind the point. */
    samples: z.number().int().nonnegative(),
    /**
     * Worker processes serving on the host (those whose reports make the point); absent: not said. At
     * the same demand, more processes than cores run slower (each one's busy time counts the others'
     * turns on the cores).
     */
    workers: z.number().int().positive().optional(),
    /** The variant the workers ran (the sweep runs one alone on every worker); absent: not said. */
    variant: z.string().optional(),
  })
  .strict();
export type ContentionPoint = z.infer<typeof contentionPointSchema>;

/** A profiled variant as the registry lists it (libs/policy `VariantProfile`'s fields the simulator reads). */
export const calibratedVariantSchema = z
  .object({
    name: z.string(),
    model: z.string(),
    app: z.string(),
    hardware: z.enum(["cpu", "gpu", "inferentia"]),
    batchSize: z.number().int().positive(),
    accuracy: z.number().min(0).max(1),
    /** Batch size → median batch time, ms. */
    latencyMs: z.record(z.string(), z.number().nonnegative()),
    peakQps: z.number().nonnegative(),
    loadLatencyMs: z.number().nonnegative(),
    pricePerS: z.number().nonnegative(),
    profiled: z.boolean(),
    /** What an instance takes of a worker (threads, memoryBytes, accelerators, acceleratorMemoryBytes). */
    resources: z.record(z.string(), z.number().nonnegative()).optional(),
    concurrency: z.number().int().positive().optional(),
  })
  .strict();
export type CalibratedVariant = z.infer<typeof calibratedVariantSchema>;

export const calibrationSchema = z
  .object({
    version: z.literal(1),
    /** When and how it was measured. */
    date: z.string(),
    command: z.string(),
    host: z.object({ cores: z.number().int().positive(), memoryBytes: z.number().nonnegative(), loadAverage: z.array(z.number()) }).strict(),
    /** The workers measured: their own engines, or emulated ones. */
    backend: z.enum(["native", "emulated"]),
    app: z.string(),
    /** The app's variants as profiled during the calibration. */
    variants: z.array(calibratedVariantSchema).min(1),
    /** Batch-time distributions, in the emulated executors' format. */
    emulation: emulationCalibrationSchema,
    /** Batch time against the host's load: a sweep over demand, with and without a worker booting. */
    contention: z.array(contentionPointSchema).min(1),
    /** Launch request to first report of a launched worker, ms, one per launch measured. */
    bootMs: z.array(z.number().nonnegative()).min(1),
    /**
     * Launch request to first report of workers launched together (`together` launches at once, this
     * one included), ms, one per launch; absent in files from before it was measured.
     */
    groupBoots: z.array(z.object({ together: z.number().int().min(2), ms: z.number().nonnegative() }).strict()).optional(),
    /** Function invocations: cold ones' durations and warm ones', ms. */
    functions: z
      .object({
        coldStartMs: z.array(z.number().nonnegative()),
        warmMs: z.array(z.number().nonnegative()),
        /** The variant the functions ran (their answers' `served_by.variant`, the most common); absent in older files. */
        variant: z.string().optional(),
      })
      .strict(),
    /** Worker reports: their period and its spread, ms. */
    reports: z.object({ periodMs: z.number().positive(), jitterMs: z.number().nonnegative() }).strict(),
    /** The memory a worker offers its variants (its reports' `memoryBytes`). */
    workerMemoryBytes: z.number().nonnegative(),
  })
  .strict();
export type Calibration = z.infer<typeof calibrationSchema>;

/** The emulation part of a calibration file, or a file that is that part alone. */
export function emulationPartOf(json: unknown): unknown {
  return json !== null && typeof json === "object" && "emulation" in json && "version" in json ? (json as { emulation: unknown }).emulation : json;
}
