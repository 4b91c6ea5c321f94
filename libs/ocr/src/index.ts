/**
 * The OCR pipeline's stages (PaddleOCR PP-OCRv4: detect → classify direction → recognise), each a
 * plain function of images and tensors, and `runOcrLocally`, which chains them in-process.
 */
export * from "./image.js";
export * from "./geometry.js";
export * from "./det.js";
export * from "./crop.js";
export * from "./cls.js";
export * from "./rec.js";
export * from "./result.js";
export * from "./accuracy.js";
export * from "./local.js";
