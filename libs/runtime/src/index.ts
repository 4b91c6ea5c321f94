export * from "./onnx.js";
export * from "./batch.js";
