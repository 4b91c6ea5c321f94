import { z } from "zod";

/** The profiler's settings, the same for every executor (libs/executor profiler.ts). */
export const profilingSettings = {
  PROFILE_CALIBRATION: z.string().optional().meta({
    description:
      "A calibration file of this host (`npm run calibrate -- --out FILE`): the profiler records its batch latencies, peak throughput, load latency and memory for the variants it lists instead of timing them again (accuracy is still measured), so that every decision and the simulator's prediction read one profile; `npm run replay --calibration` sets it.",
    defaultText: "none (every variant timed at registration)",
  }),
};
