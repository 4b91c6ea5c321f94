import { describe, expect, it } from "vitest";
import { generateVariants, gpuSessionPlan, neuronModelFor, profileGroups, tensorrtEnvironment, type GpuOffer } from "../../src/index.js";

describe("variant generation per hardware", () => {
  const input = { model: "m", app: "a", batchable: true, objects: { fp32: "model/m.onnx", int8: "model/m-int8.onnx" } };

  it("variant-generator - GPU: CUDA for each binary, TensorRT at each precision from the fp32 binary; Inferentia: per NeuronCore count", () => {
    const out = generateVariants(input, { hardware: ["gpu", "inferentia"], batchSizes: [1, 8], tensorrtPrecisions: ["fp16", "int8"], neuronCores: [1, 4] });
    expect(out.map((v) => `${v.name} ${v.object} ${JSON.stringify(v.settings ?? null)}`)).toEqual([
      "m--gpu-fp32-b1-t1 model/m.onnx null",
      "m--gpu-fp32-b8-t1 model/m.onnx null",
      'm--gpu-trtfp16-b1-t1 model/m.onnx {"tensorrt":{"precision":"fp16"}}',
      'm--gpu-trtfp16-b8-t1 model/m.onnx {"tensorrt":{"precision":"fp16"}}',
      'm--gpu-trtint8-b1-t1 model/m.onnx {"tensorrt":{"precision":"int8"}}',
      'm--gpu-trtint8-b8-t1 model/m.onnx {"tensorrt":{"precision":"int8"}}',
      "m--gpu-int8-b1-t1 model/m-int8.onnx null",
      "m--gpu-int8-b8-t1 model/m-int8.onnx null",
      'm--inferentia-fp32-b1-t1 model/m.onnx {"neuronCores":1}',
      'm--inferentia-fp32-b8-t1 model/m.onnx {"neuronCores":1}',
      'm--inferentia-fp32-nc4-b1-t1 model/m.onnx {"neuronCores":4}',
      'm--inferentia-fp32-nc4-b8-t1 model/m.onnx {"neuronCores":4}',
      'm--inferentia-int8-b1-t1 model/m-int8.onnx {"neuronCores":1}',
      'm--inferentia-int8-b8-t1 model/m-int8.onnx {"neuronCores":1}',
      'm--inferentia-int8-nc4-b1-t1 model/m-int8.onnx {"neuronCores":4}',
      'm--inferentia-int8-nc4-b8-t1 model/m-int8.onnx {"neuronCores":4}',
    ]);
  });

  it("variant-generator - defaults: TensorRT fp16 beside CUDA, one NeuronCore; CPU variants carry no settings", () => {
    const out = generateVariants({ ...input, batchable: false, objects: { fp32: "model/m.onnx" } });
    expect(out.map((v) => `${v.name} ${JSON.stringify(v.settings ?? null)}`)).toEqual([
      "m--cpu-fp32-b1-t1 null",
      "m--cpu-fp32-b1-t2 null",
      "m--gpu-fp32-b1-t1 null",
      'm--gpu-trtfp16-b1-t1 {"tensorrt":{"precision":"fp16"}}',
      'm--inferentia-fp32-b1-t1 {"neuronCores":1}',
    ]);
    expect(generateVariants(input, { hardware: ["gpu"], batchSizes: [1], tensorrtPrecisions: [] }).map((v) => v.name)).toEqual(["m--gpu-fp32-b1-t1", "m--gpu-int8-b1-t1"]);
  });

  it("variant-generator - one profiling run per binary, hardware, threads and settings", () => {
    const out = generateVariants(input, { hardware: ["gpu", "inferentia"], batchSizes: [1, 8], tensorrtPrecisions: ["fp16"], neuronCores: [1, 4] });
    expect(profileGroups(out).map((g) => `${g.hardware} ${g.quantization} ${JSON.stringify(g.settings ?? null)}: ${g.variants.length}`)).toEqual([
      "gpu fp32 null: 2",
      'gpu fp32 {"tensorrt":{"precision":"fp16"}}: 2',
      "gpu int8 null: 2",
      'inferentia fp32 {"neuronCores":1}: 2',
      'inferentia fp32 {"neuronCores":4}: 2',
      'inferentia int8 {"neuronCores":1}: 2',
      'inferentia int8 {"neuronCores":4}: 2',
    ]);
  });
});

