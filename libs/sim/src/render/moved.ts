/**
 * The "figures that moved" section of reports/README.md: when a shared rule changes, the figures it
 * drives move; each move is stated here with its cause. Written by hand: keep it to the last revision
 * that moved figures.
 */
import { markdownTable } from "./table.js";

const ROWS: Array<{ scenario: string; before: string; after: string; why: string }> = [];

/** The section, or nothing when no figure moved. */
export function movedSection(): string[] {
  return ROWS.length === 0 ? [] : ["### Figures that moved in the last revision, and why", "", markdownTable(ROWS), ""];
}
