/**
 * MLPerf Inference's server scenario, scaled down to a benchmark step: the highest Poisson arrival
 * rate at which a target's p99 latency stays within a bound. MLPerf's LoadGen finds it by running
 * ten-minute tries at chosen rates; here a fixed number of short steps searches the rate, so that the
 * run time is bounded (steps × (step + grace), plus the drain after an overloaded step):
 *
 * 1. **Bracket**: the first step runs at `startQps`. While every step has passed, the next runs at
 *    `factor` × the highest passing rate (at most `maxQps`); while every step has failed, at the lowest
 *    failing rate ÷ `factor` (not below `minQps`).
 * 2. **Bisect**: once a passing rate lies below a failing one, the next step runs halfway between the
 *    highest passing and the lowest failing rate.
 *
 * It stops after `steps` steps, or earlier when the bracket is narrower than `resolution` (relative to
 * the failing rate), a pass at `maxQps` leaves nothing above to try, or a fail at `minQps` nothing
 * below. The answer is the highest passing rate (0 when none passed) and the lowest failing rate above
 * it: the boundary lies between them. Caveat: bisection assumes that p99 grows with the rate; on a
 * shared machine a step's p99 is noisy, and a rate that failed once is never tried again.
 *
 * Pure: {@link startSearch}, {@link nextRate} and {@link recordStep} are the search as a state
 * machine (the serving benchmark advances the searches of several targets in turn, so that they see the
 * same machine conditions), {@link searchMaxRate} the same search driven by a p99-at-rate oracle.
 */

export interface SearchOptions {
  /** The latency bound, ms: a step passes when its p99 is at most this. */
  boundMs: number;
  /** The first step's rate, queries/s. */
  startQps: number;
  /** Steps at most (each one a rate tried). */
  steps: number;
  /** Rates below this are not tried. @default startQps / 64 */
  minQps?: number;
  /** Rates above this are not tried. @default startQps × 4 */
  maxQps?: number;
  /** The bracketing step's multiplier. @default 2 */
  factor?: number;
  /** Stop once (lowest fail − highest pass) / lowest fail is below this. @default 0.02 */
  resolution?: number;
}

export interface SearchStep {
  qps: number;
  p99Ms: number;
  pass: boolean;
}

export interface SearchState {
  options: Required<SearchOptions>;
  steps: SearchStep[];
  /** The highest rate that passed, if any. */
  pass?: number;
  /** The lowest rate that failed, if any. */
  fail?: number;
}

export interface SearchResult {
  /** The highest passing rate, queries/s; 0 when no step passed. */
  maxQps: number;
  /** The lowest failing rate, queries/s (the boundary lies between maxQps and this); null when none failed. */
  failQps: number | null;
  steps: SearchStep[];
  /** Why the search ended: its steps ran out, the bracket is narrow enough, or it hit minQps or maxQps. */
  ended: "steps" | "resolution" | "min" | "max";
}

/** Rates are tried at three significant digits (a rate of 1234.567 q/s is run as 1230). */
function roundRate(x: number): number {
  return x <= 0 ? 0 : Number(x.toPrecision(3));
}

export function startSearch(options: SearchOptions): SearchState {
  if (!(options.boundMs > 0)) throw new RangeError(`boundMs must be > 0, got ${options.boundMs}`);
  if (!(options.startQps > 0)) throw new RangeError(`startQps must be > 0, got ${options.startQps}`);
  if (!(Number.isInteger(options.steps) && options.steps >= 1)) throw new RangeError(`steps must be an integer >= 1, got ${options.steps}`);
  const factor = options.factor ?? 2;
  if (!(factor > 1)) throw new RangeError(`factor must be > 1, got ${factor}`);
  return {
    options: {
      boundMs: options.boundMs,
      startQps: options.startQps,
      steps: options.steps,
      minQps: options.minQps ?? options.startQps / 64,
      maxQps: options.maxQps ?? options.startQps * 4,
      factor,
      resolution: options.resolution ?? 0.02,
    },
    steps: [],
  };
}

/** Why the search is over, or undefined while it goes on. */
function endedBy(state: SearchState): SearchResult["ended"] | undefined {
  const { options: o, pass, fail } = state;
  if (state.steps.length >= o.steps) return "steps";
  if (pass !== undefined && fail !== undefined && (fail - pass) / fail < o.resolution) return "resolution";
  if (fail === undefined && pass !== undefined && pass >= o.maxQps) return "max";
  if (pass === undefined && fail !== undefined && fail <= o.minQps) return "min";
  return undefined;
}

/** The next rate to try, or null when the search is over. */
export function nextRate(state: SearchState): number | null {
  if (endedBy(state) !== undefined) return null;
  const { options: o, pass, fail } = state;
  if (pass === undefined && fail === undefined) return roundRate(Math.min(o.maxQps, Math.max(o.minQps, o.startQps)));
  if (pass === undefined) return roundRate(Math.max(o.minQps, (fail as number) / o.factor));
  if (fail === undefined) return roundRate(Math.min(o.maxQps, pass * o.factor));
  const mid = roundRate((pass + fail) / 2);
  // Rounding may land on a rate already tried: the bracket is as narrow as three digits make it.
  return mid > pass && mid < fail ? mid : null;
}

/** The state after a step at `qps` whose p99 was `p99Ms` (Infinity: some query got no answer in time). */
export function recordStep(state: SearchState, qps: number, p99Ms: number): SearchState {
  const pass = p99Ms <= state.options.boundMs;
  return {
    options: state.options,
    steps: [...state.steps, { qps, p99Ms, pass }],
    pass: pass ? Math.max(state.pass ?? 0, qps) : state.pass,
    fail: pass ? state.fail : Math.min(state.fail ?? Infinity, qps),
  };
}

export function searchResult(state: SearchState): SearchResult {
  return { maxQps: state.pass ?? 0, failQps: state.fail ?? null, steps: state.steps, ended: endedBy(state) ?? "resolution" };
}

/** The whole search against an oracle that runs a step at a rate and gives its p99, ms. */
export async function searchMaxRate(p99At: (qps: number) => Promise<number> | number, options: SearchOptions): Promise<SearchResult> {
  let state = startSearch(options);
  for (let qps = nextRate(state); qps !== null; qps = nextRate(state)) state = recordStep(state, qps, await p99At(qps));
  return searchResult(state);
}
