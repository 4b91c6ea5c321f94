/**
 * The emulated engine's latency model and calibration reader alone (`@sloserve/executor/emulation`),
 * for processes that emulate without being a worker: the local function pool's containers with
 * FUNCTION_BACKEND=emulated (libs/providers function-handler.ts).
 */
export { calibrationFor, drawLatencyMs, entryPoints, latencyModel, linearLatencyModel, queryRows, zeroOutputs, type EmulationCalibration, type LatencyModel } from "./emulated-latency.js";
export { readEmulationCalibration } from "./emulated-backend.js";
