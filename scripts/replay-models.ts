import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { VariantRecord } from "@sloserve/contracts";
import { createRng, toVariantProfile, type VariantProfile } from "@sloserve/policy";
import { digitsModels, ocrModels, registerOverHttp, waitForProfiles, type BundledModel } from "@sloserve/stack";
import { Network, exportNetwork } from "@sloserve/zoo";

/**
 * What `npm run replay` (scripts/replay.ts) and `npm run calibrate` (scripts/calibrate.ts) register
 * and read back: the apps they register themselves, and the registry's listing of an app's variants
 * turned into the decision code's profiles.
 */

/** The compute-bound MLP of the default app "heavy" (why: docs/ARCHITECTURE.md "Live replay"). */
export function heavyMlp(dir: string): BundledModel {
  const network = new Network([{ type: "flatten" }, { type: "dense", units: 4096 }, { type: "relu" }, { type: "dense", units: 4096 }, { type: "relu" }, { type: "dense", units: 10 }], [1, 28, 28], createRng(7));
  const path = join(dir, "heavy-mlp.onnx");
  writeFileSync(path, exportNetwork(network, "heavy-mlp"));
  return { app: "heavy", name: "heavy-mlp", task: "image-classification", dataset: "none", path };
}

/** Registers an app's models on a stack (their files written under `dir`) and waits for their CPU profiles. */
export async function registerApp(baseUrl: string, app: string, dir: string, say: (line: string) => void): Promise<void> {
  mkdirSync(dir, { recursive: true });
  for (const m of await modelsOf(app, dir)) {
    const r = await registerOverHttp(baseUrl, m);
    if (r.status !== 201) throw new Error(`registering ${m.name}: ${r.status} ${JSON.stringify(r.body)}`);
    say(`registered ${m.app}/${m.name}; profiling...`);
    await waitForProfiles(baseUrl, m.name, "cpu", 300_000);
  }
}

/** The models of an app the scripts register themselves: heavy, digits or an OCR app (ocr-det, ocr-cls, ocr-rec). */
export async function modelsOf(appName: string, dir: string): Promise<BundledModel[]> {
  if (appName === "heavy") return [heavyMlp(dir)];
  if (appName === "digits") return digitsModels();
  const ocr = ocrModels().filter((m) => m.app === appName);
  if (ocr.length > 0) return ocr;
  throw new Error(`--app ${appName}: the scripts register heavy, digits or an OCR app (ocr-det, ocr-cls, ocr-rec) themselves; for another app, start the stack and register it (npm run replay: then pass --base)`);
}

/** `GET /v1/apps/<app>/models`, as the frontend lists it (services/frontend listing.ts). */
export interface Listing {
  models: Array<{ name: string; app: string; inputs: Array<{ name: string; datatype: string; shape: number[] }>; variants: Array<Record<string, unknown>> }>;
}

/** The registry's description of a variant → the decision code's profile (libs/policy toVariantProfile, as the services do); undefined until profiled. */
export function profileOf(model: Listing["models"][number], v: Record<string, unknown>): VariantProfile | undefined {
  const latency = v.latency_ms as Record<string, number> | null;
  const record: VariantRecord = {
    name: String(v.name),
    model: model.name,
    app: model.app,
    hardware: v.hardware as VariantRecord["hardware"],
    maxBatch: Number(v.batch_size),
    batchWaitMs: 0,
    quantization: v.quantization as VariantRecord["quantization"],
    threads: Number(v.threads),
    object: "",
    accuracy: (v.accuracy as number | null) ?? null,
    profiled: v.profiled === true,
    profile: latency
      ? { loadLatencyMs: Number(v.load_latency_ms), latencyMs: latency, peakQps: Number(v.peak_qps), memoryBytes: Number(v.memory_bytes), accuracy: (v.accuracy as number | null) ?? null, sampleShape: {}, worker: String(v.profiled_on), profiledAtMs: 0 }
      : null,
  };
  return toVariantProfile(record);
}
