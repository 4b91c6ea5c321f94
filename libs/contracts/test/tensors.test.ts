import { describe, expect, it } from "vitest";
import { checkInputs, tensorFromJsonData, tensorDataToJson, checkName, ServeError, type TensorSpec } from "../src/index.js";

const signature: TensorSpec[] = [{ name: "input", datatype: "FP32", shape: [-1, 1, 28, 28] }];

function codeOf(fn: () => unknown): [string, string] {
  try {
    fn();
  } catch (err) {
    if (err instanceof ServeError) return [err.code, err.message];
    throw err;
  }
  throw new Error("did not throw");
}

describe("tensors", () => {
  it.each([
    ["unknown input", [{ name: "img", datatype: "FP32", shape: [1, 1, 28, 28], length: 784 }], "unknown_input", "the model has no input named 'img'; its inputs are: input"],
    ["wrong datatype", [{ name: "input", datatype: "INT32", shape: [1, 1, 28, 28], length: 784 }], "invalid_datatype", "input 'input' has datatype INT32; the model expects FP32"],
    ["wrong rank", [{ name: "input", datatype: "FP32", shape: [1, 784], length: 784 }], "invalid_shape", "input 'input' has shape [1, 784]; the model expects [-1, 1, 28, 28] (-1 = any size)"],
    ["wrong fixed dim", [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 27], length: 756 }], "invalid_shape", "input 'input' has shape [1, 1, 28, 27]; the model expects [-1, 1, 28, 28] (-1 = any size)"],
    ["zero batch", [{ name: "input", datatype: "FP32", shape: [0, 1, 28, 28], length: 0 }], "invalid_shape", "input 'input' has shape [0, 1, 28, 28]; the model expects [-1, 1, 28, 28] (-1 = any size)"],
    ["data length", [{ name: "input", datatype: "FP32", shape: [2, 1, 28, 28], length: 784 }], "invalid_data_length", "input 'input' has 784 elements but its shape [2, 1, 28, 28] needs 1568"],
    ["missing", [], "missing_input", "missing input 'input' (FP32 [-1, 1, 28, 28])"],
  ])("tensors - checkInputs refuses %s", (_case, inputs, code, message) => {
    expect(codeOf(() => checkInputs(inputs, signature))).toEqual([code, message]);
  });

  it("tensors - checkInputs accepts any size on a dynamic dimension", () => {
    expect(() => checkInputs([{ name: "input", datatype: "FP32", shape: [3, 1, 28, 28], length: 3 * 784 }], signature)).not.toThrow();
  });

  it("tensors - converts flat and nested JSON data and checks each element", () => {
    const flat = tensorFromJsonData("x", "FP32", [2, 2], [1, 2, 3, 4]);
    const nested = tensorFromJsonData("x", "FP32", [2, 2], [[1, 2], [3, 4]]);
    expect(Array.from(flat.data as Float32Array)).toEqual([1, 2, 3, 4]);
    expect(Array.from(nested.data as Float32Array)).toEqual([1, 2, 3, 4]);
    expect(tensorDataToJson(tensorFromJsonData("b", "BOOL", [2], [true, 0]))).toEqual([true, false]);
    expect(tensorDataToJson(tensorFromJsonData("i", "INT64", [2], [5, -7]))).toEqual([5, -7]);
    expect(codeOf(() => tensorFromJsonData("x", "FP32", [2], [1, "a"]))).toEqual(["invalid_data", `input 'x' element 1 ("a") is not a valid FP32 value`]);
    expect(codeOf(() => tensorFromJsonData("x", "UINT8", [1], [256]))).toEqual(["invalid_data", "input 'x' element 0 (256) is not a valid UINT8 value"]);
    expect(codeOf(() => tensorFromJsonData("x", "INT32", [1], [1.5]))).toEqual(["invalid_data", "input 'x' element 0 (1.5) is not a valid INT32 value"]);
    expect(codeOf(() => tensorFromJsonData("x", "FP32", [3], [1, 2]))).toEqual(["invalid_data_length", "input 'x' has 2 elements but its shape [3] needs 3"]);
  });

  it.each(["../etc", "a/b", "a.b", "", "-lead", "x".repeat(65), "a b", "%2e%2e"])("names - refuses %j", (name) => {
    expect(codeOf(() => checkName("model", name))[0]).toBe("invalid_name");
  });

  it("names - accepts letters, digits, '_' and '-'", () => {
    expect(checkName("model", "digits-mlp_2")).toBe("digits-mlp_2");
  });
});
