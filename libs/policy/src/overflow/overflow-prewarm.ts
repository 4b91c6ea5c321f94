/**
 * Pre-warming the function provider (MArk §4.5 "Lambda cold start": "When a potential Lambda request
 * surge is expected, such as spot interruptions and unexpected workload surges, MArk sends concurrent
 * pings to Lambda to warm up more instances"). The paper does not say how many; our rule:
 *
 *   containers = ⌈λ_extra × L / 1000⌉, capped at `maxContainers`
 *
 * Little's law: a function container runs one query at a time, so carrying λ_extra queries/s whose
 * function run takes L ms needs λ·L/1000 containers busy at once. L is the profiled batch-1 latency of
 * the variant(s) concerned (the function runs one query, on a CPU like a worker's; its own overhead is
 * not in it, hence the ceiling).
 *
 * - **Capacity lost** (a worker's heartbeat disappears): λ_extra is the load the lost worker carried
 *   (its last report's arrivals/s, per variant, each with its own L); until the autoscalers replace it,
 *   that load overflows. A lost worker that carried nothing warms nothing.
 * - **Forecast surge** (`forecast.<app>`): the next unit's forecast max rate F is *well above* the
 *   current rate C (the last unit's observed max rate): F ≥ `surgeFactor` × C and F − C ≥ `minSurgeQps`.
 *   λ_extra = F − max(C, local capacity): the part the app's running instances cannot absorb; none when
 *   they can.
 *
 * Pure: the dispatcher calls these on `ClusterView.prune` and on each forecast, and calls the provider's
 * prewarm(n) when n > 0.
 */

export interface PrewarmConfig {
  /** A forecast is a surge when it is at least this many times the current rate. @default 1.5 */
  surgeFactor: number;
  /** …and at least this many queries/s above it (ignores noise at low rates). @default 1 */
  minSurgeQps: number;
  /** Most containers asked for at once. @default 32 */
  maxContainers: number;
}

export const PREWARM_DEFAULTS: PrewarmConfig = { surgeFactor: 1.5, minSurgeQps: 1, maxContainers: 32 };

export interface PrewarmDecision {
  /** Containers to warm (0: none). */
  containers: number;
  /** The variant whose model the containers should load: the one needing the most of them. */
  variant?: string;
  reason: string;
}

/** Load a lost worker carried for one variant. */
export interface LostLoad {
  variant: string;
  arrivalsPerS: number;
  /** Profiled batch-1 latency of the variant, ms (the function's run time). */
  functionLatencyMs: number;
}

function containersFor(concurrency: number, config: PrewarmConfig): number {
  return Math.min(config.maxContainers, Math.ceil(concurrency - 1e-9));
}

/** Capacity lost: warm enough containers for the load the lost worker(s) carried. */
export function prewarmForLostCapacity(lost: readonly LostLoad[], config: PrewarmConfig = PREWARM_DEFAULTS): PrewarmDecision {
  let concurrency = 0;
  let qps = 0;
  let top: { variant: string; concurrency: number } | undefined;
  for (const l of lost) {
    if (l.arrivalsPerS <= 0) continue;
    qps += l.arrivalsPerS;
    const c = (l.arrivalsPerS * Math.max(0, l.functionLatencyMs)) / 1000;
    concurrency += c;
    if (!top || c > top.concurrency) top = { variant: l.variant, concurrency: c };
  }
  if (qps <= 0 || !top) return { containers: 0, reason: "the lost capacity carried no load" };
  const containers = Math.max(1, containersFor(concurrency, config));
  return { containers, variant: top.variant, reason: `capacity lost carrying ${qps.toFixed(1)} q/s (${concurrency.toFixed(2)} concurrent function runs): warm ${containers}` };
}

export interface ForecastView {
  /** The next unit's forecast max rate, queries/s. */
  nextQps: number;
  /** The current rate (the last unit's observed max rate), queries/s. */
  currentQps: number;
  /** Σ peak QPS of the app's serving instances, queries/s. */
  localCapacityQps: number;
  /** Profiled batch-1 latency of the variant the app's queries would overflow from, ms. */
  functionLatencyMs: number;
  /** That variant (the containers load its model). */
  variant?: string;
}

/** Forecast surge: warm containers for the part of the surge the local capacity cannot absorb. */
export function prewarmForForecast(f: ForecastView, config: PrewarmConfig = PREWARM_DEFAULTS): PrewarmDecision {
  const surge = f.nextQps >= config.surgeFactor * f.currentQps && f.nextQps - f.currentQps >= config.minSurgeQps;
  if (!surge) return { containers: 0, reason: `no surge: forecast ${f.nextQps.toFixed(1)} q/s against ${f.currentQps.toFixed(1)} q/s now` };
  const extra = f.nextQps - Math.max(f.currentQps, f.localCapacityQps);
  if (extra <= 0) return { containers: 0, reason: `surge to ${f.nextQps.toFixed(1)} q/s fits the local capacity of ${f.localCapacityQps.toFixed(1)} q/s` };
  const containers = Math.max(1, containersFor((extra * Math.max(0, f.functionLatencyMs)) / 1000, config));
  return { containers, ...(f.variant !== undefined ? { variant: f.variant } : {}), reason: `surge forecast: ${f.nextQps.toFixed(1)} q/s against ${f.currentQps.toFixed(1)} q/s now and ${f.localCapacityQps.toFixed(1)} q/s of local capacity: warm ${containers} for ${extra.toFixed(1)} q/s` };
}
