/**
 * Spot prices over time (MArk §4.5, §5.2; DESIGN §3 "Costs").
 *
 * MArk's Algorithm 1 does not tell spot from on-demand instances (§4.5): a spot type is a type with its
 * own price, and "in spot market, the performance-cost ratio is highly dynamic, which allows MArk-spot
 * to opportunistically use large instances and GPU instances at cheaper price than on-demand" (§5.2).
 * The provisioning that follows the market therefore needs the price of every type *at the time of the
 * plan*. This module gives:
 *
 * - {@link SpotPriceSeries}: per instance type, a step function of the spot price ($/hour), from a
 *   file ({@link parseSpotPriceCsv}: the columns of `aws ec2 describe-spot-price-history`) or generated
 *   ({@link generateSpotSeries}, parameters below);
 * - {@link spotPriceAt}: the price in effect at time t;
 * - {@link chooseMarket}: **the one rule** for a type's market at time t, which the simulator's MArk
 *   system (libs/sim mark-system.ts, at every plan) and the vm-autoscaler's machine plan
 *   (machine-plan.ts, every tick) both call: spot when spot is allowed for the type and its price at t
 *   is at most the maximum spot price (AWS's "max price"; by default the on-demand price, above which
 *   spot saves nothing), else on-demand. Algorithm 1 (provisioning.ts) then ranks the types at the
 *   prices chosen, so the instance-type choice follows the series too;
 * - {@link spotCostDollars}: per-second billing at the price in effect (EC2's spot billing since 2017),
 *   with the 60 s minimum of {@link ec2Cost}.
 *
 * Without a series nothing changes: callers keep the static prices of `INSTANCE_PRICES` (costs.ts), and
 * {@link chooseMarket} falls back to a type's static `spotPerHour` when the series lacks it.
 *
 * The generated series. MArk ran on the live AWS market and publishes no series. Since AWS's 2017
 * pricing change spot prices move gradually, on supply and demand trends, rather than by auction. We
 * model, per type, the log of the price/on-demand ratio as a mean-reverting AR(1) sampled every hour:
 *
 *   x₀ = μ,  x_{k+1} = x_k + θ·(μ − x_k) + σ·ε_k,  ratio = clamp(eˣ, minRatio, maxRatio)
 *
 * with μ = ln(the type's typical spot/on-demand ratio in `INSTANCE_PRICES`, 0.30-0.36), θ = 0.2 per hour,
 * σ = 0.1 per hour, clamped to [0.1, 1]; and capacity crunches: each hour a crunch starts with
 * probability `crunchPerStep` (1/24) and holds the price at `crunchRatio` (1.2) × on-demand for
 * `crunchSteps` (2) hours (above the default max price: the plan leaves spot for on-demand meanwhile).
 * Every type has its own stream, seeded by `deriveSeed(seed, type)`. These parameters are ours.
 */
import { ec2Cost, INSTANCE_PRICES } from "./costs.js";
import { createRng, deriveSeed, sampleNormal } from "../common/rng.js";

/** A price in effect from `atMs` until the next point. */
export interface SpotPricePoint {
  atMs: number;
  perHour: number;
}

/** Per instance type, price points sorted by time. */
export type SpotPriceSeries = Readonly<Record<string, readonly SpotPricePoint[]>>;

/** The spot price in effect at `tMs` (the first point's before it); undefined when the series lacks the type. */
export function spotPriceAt(series: SpotPriceSeries, type: string, tMs: number): number | undefined {
  const points = series[type];
  if (!points || points.length === 0) return undefined;
  // Binary search for the last point at or before tMs.
  let lo = 0;
  let hi = points.length - 1;
  if (tMs < points[0]!.atMs) return points[0]!.perHour;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (points[mid]!.atMs <= tMs) lo = mid;
    else hi = mid - 1;
  }
  return points[lo]!.perHour;
}

export interface MarketOffer {
  type: string;
  /** May this type run on the spot market? */
  spot: boolean;
  /** @default INSTANCE_PRICES[type].onDemandPerHour */
  onDemandPerHour?: number;
  /** The most paid for spot (AWS's max price). @default the on-demand price */
  maxSpotPerHour?: number;
}

