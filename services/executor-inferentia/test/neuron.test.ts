import { describe, expect, it } from "vitest";
import { compileOptions, ServeError } from "@sloserve/contracts";
import { decodeOutputs } from "../src/oip-client.js";
import { neuronModelName } from "../src/neuron-backend.js";
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

  it("options - defaults, and bad values named", () => {
    const o = compileOptions(envSchema, {}, "executor-inferentia");
    expect([o.NEURON_SERVER, o.NEURON_MODEL_VERSION, o.NEURON_TIMEOUT_MS, o.NEURON_PROBE_TIMEOUT_MS, o.WORKER_SLOTS, o.ACCELERATORS]).toEqual(["127.0.0.1:8001", "", 30_000, 2_000, 4, 4]);
    expect(() => compileOptions(envSchema, { NEURON_SERVER: "grpc://host", NEURON_MODELS: "a=b,c" }, "executor-inferentia")).toThrow(
      /NEURON_SERVER: use host:port.*NEURON_MODELS: entry "c": use <model>=<name on the server> or <model>:int8=<name on the server>/s,
    );
  });
});
