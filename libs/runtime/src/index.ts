export * from "./onnx.js";
