/**
 * @sloserve/onnx — ONNX models as bytes, without an ML framework: a minimal protocol-buffers
 * wire-format reader/writer, an ONNX ModelProto encoder and decoder, and the weight-only int8
 * quantiser used by the variant generator (the registrar) and the zoo's tests. Pure: bytes in, bytes
 * out; no file system, no runtime.
 */
export { ProtoWriter, readFields, readVarint, fieldInt, fieldInts, fieldBytes, fieldString } from "./protobuf.js";
export type { ProtoField, WireType } from "./protobuf.js";
export { OnnxDataType, encodeModel, encodeGraph, encodeNode, encodeTensor, encodeValueInfo, tensorBytes } from "./onnx-writer.js";
export type { OnnxModel, OnnxGraph, OnnxNode, OnnxInitializer, OnnxAttribute, OnnxValueInfo, OnnxDataTypeCode } from "./onnx-writer.js";
export { decodeModel, decodeGraph, decodeNode, decodeTensor, readGraphOutputs } from "./onnx-reader.js";
export type { DecodedModel, DecodedGraph, DecodedNode, DecodedTensor, DecodedAttribute, DecodedValueInfo } from "./onnx-reader.js";
export { quantizeDynamicInt8, quantizeWeightsInt8 } from "./quantize.js";
export type { QuantizeOptions, QuantizeResult, QuantizedWeight } from "./quantize.js";
