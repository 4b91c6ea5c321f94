/**
 * Cost accounting for simulated runs (DESIGN §3 "Costs"), on top of the price and billing arithmetic
 * in `@sloserve/policy` (costs.ts):
 *
 * - a machine (an EC2 instance) is billed per second from its launch request (start-up included) to its
 *   termination or to the end of the billing window, at least `minimumS` seconds (60 for EC2);
 * - a replica may carry its own price (INFaaS §6.2 bills each running variant instance by its memory
 *   footprint) with its own minimum (0 by default);
 * - serverless invocations are billed per request and per GB-second as they happen.
 */
import { ec2Cost } from "@sloserve/policy";

export interface Billable {
  pricePerS: number;
  /** When billing started (launch request, or replica creation). */
  billedFromMs: number;
  /** When billing stopped, or null while still running. */
  billedToMs: number | null;
  billingMinimumS: number;
}

/** Dollars for one billable item up to `atMs` (items still running are billed up to `atMs`). */
export function billedCost(item: Billable, atMs: number): number {
  if (item.pricePerS <= 0 || item.billedFromMs > atMs) return 0;
  const end = item.billedToMs === null ? atMs : Math.min(item.billedToMs, atMs);
  return ec2Cost(item.pricePerS, item.billedFromMs, end, { minimumS: item.billingMinimumS });
}

/** Sum of billed costs grouped by a key (e.g. hardware kind). */
export function costByKey<T extends Billable>(items: Iterable<T>, atMs: number, key: (item: T) => string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const it of items) {
    const c = billedCost(it, atMs);
    if (c === 0) continue;
    const k = key(it);
    out[k] = (out[k] ?? 0) + c;
  }
  return out;
}

/**
 * The billed cost of a growing list of items at a time, added up item by item in list order (so the
 * very number `Σ billedCost` gives, float rounding included): an item whose billing has ended costs
 * the same at every time from then on (from max(billedToMs, billedFromMs)), and that cost is kept
 * instead of recomputed. Items' billing fields may change only from `billedToMs` null to a time.
 */
export class BilledSum<T extends Billable> {
  private readonly items: T[] = [];
  /** Per item: from when its cost is fixed (Infinity while it is billed), and that cost. */
  private readonly fixedFromMs: number[] = [];
  private readonly fixedCost: number[] = [];

  push(item: T): void {
    this.items.push(item);
    this.fixedFromMs.push(Infinity);
    this.fixedCost.push(0);
  }

  /** `c` plus the costs at `atMs` of items[from ..], in order. */
  sum(from: number, atMs: number, c: number): number {
    const items = this.items;
    const fixedFromMs = this.fixedFromMs;
    for (let i = from; i < items.length; i++) {
      if (atMs >= (fixedFromMs[i] as number)) {
        c += this.fixedCost[i] as number;
        continue;
      }
      const item = items[i] as T;
      const cost = billedCost(item, atMs);
      c += cost;
      if (item.billedToMs !== null) {
        const fixedFrom = Math.max(item.billedToMs, item.billedFromMs);
        if (atMs >= fixedFrom) {
          fixedFromMs[i] = fixedFrom;
          this.fixedCost[i] = cost;
        }
      }
    }
    return c;
  }
}
