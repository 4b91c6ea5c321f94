import { readFileSync } from "node:fs";
import { calibrationSchema, describeZodError, type Calibration } from "@sloserve/contracts";

/** A JSON file's content; throws naming `what`, the file and the problem (missing, not JSON). */
export function readJsonFile(path: string, what: string): unknown {
  try {
    return JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new Error(`${what} ${path}: ${(err as Error).message}`);
  }
}

/** A calibration file (`npm run calibrate`, libs/contracts `calibrationSchema`); throws naming `what`, the file and the problem. */
export function readCalibrationFile(path: string, what = "calibration"): Calibration {
  const parsed = calibrationSchema.safeParse(readJsonFile(path, what));
  if (!parsed.success) throw new Error(`${what} ${path}: ${describeZodError(parsed.error)}`);
  return parsed.data;
}
