/**
 * The "figures that moved" section of reports/README.md: when a shared rule changes, the figures it
 * drives move; each move is stated here with its cause. Written by hand: keep it to the last revision
 * that moved figures.
 */
import { markdownTable } from "./table.js";

const ROWS: Array<{ scenario: string; before: string; after: string; why: string }> = [
  {
    scenario: "replay",
    before: "sim: $0.6528 (8 launches), 100% within the SLO",
    after: "$0.6664 (the same 8 launches, one held one 2 s tick longer: 2 s × 144 of a c5.xlarge = $0.0136), 100%",
    why: "The replay's simulated workers offer memory (`workerMemoryBytes`: the live workers' reported memory in `npm run replay`, unlimited here) and take the model autoscaler's commanded loads as the CPU executor does (memory checked, threads shared during a swap). A machine without a memory figure fitted no instance of a variant whose profile names its memory, so every placement or upgrade on a worker was escalated or abandoned; in the 11-28 18:34 live replay (day 2) live upgraded int8 → fp32 on its worker and launched twice, the simulator could not and launched nine times. No other scenario's figures moved.",
  },
];

export function movedSection(): string[] {
  return ["## Figures that moved in the last revision, and why", "", markdownTable(ROWS), ""];
}
