import { randomInt } from "node:crypto";
import { describeZodError, emulationPartOf } from "@sloserve/contracts";
import { readJsonFile } from "./calibration-file.js";
import { createRng, type Rng } from "@sloserve/policy";
import type { BackendFactory, ModelBackend } from "./backend.js";
import {
  calibrationFor,
  drawLatencyMs,
  emulationCalibrationSchema,
  entryPoints,
  latencyModel,
  linearLatencyModel,
  profilePoints,
  queryRows,
  zeroOutputs,
  type EmulationCalibration,
  type LatencyModel,
} from "./emulated-latency.js";

/**
 * The emulated engine (`BACKEND=emulated`): serves a variant by its latency distribution instead of
 * running the model, so that the live control plane (NATS, dispatchers, autoscalers) can run a fleet
 * of tens of workers, GPU and Inferentia ones included, on a small CPU-only machine. Never for real
 * queries: every answer is zeros of the model's output signature, and says `"backend":"emulated"` in
 * its `served_by`.
 *
 * A batch of b rows waits (a timer: no CPU) a time drawn from the variant's latency at b
 * (emulated-latency.ts): its entry in the calibration file (EMULATED_CALIBRATION), else its profile
 * (median and P99 by batch size), else `fallback` (EMULATED_LATENCY_MS: a variant being profiled for
 * the first time). A load waits the calibration's `loadMs`, else the profile's load latency. Inputs are
 * not checked.
 *
 * The engine says what it draws from (`emulated.quantiles`: the median and P99 at b of whichever of the
 * three it serves; the fallback's P99 is 1.2× its median). The profiler records those as the variant's
 * profile (profiler.ts `measureLatencies`) instead of timing a few draws of them: an emulated variant's
 * profile is its calibration's figures (its peakQps follows from them as from measured ones), not a
 * noisy median of sleeps that would disagree with the calibration the simulator predicts from.
 */

export interface EmulationOptions {
  /** Per-variant or per-model latencies (emulated-latency.ts `emulationCalibrationSchema`); they win over the profile. */
  calibration?: EmulationCalibration;
  /** Latency of a variant with neither calibration nor profile: `batchMs + itemMs·rows`, ms. */
  fallback: { batchMs: number; itemMs: number };
  /** Where the draws come from. @default a generator with a random seed */
  rng?: Rng;
  /** How a latency is waited. @default a timer */
  sleep?: (ms: number) => Promise<void>;
}

const timer = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Reads and checks a calibration file (JSON, emulated-latency.ts `emulationCalibrationSchema`); a bad one throws, naming the file and the problem. */
export function readEmulationCalibration(path: string): EmulationCalibration {
  const parsed = emulationCalibrationSchema.safeParse(emulationPartOf(readJsonFile(path, "emulation calibration")));
  if (!parsed.success) throw new Error(`emulation calibration ${path}: ${describeZodError(parsed.error)}`);
  return parsed.data;
}

/** An emulated engine for a hardware kind: the worker reports that kind whatever the machine has. */
export function emulatedBackend(hardware: "cpu" | "gpu" | "inferentia", options: EmulationOptions): BackendFactory {
  const rng = options.rng ?? createRng(randomInt(2 ** 31));
  const sleep = options.sleep ?? timer;
  return {
    hardware,
    needsOutputs: true,
    async load(_bytes, { model, variant, outputs, profile }): Promise<ModelBackend> {
      const name = variant ?? model;
      if (!outputs) throw new Error(`emulating ${name} needs its model's output signature, and the worker has none (is ${model} still registered?)`);
      const entry = calibrationFor(options.calibration, variant, model, hardware);
      let latency: LatencyModel;
      if (entry) latency = latencyModel(entryPoints(entry));
      else if (profile && Object.keys(profile.latencyMs).length > 0) latency = latencyModel(profilePoints(profile.latencyMs, profile.latencyP99Ms));
      else latency = linearLatencyModel(options.fallback.batchMs, options.fallback.itemMs);
      const loadMs = entry?.loadMs ?? profile?.loadLatencyMs ?? 0;
      if (loadMs > 0) await sleep(loadMs);
      const signature = [...outputs];
      return {
        emulated: { ...(entry?.accuracy !== undefined ? { accuracy: entry.accuracy } : {}), quantiles: (batch) => ({ ...latency(batch) }) },
        async runBatch(queries) {
          let rows = 0;
          for (const q of queries) rows += queryRows(q);
          const ms = drawLatencyMs(latency(rows), rng);
          if (ms > 0) await sleep(ms);
          return queries.map((q) => zeroOutputs(signature, queryRows(q)));
        },
        release: () => Promise.resolve(),
      };
    },
  };
}
