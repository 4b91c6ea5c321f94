/**
 * The project's one set of quantile helpers (latency percentiles, medians of repeated runs). Pure.
 *
 * Definitions:
 * - Quantiles are **nearest-rank**: the q-quantile of n values is the value at 1-based rank ⌈q·n⌉ of
 *   the sorted values, clamped to [1, n] (so q = 0 gives the minimum and q = 1 the maximum). It is always
 *   one of the values, never an interpolation: a p99 of 100 latencies is the 99th smallest.
 * - The **median** is the usual midpoint: the middle value for odd n, the mean of the two middle values
 *   for even n. For even n it is not `quantile(values, 0.5)` (nearest rank gives the lower middle).
 * - {@link lowerQuantileSorted} is a second, index-based convention (NumPy's `method="lower"`), kept for
 *   the one place that is defined by it (the MArk Twitter trace scaling in the simulator).
 *
 * Empty input gives NaN; NaN values are ignored by {@link quantile} and {@link median}.
 */

/** Nearest-rank q-quantile (q in [0, 1]) of values already sorted ascending; NaN when empty. */
export function quantileSorted(sorted: ArrayLike<number>, q: number): number {
  const n = sorted.length;
  if (n === 0) return NaN;
  const rank = Math.min(n, Math.max(1, Math.ceil(q * n)));
  return sorted[rank - 1]!;
}

/**
 * Nearest-rank q-quantile (q in [0, 1]) of unsorted values, ignoring NaN; NaN when none is left.
 * Does not modify `values`; O(n) on average (selection on a copy, no full sort).
 */
export function quantile(values: ArrayLike<number>, q: number): number {
  return quantileInPlace(withoutNaN(values), q);
}

/**
 * {@link quantile} of values the caller has already copied into `xs` without NaN: the same value,
 * without the copy, but `xs` is reordered (a scratch buffer reused from one call to the next, as the
 * simulator's latency samples do: a fresh copy of millions of values costs more than the selection).
 */
export function quantileInPlace(xs: Float64Array, q: number): number {
  const n = xs.length;
  if (n === 0) return NaN;
  return select(xs, Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1)));
}

/** Median of the values, ignoring NaN: the middle one, or the mean of the two middle ones; NaN when none. */
export function median(values: ArrayLike<number>): number {
  const xs = withoutNaN(values);
  const n = xs.length;
  if (n === 0) return NaN;
  const mid = n >> 1;
  const upper = select(xs, mid);
  if (n % 2 === 1) return upper;
  // After selecting index mid, everything before it is ≤ xs[mid]: the lower middle is their maximum.
  let lower = xs[0]!;
  for (let i = 1; i < mid; i++) if (xs[i]! > lower) lower = xs[i]!;
  return (lower + upper) / 2;
}

/**
 * The value at index ⌊q·(n − 1)⌋ of values sorted ascending (NumPy's `method="lower"`); NaN when empty.
 * Differs from {@link quantileSorted} by at most one rank. Use {@link quantileSorted} in new code.
 */
export function lowerQuantileSorted(sorted: ArrayLike<number>, q: number): number {
  const n = sorted.length;
  if (n === 0) return NaN;
  return sorted[Math.min(n - 1, Math.max(0, Math.floor(q * (n - 1))))]!;
}

function withoutNaN(values: ArrayLike<number>): Float64Array {
  const xs = new Float64Array(values.length);
  let n = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (!Number.isNaN(v)) xs[n++] = v;
  }
  return n === xs.length ? xs : xs.subarray(0, n);
}

/** Hoare-partition quickselect: the k-th smallest (0-based) of `a`, which it reorders. */
function select(a: Float64Array, k: number): number {
  let lo = 0;
  let hi = a.length - 1;
  while (lo < hi) {
    const pivot = a[(lo + hi) >> 1]!;
    let i = lo;
    let j = hi;
    while (i <= j) {
      while (a[i]! < pivot) i++;
      while (a[j]! > pivot) j--;
      if (i <= j) {
        const t = a[i]!;
        a[i] = a[j]!;
        a[j] = t;
        i++;
        j--;
      }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else return a[k]!;
  }
  return a[k]!;
}
