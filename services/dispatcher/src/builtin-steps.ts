import { OCR_STEPS } from "./ocr-steps.js";
import { GENERIC_STEPS, StepRegistry } from "./pipeline-steps.js";

/** The dispatcher's step registry: the generic steps (pipeline-steps.ts) and OCR's (ocr-steps.ts). */
export function builtinSteps(): StepRegistry {
  return new StepRegistry([...GENERIC_STEPS, ...OCR_STEPS]);
}
