import type { InferenceCounts } from "@sloserve/contracts";

/**
 * What this frontend process counted of the queries it served, per name the caller gave (a model, or
 * an app for a model-less query): Triton's statistics extension (libs/contracts triton.ts says what
 * each count means there). In memory only: each frontend counts its own queries from its start, a
 * restart begins at zero, and with several frontends each answers with its own. Durations are summed
 * in a double: exact to the nanosecond up to 2^53 ns (104 days of summed query time), then rounded.
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

export class InferenceStatistics {
  private readonly byName = new Map<string, ModelCounters>();

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
}

/** Counts of a name never queried. */
export const NO_COUNTS: Readonly<InferenceCounts> = Object.freeze(new ModelCounters());
