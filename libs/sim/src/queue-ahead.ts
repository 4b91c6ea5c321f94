import { queueAheadOf, type BatchInService } from "@sloserve/policy";
import type { Queue } from "./entities.js";

/**
 * The overflow rule's queue ahead of a query that joins `queue` at `nowMs` (libs/policy `queueAheadOf`):
 * the queries waiting plus the work left of the batches its replicas are running, in queries.
 */
export function queueAhead(queue: Queue, nowMs: number): number {
  const inService: BatchInService[] = [];
  for (const r of queue.replicas) for (const b of r.batches) inService.push({ size: b.queries.length, startMs: b.startMs, endMs: b.endMs });
  return queueAheadOf(queue.length, inService, nowMs);
}