describe("hardware settings on the worker", () => {
  const fp16: GpuOffer = { deviceId: 1, tensorrt: { precision: "fp16" } };
  const noTrt: GpuOffer = { deviceId: 0, tensorrt: { unavailable: "libonnxruntime_providers_tensorrt.so is missing" } };
  const cases: Array<{ name: string; variant: { name: string; settings?: { tensorrt?: { precision: "fp32" | "fp16" | "int8" } } }; offer: GpuOffer; want: ReturnType<typeof gpuSessionPlan> }> = [
    {
      name: "a CUDA variant opens on the worker's device, CPU fallback",
      variant: { name: "v-cuda" },
      offer: fp16,
      want: { ok: true, executionProviders: [{ name: "cuda", deviceId: 1 }, "cpu"], reason: "v-cuda: CUDA on device 1" },
    },
    {
      name: "a TensorRT variant at the worker's precision opens on TensorRT first",
      variant: { name: "v-trt", settings: { tensorrt: { precision: "fp16" } } },
      offer: fp16,
      want: { ok: true, executionProviders: [{ name: "tensorrt", deviceId: 1 }, { name: "cuda", deviceId: 1 }, "cpu"], reason: "v-trt: TensorRT at fp16 on device 1" },
    },
    {
      name: "a TensorRT variant at another precision is refused, naming the setting",
      variant: { name: "v-int8", settings: { tensorrt: { precision: "int8" } } },
      offer: fp16,
      want: { ok: false, reason: "v-int8 needs TensorRT engines at int8; this GPU worker builds them at fp16 (onnxruntime-node sets the precision per process: run a GPU worker with TENSORRT_PRECISION=int8)" },
    },
    {
      name: "a TensorRT variant where there is no TensorRT is refused with the reason",
      variant: { name: "v-trt", settings: { tensorrt: { precision: "fp16" } } },
      offer: noTrt,
      want: { ok: false, reason: "v-trt needs onnxruntime's TensorRT execution provider (fp16), which this GPU worker lacks: libonnxruntime_providers_tensorrt.so is missing" },
    },
    {
      name: "a CUDA variant where there is no TensorRT is served",
      variant: { name: "v-cuda" },
      offer: noTrt,
      want: { ok: true, executionProviders: [{ name: "cuda", deviceId: 0 }, "cpu"], reason: "v-cuda: CUDA on device 0" },
    },
  ];
  for (const c of cases) it(`hardware-settings - GPU: ${c.name}`, () => expect(gpuSessionPlan(c.variant, c.offer)).toEqual(c.want));

  it("hardware-settings - TensorRT's precision goes through the provider's environment", () => {
    expect(tensorrtEnvironment("fp16")).toEqual({ ORT_TENSORRT_FP16_ENABLE: "1", ORT_TENSORRT_INT8_ENABLE: "0", ORT_TENSORRT_ENGINE_CACHE_ENABLE: "1" });
    expect(tensorrtEnvironment("int8")).toEqual({ ORT_TENSORRT_FP16_ENABLE: "0", ORT_TENSORRT_INT8_ENABLE: "1", ORT_TENSORRT_ENGINE_CACHE_ENABLE: "1" });
    expect(tensorrtEnvironment("fp32")).toMatchObject({ ORT_TENSORRT_FP16_ENABLE: "0", ORT_TENSORRT_INT8_ENABLE: "0" });
  });

  const models = { "ocr-cls": "ocr_cls_neuron", "ocr-cls:nc4": "ocr_cls_neuron_4c", "digits:int8": "digits_q", "digits:int8:nc2": "digits_q_2c" };
  const neuron: Array<{ name: string; v: Parameters<typeof neuronModelFor>[0]; cores: number; want: ReturnType<typeof neuronModelFor> }> = [
    { name: "one NeuronCore: the mapped name", v: { model: "ocr-cls", quantization: "fp32" }, cores: 4, want: { ok: true, serverModel: "ocr_cls_neuron", neuronCores: 1 } },
    { name: "one NeuronCore, not mapped: the model's own name", v: { model: "digits", quantization: "fp32", settings: { neuronCores: 1 } }, cores: 4, want: { ok: true, serverModel: "digits", neuronCores: 1 } },
    { name: "four NeuronCores: the model compiled for four", v: { model: "ocr-cls", quantization: "fp32", settings: { neuronCores: 4 } }, cores: 4, want: { ok: true, serverModel: "ocr_cls_neuron_4c", neuronCores: 4 } },
    { name: "int8 on two NeuronCores", v: { model: "digits", quantization: "int8", settings: { neuronCores: 2 } }, cores: 4, want: { ok: true, serverModel: "digits_q_2c", neuronCores: 2 } },
    {
      name: "more NeuronCores than the worker offers: refused",
      v: { model: "ocr-cls", quantization: "fp32", settings: { neuronCores: 4 } },
      cores: 2,
      want: { ok: false, reason: "ocr-cls (fp32) is compiled for 4 NeuronCores; this worker offers 2 (ACCELERATORS)" },
    },
    {
      name: "no model compiled for the core count: refused, saying how to make one",
      v: { model: "digits", quantization: "fp32", settings: { neuronCores: 2 } },
      cores: 4,
      want: { ok: false, reason: "no Neuron model for the fp32 2-NeuronCore variants of digits: compile one for 2 NeuronCores (neuronx-cc --neuroncore-pipeline-cores 2) and name it in NEURON_MODELS (digits:nc2=<name on the server>)" },
    },
    {
      name: "int8 without a mapping: refused",
      v: { model: "ocr-cls", quantization: "int8" },
      cores: 4,
      want: { ok: false, reason: "no Neuron model for the int8 variants of ocr-cls: compile one from the int8 binary and name it in NEURON_MODELS (ocr-cls:int8=<name on the server>)" },
    },
  ];
  for (const c of neuron) it(`hardware-settings - Inferentia: ${c.name}`, () => expect(neuronModelFor(c.v, models, c.cores)).toEqual(c.want));
});