export interface MarketChoice {
  market: "on-demand" | "spot";
  pricePerHour: number;
  reason: string;
}

const money = (x: number): string => `$${x.toFixed(4)}/h`;

/**
 * The market of a type at `tMs`: spot when allowed and its price at t (the series', else the type's
 * static spot price) is at most the max spot price, else on-demand. Throws on a type with no price.
 */
export function chooseMarket(offer: MarketOffer, series: SpotPriceSeries | undefined, tMs: number): MarketChoice {
  const known = INSTANCE_PRICES[offer.type];
  const onDemand = offer.onDemandPerHour ?? known?.onDemandPerHour;
  if (onDemand === undefined) throw new Error(`unknown instance type "${offer.type}"`);
  if (!offer.spot) return { market: "on-demand", pricePerHour: onDemand, reason: `${offer.type}: spot not allowed` };
  const fromSeries = series ? spotPriceAt(series, offer.type, tMs) : undefined;
  const spot = fromSeries ?? known?.spotPerHour;
  if (spot === undefined) return { market: "on-demand", pricePerHour: onDemand, reason: `${offer.type}: no spot price known` };
  const cap = offer.maxSpotPerHour ?? onDemand;
  const source = fromSeries === undefined ? "static spot price" : "spot price at t";
  if (spot > cap) {
    return { market: "on-demand", pricePerHour: onDemand, reason: `${offer.type}: ${source} ${money(spot)} above the max ${money(cap)}: on-demand at ${money(onDemand)}` };
  }
  return { market: "spot", pricePerHour: spot, reason: `${offer.type}: ${source} ${money(spot)} ≤ max ${money(cap)}` };
}

/**
 * Dollars for an instance of `type` billed from `fromMs` to `toMs` at the spot price in effect each
 * second (the series' step function; `fallbackPerHour` where the series lacks the type), whole seconds
 * rounded up and at least `minimumS` (EC2's 60 s), as {@link ec2Cost} bills a fixed price.
 * Example: $0.036/h until 3600 s, then $0.072/h; 3000 → 4200 s: 600 s · 0.00001 + 600 s · 0.00002 = $0.018.
 */
export function spotCostDollars(series: SpotPriceSeries, type: string, fallbackPerHour: number, fromMs: number, toMs: number, minimumS = 60): number {
  const points = series[type];
  if (!points || points.length === 0) return ec2Cost(fallbackPerHour / 3600, fromMs, toMs, { minimumS });
  const billedS = Math.max(minimumS, Math.ceil(Math.max(0, toMs - fromMs) / 1000 - 1e-9));
  const endMs = fromMs + billedS * 1000;
  let dollars = 0;
  let t = fromMs;
  while (t < endMs) {
    // The segment [t, next) has one price: the one in effect at t.
    const next = points.find((p) => p.atMs > t)?.atMs ?? Infinity;
    const segEnd = Math.min(endMs, next);
    dollars += ((segEnd - t) / 1000) * ((spotPriceAt(series, type, t) ?? 0) / 3600);
    t = segEnd;
  }
  return dollars;
}

export interface SpotSeriesOptions {
  types: readonly string[];
  /** Length covered (points at 0, step, 2·step, … < durationMs). */
  durationMs: number;
  seed: number;
  /** @default 3_600_000 (hourly) */
  stepMs?: number;
  /** Mean-reversion rate θ per step. @default 0.2 */
  reversion?: number;
  /** σ of the log ratio's innovation per step. @default 0.1 */
  volatility?: number;
  /** Mean spot/on-demand ratio per type. @default INSTANCE_PRICES' spotPerHour / onDemandPerHour */
  meanRatio?: Readonly<Record<string, number>>;
  /** @default 0.1 */
  minRatio?: number;
  /** @default 1 */
  maxRatio?: number;
  /** Probability per step that a capacity crunch starts. @default 1/24 */
  crunchPerStep?: number;
  /** Steps a crunch lasts. @default 2 */
  crunchSteps?: number;
  /** Price/on-demand during a crunch. @default 1.2 */
  crunchRatio?: number;
}

