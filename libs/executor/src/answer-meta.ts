/**
 * The fields of the executor's answers (beside the outputs: in the binary encoding's meta, or the
 * JSON answer's top level): model_name, model_version, id, served_by, timing_ms, cost_dollars, in
 * that order (served_by.backend only in an emulated engine's answers). Serialised in pieces (issue
 * 14: serialising the whole object per answer was 5-8% of the executor's CPU on the tiny model): what
 * every answer of a batch shares once per batch, each answer's own values (id, deliveries, queue,
 * batch_wait, total) per answer. The JSON is the same, byte for byte, as JSON.stringify of the object
 * (libs/executor/test/answer-meta.test.ts).
 */

export interface BatchFacts {
  model: string;
  variant: string;
  hardware: string;
  /** The variant's accuracy (null: not measured; undefined: left out, as JSON.stringify does). */
  accuracy: number | null | undefined;
  worker: string;
  batchSize: number;
  /** The batch's run, ms (timing_ms.inference). */
  inferenceMs: number;
  costDollars: number;
  /** "emulated" for an emulated engine's answers (served_by.backend, after batch_size); undefined: left out. */
  backend?: string;
}

/** An answer's own timings, ms (timing_ms.inference is the batch's: {@link BatchFacts.inferenceMs}). */
export interface AnswerTiming {
  queue: number;
  batch_wait: number;
  total: number;
}

/** A number as JSON.stringify writes it. */
const num = (n: number): string => (Number.isFinite(n) ? String(n) : "null");

/** The answer fields' JSON for the answers of one batch: `(id, deliveries, timing) => JSON`. */
export function batchAnswerFields(facts: BatchFacts): (id: string | undefined, deliveries: number, timing: AnswerTiming) => string {
  const head = `{"model_name":${JSON.stringify(facts.model)},"model_version":"1"`;
  // served_by up to its last field (deliveries, each answer's own); its object is never empty.
  const servedBy = `,"served_by":${JSON.stringify({ model: facts.model, variant: facts.variant, hardware: facts.hardware, accuracy: facts.accuracy, worker: facts.worker, batch_size: facts.batchSize, backend: facts.backend }).slice(0, -1)},"deliveries":`;
  const inference = `,"inference":${num(facts.inferenceMs)},"total":`;
  const cost = `},"cost_dollars":${num(facts.costDollars)}}`;
  return (id, deliveries, timing) =>
    `${head}${id === undefined ? "" : `,"id":${JSON.stringify(id)}`}${servedBy}${num(deliveries)}},"timing_ms":{"queue":${num(timing.queue)},"batch_wait":${num(timing.batch_wait)}${inference}${num(timing.total)}${cost}`;
}
