import type { Clock } from "@sloserve/contracts";

/** The wall clock, for service processes (tests pass a ManualClock from @sloserve/contracts). */
export const systemClock: Clock = { now: () => Date.now() };
