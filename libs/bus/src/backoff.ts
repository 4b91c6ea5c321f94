/**
 * Exponential backoff: the wait before retry `attempt` (0: the first retry) is `baseMs` doubled per
 * attempt, at most `capMs`. Shared by the dispatcher's queue publish retries and the frontend's wait
 * for a dispatcher.
 */
export function backoffMs(attempt: number, baseMs: number, capMs: number): number {
  return Math.min(capMs, baseMs * 2 ** Math.max(0, attempt));
}
