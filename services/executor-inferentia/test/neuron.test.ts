import { describe, expect, it } from "vitest";
import { compileOptions, ServeError } from "@sloserve/contracts";
import { decodeOutputs, OipClient } from "../src/oip-client.js";
import { neuronBackend, neuronModelName } from "../src/neuron-backend.js";
import { envSchema } from "../src/options.js";

const none = { bool_contents: [], int_contents: [], int64_contents: [], uint_contents: [], uint64_contents: [], fp32_contents: [], fp64_contents: [] };

describe("executor-inferentia", () => {
  it("outputs - raw contents become typed views; typed contents (a server that sends them) are read too", () => {
    const raw = Buffer.from(new Float32Array([0.25, -1.5, 3, 4]).buffer);
    const [a] = decodeOutputs({ outputs: [{ name: "y", datatype: "FP32", shape: ["2", "2"], contents: null }], raw_output_contents: [raw] });
    expect(a).toEqual({ name: "y", datatype: "FP32", shape: [2, 2], data: new Float32Array([0.25, -1.5, 3, 4]) });
    const typed = decodeOutputs({
      outputs: [
        { name: "i", datatype: "INT64", shape: ["2"], contents: { ...none, int64_contents: ["9007199254740993", "-2"] } },
        { name: "b", datatype: "BOOL", shape: ["1", "3"], contents: { ...none, bool_contents: [true, false, true] } },
        { name: "u", datatype: "UINT8", shape: ["2"], contents: { ...none, uint_contents: [7, 255] } },
      ],
      raw_output_contents: [],
    });
    expect(typed.map((t) => [t.name, t.shape, Array.from(t.data as ArrayLike<number | bigint>)])).toEqual([
      ["i", [2], [9007199254740993n, -2n]],
      ["b", [1, 3], [1, 0, 1]],
      ["u", [2], [7, 255]],
    ]);
  });

  it("outputs - sizes that do not add up are refused, naming the output", () => {
    const short = () => decodeOutputs({ outputs: [{ name: "y", datatype: "FP32", shape: ["2", "2"], contents: null }], raw_output_contents: [Buffer.alloc(12)] }, "the Neuron server at h:1");
    expect(short).toThrow(ServeError);
    expect(short).toThrow("the Neuron server at h:1 answered output 'y' (FP32 [2, 2]) with 12 bytes, not 16");
    expect(() => decodeOutputs({ outputs: [{ name: "y", datatype: "FP32", shape: ["3"], contents: { ...none, fp32_contents: [1] } }], raw_output_contents: [] })).toThrow(
      "the OIP server: output 'y' (FP32) came with 1 elements in its contents, not 3",
    );
    expect(() => decodeOutputs({ outputs: [{ name: "s", datatype: "BYTES", shape: ["1"], contents: null }], raw_output_contents: [Buffer.alloc(5)] })).toThrow("answered output 's' with datatype BYTES");
  });

  it("models - the server's name for each variant: mapped, else the model's own (fp32); int8 only when mapped", () => {
    const { NEURON_MODELS: models } = compileOptions(envSchema, { NEURON_MODELS: "ocr-cls=ocr_cls_neuron, digits:int8=digits-int8-neuron" }, "executor-inferentia");
    expect(models).toEqual({ "ocr-cls": "ocr_cls_neuron", "digits:int8": "digits-int8-neuron" });
    expect(neuronModelName(models, "ocr-cls", "fp32")).toBe("ocr_cls_neuron");
    expect(neuronModelName(models, "digits", "fp32")).toBe("digits");
    expect(neuronModelName(models, "digits", "int8")).toBe("digits-int8-neuron");
    expect(neuronModelName(models, "ocr-cls", "int8")).toBeUndefined();
  });

  it("models - variants compiled for several NeuronCores have their own server model (settings.neuronCores)", () => {
    const { NEURON_MODELS: models } = compileOptions(envSchema, { NEURON_MODELS: "ocr-cls=ocr_cls_neuron,ocr-cls:nc4=ocr_cls_4c,digits:int8:nc2=digits_q_2c" }, "executor-inferentia");
    expect(models).toEqual({ "ocr-cls": "ocr_cls_neuron", "ocr-cls:nc4": "ocr_cls_4c", "digits:int8:nc2": "digits_q_2c" });
    expect(neuronModelName(models, "ocr-cls", "fp32", 4)).toBe("ocr_cls_4c");
    expect(neuronModelName(models, "digits", "int8", 2)).toBe("digits_q_2c");
    expect(neuronModelName(models, "digits", "fp32", 2)).toBeUndefined();
  });

  it("models - a variant compiled for more NeuronCores than the worker offers, or for a count the server has no model of, is refused before any call", async () => {
    const client = new OipClient("127.0.0.1:9", { label: "the Neuron server at 127.0.0.1:9" });
    try {
      const backend = neuronBackend({ client, models: { "ocr-cls:nc4": "ocr_cls_4c" }, neuronCores: 2, version: "", timeoutMs: 1000, probeTimeoutMs: 1000 });
      await expect(backend.load(new Uint8Array(), { threads: 1, model: "ocr-cls", quantization: "fp32", settings: { neuronCores: 4 } })).rejects.toThrow("ocr-cls (fp32) is compiled for 4 NeuronCores; this worker offers 2 (ACCELERATORS)");
      await expect(backend.load(new Uint8Array(), { threads: 1, model: "ocr-cls", quantization: "fp32", settings: { neuronCores: 2 } })).rejects.toThrow(
        "no Neuron model for the fp32 2-NeuronCore variants of ocr-cls: compile one for 2 NeuronCores (neuronx-cc --neuroncore-pipeline-cores 2) and name it in NEURON_MODELS (ocr-cls:nc2=<name on the server>)",
      );
    } finally {
      client.close();
    }
  });

  it("options - defaults, and bad values named", () => {
    const o = compileOptions(envSchema, {}, "executor-inferentia");
    expect([o.NEURON_SERVER, o.NEURON_MODEL_VERSION, o.NEURON_TIMEOUT_MS, o.NEURON_PROBE_TIMEOUT_MS, o.WORKER_SLOTS, o.ACCELERATORS]).toEqual(["127.0.0.1:8001", "", 30_000, 2_000, 4, 4]);
    expect(() => compileOptions(envSchema, { NEURON_SERVER: "grpc://host", NEURON_MODELS: "a=b,c" }, "executor-inferentia")).toThrow(
      /NEURON_SERVER: use host:port.*NEURON_MODELS: entry "c": use <model>=<name on the server>, <model>:int8=<name on the server> or <model>\[:int8\]:nc<NeuronCores>=<name on the server>/s,
    );
  });
});
