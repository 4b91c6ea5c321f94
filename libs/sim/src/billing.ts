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
