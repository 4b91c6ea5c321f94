/**
 * Per-query variant selection (INFaaS Algorithm 1) with the dispatcher's incrementally maintained
 * index, `SelectionIndex.select` of libs/policy: time per decision, for catalogues of 100, 1 000 and
 * 10 000 variants spread over apps of 100 variants each, 30% of them Active, random requirements
 * (INFaaS §6.4: selection time should stay flat as the catalogue grows). Each call is timed on its
 * own with performance.now() (ns resolution in Node, no allocation, unlike hrtime.bigint()); the timer's own cost (median of empty readings) is subtracted.
 */
import { SelectionIndex, createRng, type QueryRequirements, type VariantProfile, type Rng } from "@sloserve/policy";
import { round, summarize } from "../lib/stats.js";

export interface SelectionFigure {
  variants: number;
  apps: number;
  activeShare: number;
  queries: number;
  p50Us: number;
  p99Us: number;
  meanUs: number;
  kinds: Record<string, number>;
  /** p50 and p99 by decision kind, µs. */
  byKind: Record<string, { p50Us: number; p99Us: number }>;
}

export interface SelectionResult {
  /** The figure of the summary: p99 at 1 000 variants. */
  p99UsAt1000: number | null;
  sizes: SelectionFigure[];
  timerOverheadNs: number;
  note?: string;
}

const HARDWARE = ["cpu", "gpu", "inferentia"] as const;

function catalogue(size: number, perApp: number, rng: Rng): VariantProfile[] {
  const out: VariantProfile[] = [];
  for (let i = 0; i < size; i++) {
    const app = `app${Math.floor(i / perApp)}`;
    const hardware = HARDWARE[i % HARDWARE.length] as string;
    const batchSize = 2 ** Math.floor(rng.next() * 5);
    const t1 = 2 + rng.next() * 200;
    const latencyMs: Record<number, number> = {};
    for (let b = 1; b <= 16; b *= 2) latencyMs[b] = t1 * (1 + 0.3 * (b - 1));
    out.push({
      name: `${app}-v${i}`,
      model: `${app}-m${i % 10}`,
      app,
      hardware,
      batchSize,
      accuracy: 0.6 + rng.next() * 0.35,
      latencyMs,
      peakQps: (1000 * batchSize) / (latencyMs[batchSize] ?? t1),
      loadLatencyMs: 500 + rng.next() * 10_000,
      pricePerS: hardware === "cpu" ? 0.0001 : hardware === "gpu" ? 0.0009 : 0.0004,
      profiled: rng.next() < 0.95,
    });
  }
  return out;
}

function timerOverheadNs(): number {
  const xs: number[] = [];
  for (let i = 0; i < 20_000; i++) {
    const a = performance.now();
    const b = performance.now();
    xs.push((b - a) * 1e6);
  }
  return summarize(xs).p50;
}

export function runSelection(options: { quick: boolean; log: (s: string) => void }): SelectionResult {
  const overhead = timerOverheadNs();
  const queries = options.quick ? 50_000 : 200_000;
  const perApp = 100;
  const sizes: SelectionFigure[] = [];
  for (const size of [100, 1_000, 10_000]) {
    const rng = createRng(size);
    const variants = catalogue(size, perApp, rng);
    const index = new SelectionIndex(variants);
    const activeShare = 0.3;
    for (const v of variants) {
      if (rng.next() < activeShare) {
        index.setRuntime(v.name, { state: "active", instances: 1 + Math.floor(rng.next() * 3), qps: rng.next() * v.peakQps, workers: [{ worker: `w${Math.floor(rng.next() * 50)}`, qps: rng.next() * v.peakQps }] });
      }
    }
    index.setWorkers(Array.from({ length: 50 }, (_, i) => ({ worker: `w${i}`, hardware: HARDWARE[i % HARDWARE.length] as string, utilization: rng.next() })));
    const apps = Math.ceil(size / perApp);
    const reqs: Array<{ app: string; req: QueryRequirements }> = Array.from({ length: 4096 }, () => ({
      app: `app${Math.floor(rng.next() * apps)}`,
      req: { latencyMs: 20 + rng.next() * 480, minAccuracy: rng.next() * 0.9, ...(rng.next() < 0.3 ? { maxCostPerQuery: rng.next() * 1e-5 } : {}) },
    }));
    const kinds: Record<string, number> = {};
    // Warm-up (JIT), then measure.
    for (let i = 0; i < 20_000; i++) {
      const r = reqs[i & 4095]!;
      index.select(r.app, r.req);
    }
    const ns: number[] = new Array<number>(queries);
    const perKind: Record<string, number[]> = {};
    for (let i = 0; i < queries; i++) {
      const r = reqs[i & 4095]!;
      const a = performance.now();
      const d = index.select(r.app, r.req);
      const b = performance.now();
      ns[i] = Math.max(0, (b - a) * 1e6 - overhead);
      kinds[d.kind] = (kinds[d.kind] ?? 0) + 1;
      (perKind[d.kind] ??= []).push(ns[i] as number);
    }
    const s = summarize(ns);
    const fig: SelectionFigure = { variants: size, apps, activeShare, queries, p50Us: round(s.p50 / 1000), p99Us: round(s.p99 / 1000), meanUs: round(s.mean / 1000), kinds, byKind: {} };
    for (const [k, xs] of Object.entries(perKind)) {
      const ks = summarize(xs);
      fig.byKind[k] = { p50Us: round(ks.p50 / 1000), p99Us: round(ks.p99 / 1000) };
    }
    options.log(`  selection: ${size} variants: p50 ${fig.p50Us} µs, p99 ${fig.p99Us} µs (${JSON.stringify(fig.byKind)})`);
    sizes.push(fig);
  }
  return { p99UsAt1000: sizes.find((s) => s.variants === 1_000)?.p99Us ?? null, sizes, timerOverheadNs: round(overhead) };
}
