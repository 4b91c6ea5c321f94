import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { onnxBackend } from "@sloserve/executor";
import { probeExecutionProvider } from "@sloserve/runtime";
import { ocrModels } from "@sloserve/stack";

/**
 * executor-gpu's backend with its hardware settings (libs/policy hardware-settings.ts), on this
 * machine's real onnxruntime-node: TensorRT is probed as executor-gpu probes it at start, and a
 * TensorRT variant is refused with the probe's reason before any session opens. A worker that has
 * TensorRT passes the provider to the session: here onnxruntime itself then refuses it.
 */
const model = ocrModels().find((m) => m.name === "ocr-cls");
if (!model) throw new Error("the bundled ocr-cls model is missing");
const bytes = readFileSync(model.path);
const load = { threads: 1, model: "ocr-cls", quantization: "fp32" as const };

describe("executor-gpu - hardware settings", () => {
  it("executor-gpu - a TensorRT variant where onnxruntime has no TensorRT provider is refused, saying why", async () => {
    const probe = await probeExecutionProvider("tensorrt", { deviceId: 0 });
    if (probe.ok) return; // a machine with TensorRT: nothing to refuse (the plans are tested in libs/policy)
    expect(probe.error).toMatch(/tensorrt|TensorRT|TENSORRT/);
    const backend = onnxBackend("gpu", ["cuda", "cpu"], { gpu: { deviceId: 0, tensorrt: { unavailable: probe.error } } });
    await expect(backend.load(bytes, { ...load, variant: "ocr-cls--gpu-trtfp16-b1-t1", settings: { tensorrt: { precision: "fp16" } } })).rejects.toThrow(
      `ocr-cls--gpu-trtfp16-b1-t1 needs onnxruntime's TensorRT execution provider (fp16), which this GPU worker lacks: ${probe.error}`,
    );
  });

  it("executor-gpu - a TensorRT variant of another precision than the worker builds is refused", async () => {
    const backend = onnxBackend("gpu", ["cuda", "cpu"], { gpu: { deviceId: 0, tensorrt: { precision: "fp16" } } });
    await expect(backend.load(bytes, { ...load, variant: "ocr-cls--gpu-trtint8-b1-t1", settings: { tensorrt: { precision: "int8" } } })).rejects.toThrow(
      "ocr-cls--gpu-trtint8-b1-t1 needs TensorRT engines at int8; this GPU worker builds them at fp16",
    );
  });

  it("executor-gpu - a backend without a GPU offer refuses TensorRT variants", async () => {
    const backend = onnxBackend("gpu", ["cpu"]);
    await expect(backend.load(bytes, { ...load, variant: "v", settings: { tensorrt: { precision: "fp16" } } })).rejects.toThrow("v needs onnxruntime's TensorRT execution provider (fp16); this worker runs cpu only");
  });
});