/** A generated series (see the module's header for the model and its parameters). */
export function generateSpotSeries(o: SpotSeriesOptions): Record<string, SpotPricePoint[]> {
  const stepMs = o.stepMs ?? 3_600_000;
  const theta = o.reversion ?? 0.2;
  const sigma = o.volatility ?? 0.1;
  const minRatio = o.minRatio ?? 0.1;
  const maxRatio = o.maxRatio ?? 1;
  const crunchP = o.crunchPerStep ?? 1 / 24;
  const crunchSteps = o.crunchSteps ?? 2;
  const crunchRatio = o.crunchRatio ?? 1.2;
  const out: Record<string, SpotPricePoint[]> = {};
  for (const type of o.types) {
    const p = INSTANCE_PRICES[type];
    if (!p) throw new Error(`unknown instance type "${type}"`);
    const mu = Math.log(o.meanRatio?.[type] ?? p.spotPerHour / p.onDemandPerHour);
    const rng = createRng(deriveSeed(o.seed, type));
    const points: SpotPricePoint[] = [];
    let x = mu;
    let crunchLeft = 0;
    for (let k = 0; k * stepMs < o.durationMs; k++) {
      if (k > 0) x += theta * (mu - x) + sigma * sampleNormal(rng);
      if (crunchLeft === 0 && rng.next() < crunchP) crunchLeft = crunchSteps;
      const ratio = crunchLeft > 0 ? crunchRatio : Math.min(maxRatio, Math.max(minRatio, Math.exp(x)));
      if (crunchLeft > 0) crunchLeft--;
      points.push({ atMs: k * stepMs, perHour: ratio * p.onDemandPerHour });
    }
    out[type] = points;
  }
  return out;
}

/**
 * A series from a CSV with a header naming `timestamp`, `instance_type` and `spot_price` (any order,
 * other columns ignored; the fields of `aws ec2 describe-spot-price-history`). Timestamps: ISO 8601 or
 * epoch seconds; points are epoch ms. Several rows of a type at one time (availability zones): the
 * cheapest. Every bad row is reported in one error.
 */
export function parseSpotPriceCsv(text: string): Record<string, SpotPricePoint[]> {
  // Line numbers (1-based) kept for the errors; blank lines and # comments skipped.
  const lines = text.split(/\r?\n/).map((l, i) => ({ l, n: i + 1 })).filter(({ l }) => l.trim() !== "" && !l.trimStart().startsWith("#"));
  const header = (lines[0]?.l ?? "").split(",").map((h) => h.trim().toLowerCase());
  const col = { t: header.indexOf("timestamp"), type: header.indexOf("instance_type"), price: header.indexOf("spot_price") };
  const missing = Object.entries({ timestamp: col.t, instance_type: col.type, spot_price: col.price }).filter(([, i]) => i < 0).map(([n]) => n);
  if (missing.length > 0) throw new Error(`spot price CSV: the header lacks ${missing.join(", ")}`);
  const problems: string[] = [];
  const byType = new Map<string, Map<number, number>>();
  for (const { l: line, n } of lines.slice(1)) {
    const f = line.split(",").map((x) => x.trim());
    const raw = f[col.t] ?? "";
    const atMs = /^\d+(\.\d+)?$/.test(raw) ? Number(raw) * 1000 : Date.parse(raw);
    const type = f[col.type] ?? "";
    const price = Number(f[col.price]);
    const why = [Number.isFinite(atMs) ? "" : `timestamp "${raw}"`, type ? "" : "no instance type", Number.isFinite(price) && price >= 0 ? "" : `price "${f[col.price] ?? ""}"`].filter((x) => x);
    if (why.length > 0) {
      problems.push(`line ${n}: ${why.join(", ")}`);
      continue;
    }
    const m = byType.get(type) ?? byType.set(type, new Map()).get(type)!;
    m.set(atMs, Math.min(price, m.get(atMs) ?? Infinity));
  }
  if (problems.length > 0) throw new Error(`spot price CSV: ${problems.join("; ")}`);
  const out: Record<string, SpotPricePoint[]> = {};
  for (const [type, m] of byType) out[type] = [...m].sort((a, b) => a[0] - b[0]).map(([atMs, perHour]) => ({ atMs, perHour }));
  return out;
}
