/**
 * Which "hold" decisions are worth publishing: the autoscalers decide every tick, and a hold repeats
 * while nothing changes. A hold is published when its reason changes (compared without its numbers when
 * `ignoreNumbers`: a utilisation in a reason moves every tick) or, with `repeatMs`, again after that
 * long; any other decision for the key clears it, so the next hold is published.
 */
export interface HoldFilterOptions {
  /** Compare reasons with their numbers replaced by "#". @default false */
  ignoreNumbers?: boolean;
  /** Publish an unchanged hold again after this long. @default Infinity (never) */
  repeatMs?: number;
}

export class HoldFilter {
  private readonly last = new Map<string, { shape: string; atMs: number }>();

  constructor(private readonly options: HoldFilterOptions = {}) {}

  /** Whether to publish a hold for `key` with this reason at `nowMs` (and remember it when so). */
  publish(key: string, reason: string, nowMs: number): boolean {
    const shape = this.options.ignoreNumbers ? reason.replace(/[0-9.]+/g, "#") : reason;
    const last = this.last.get(key);
    if (last && last.shape === shape && nowMs - last.atMs < (this.options.repeatMs ?? Infinity)) return false;
    this.last.set(key, { shape, atMs: nowMs });
    return true;
  }

  /** Another decision for `key`: the next hold is news. */
  clear(key: string): void {
    this.last.delete(key);
  }
}
