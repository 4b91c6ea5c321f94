/**
 * "The tightest latency SLO over the last minute", one meaning for every reader: the registrar's
 * batch tuning (per model, MArk §4.3), the model autoscaler's candidate variants (per model), the VM
 * autoscaler's capacity estimate (per app) and the simulator's. The dispatchers report, every second,
 * the tightest SLO among the queries they routed (`metrics.arrivals.<app>`, `models[m].minSloMs`); a
 * reader keeps, per key, the minimum over the observations of the last `memoryMs`: a tighter SLO counts
 * at once, and a looser one only once every tighter one is older than the window, so queries with a
 * tight SLO are not put at risk by a second of loose ones.
 *
 * A sliding-window minimum (a deque of observations with increasing SLOs): each observation is pushed
 * once and dropped once, so memory stays at the number of distinct SLOs seen within the window.
 */

/** How long a tighter SLO is kept against looser ones. */
export const SLO_MEMORY_MS = 60_000;

interface Seen {
  ms: number;
  atMs: number;
}

export class SloWindow {
  private readonly byKey = new Map<string, Seen[]>();

  constructor(readonly memoryMs: number = SLO_MEMORY_MS) {}

  /** An observation: the tightest SLO of `key`'s queries in a report stamped `atMs`. */
  observe(key: string, sloMs: number, atMs: number): void {
    let seen = this.byKey.get(key);
    if (seen === undefined) this.byKey.set(key, (seen = []));
    while (seen.length > 0 && (seen[seen.length - 1] as Seen).ms >= sloMs) seen.pop();
    seen.push({ ms: sloMs, atMs });
  }

  /** The tightest SLO of `key` observed within the window ending at `nowMs`; undefined when none. */
  tightest(key: string, nowMs: number): number | undefined {
    const seen = this.byKey.get(key);
    if (seen === undefined) return undefined;
    let drop = 0;
    while (drop < seen.length && nowMs - (seen[drop] as Seen).atMs > this.memoryMs) drop++;
    if (drop > 0) seen.splice(0, drop);
    if (seen.length === 0) {
      this.byKey.delete(key);
      return undefined;
    }
    return (seen[0] as Seen).ms;
  }

  /** Every key's tightest SLO within the window ending at `nowMs`. */
  read(nowMs: number): Record<string, number> {
    const out: Record<string, number> = {};
    for (const key of [...this.byKey.keys()]) {
      const ms = this.tightest(key, nowMs);
      if (ms !== undefined) out[key] = ms;
    }
    return out;
  }
}
