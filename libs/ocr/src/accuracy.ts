/** Levenshtein distance between two strings, by code point. */
export function editDistance(a: string, b: string): number {
  const x = [...a];
  const y = [...b];
  let prev = Array.from({ length: y.length + 1 }, (_, j) => j);
  for (let i = 1; i <= x.length; i++) {
    const cur = [i];
    for (let j = 1; j <= y.length; j++) {
      cur[j] = Math.min((prev[j] as number) + 1, (cur[j - 1] as number) + 1, (prev[j - 1] as number) + (x[i - 1] === y[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[y.length] as number;
}

/**
 * Character accuracy over a set: 1 − Σ edit distance / Σ reference length (by code point), floored
 * at 0. A prediction with extra characters costs as much as one missing them.
 */
export function characterAccuracy(pairs: ReadonlyArray<{ expected: string; actual: string }>): number {
  let errors = 0;
  let total = 0;
  for (const { expected, actual } of pairs) {
    errors += editDistance(expected, actual);
    total += [...expected].length;
  }
  if (total === 0) return errors === 0 ? 1 : 0;
  return Math.max(0, 1 - errors / total);
}
