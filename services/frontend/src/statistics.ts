import type { InferenceCounts } from "@sloserve/contracts";

/**
 * What this frontend process counted of the queries it served, per name the caller gave (a model, or
 * an app for a model-less query): Triton's statistics extension (libs/contracts triton.ts says what
 * each count means there). In memory only: each frontend counts its own queries from its start, a
 * restart begins at zero, and with several frontends each answers with its own; a frontend of several
 * processes (FRONTEND_PROCESSES, processes.ts) answers with the sum of its live processes' counts
 * ({@link InferenceStatistics.view}), so a process that died takes its counts with it. Durations are
 * summed in a double: exact to the nanosecond up to 2^53 ns (104 days of summed query time), then rounded.
 *
 * The query path pays a map lookup and a few additions per query: the counters of a name are one
 * object, made at its first query and kept.
 */
export class ModelCounters implements InferenceCounts {
  successCount = 0;
  successNs = 0;
  failCount = 0;
  failNs = 0;
  queueNs = 0;
  computeInputNs = 0;
  computeInferNs = 0;
  computeOutputNs = 0;
  inferenceCount = 0;
  lastInferenceMs = 0;

  /**
   * One query answered: its whole time at the frontend, the frontend's time before sending it
   * (resolve, check, encode) and after the answer came (decode), the executor's queue and batch wait
   * and its run (from the answer's timing_ms), all ms; `rows` inferences; answered at `atMs` (epoch).
   */
  success(totalMs: number, inputMs: number, queueMs: number, inferMs: number, outputMs: number, rows: number, atMs: number): void {
    this.successCount++;
    this.successNs += Math.round(totalMs * 1e6);
    this.computeInputNs += Math.round(inputMs * 1e6);
    this.queueNs += Math.round(queueMs * 1e6);
    this.computeInferNs += Math.round(inferMs * 1e6);
    this.computeOutputNs += Math.round(outputMs * 1e6);
    this.inferenceCount += rows;
    this.lastInferenceMs = atMs;
  }

  /** One query failed after its model was found (bad input, no capacity, deadline…), after `totalMs`. */
  failure(totalMs: number): void {
    this.failCount++;
    this.failNs += Math.round(totalMs * 1e6);
  }
}

/** What a statistics request reads: the counts of each name queried. */
export interface CountsView {
  get(name: string): Readonly<InferenceCounts> | undefined;
  names(): string[];
}

export class InferenceStatistics implements CountsView {
  private readonly byName = new Map<string, ModelCounters>();

  /**
   * @param gather with several frontend processes: every live process's {@link snapshot}, this one's
   *   included (processes.ts); absent, a statistics request reads this process's counts.
   */
  constructor(private readonly gather?: () => Promise<Array<Record<string, InferenceCounts>>>) {}

  /** The counters of a name, made at its first query. */
  of(name: string): ModelCounters {
    let c = this.byName.get(name);
    if (c === undefined) {
      c = new ModelCounters();
      this.byName.set(name, c);
    }
    return c;
  }

  /** The counters of a name, or undefined before its first query. */
  get(name: string): Readonly<ModelCounters> | undefined {
    return this.byName.get(name);
  }

  /** The names queried so far. */
  names(): string[] {
    return [...this.byName.keys()];
  }

  /** This process's counts as plain records, by name (what it sends to the process that sums them). */
  snapshot(): Record<string, InferenceCounts> {
    const out: Record<string, InferenceCounts> = {};
    for (const [name, c] of this.byName) out[name] = { ...c };
    return out;
  }

  /** The counts a statistics request answers with: this process's, or with several processes all of theirs summed. */
  async view(): Promise<CountsView> {
    return this.gather ? sumCounts(await this.gather()) : this;
  }
}

/** Several processes' counts as one: every count and duration summed, the last inference the latest. */
export function sumCounts(parts: ReadonlyArray<Record<string, InferenceCounts>>): CountsView {
  const byName = new Map<string, InferenceCounts>();
  for (const part of parts) {
    for (const [name, c] of Object.entries(part)) {
      const sum = byName.get(name);
      if (sum === undefined) {
        byName.set(name, { ...c });
        continue;
      }
      sum.successCount += c.successCount;
      sum.successNs += c.successNs;
      sum.failCount += c.failCount;
      sum.failNs += c.failNs;
      sum.queueNs += c.queueNs;
      sum.computeInputNs += c.computeInputNs;
      sum.computeInferNs += c.computeInferNs;
      sum.computeOutputNs += c.computeOutputNs;
      sum.inferenceCount += c.inferenceCount;
      sum.lastInferenceMs = Math.max(sum.lastInferenceMs, c.lastInferenceMs);
    }
  }
  return { get: (name) => byName.get(name), names: () => [...byName.keys()] };
}

/** Counts of a name never queried. */
export const NO_COUNTS: Readonly<InferenceCounts> = Object.freeze(new ModelCounters());
