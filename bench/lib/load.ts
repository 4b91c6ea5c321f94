/**
 * Load generators. Every loop is bounded by a count and a time limit.
 *
 * - {@link interleaved}: low-load latency. One query at a time; each round sends one query to every
 *   target (in a rotating order), so that all targets see the same machine conditions.
 * - {@link closedLoop}: saturated throughput. N clients, each sending its next query as soon as the
 *   previous one is answered, for a fixed time after a warm-up.
 */

export type Target = () => Promise<unknown>;

export interface InterleavedOptions {
  rounds: number;
  warmupRounds: number;
  /** Stop early after this long (measured rounds only). */
  maxMs: number;
}

export interface InterleavedResult {
  /** Latency per target, ms, one per answered query of a measured round (failed queries excluded). */
  latencies: Record<string, number[]>;
  /** Failed queries per target, and the first failure's message. */
  errors: Record<string, { count: number; first: string }>;
  rounds: number;
  elapsedMs: number;
}

export async function interleaved(targets: Record<string, Target>, options: InterleavedOptions): Promise<InterleavedResult> {
  const names = Object.keys(targets);
  const latencies: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  const errors: InterleavedResult["errors"] = {};
  for (let r = 0; r < options.warmupRounds; r++) for (const n of names) await (targets[n] as Target)().catch(() => undefined);
  const started = performance.now();
  let rounds = 0;
  while (rounds < options.rounds && performance.now() - started < options.maxMs) {
    for (let k = 0; k < names.length; k++) {
      const name = names[(k + rounds) % names.length] as string;
      const t0 = performance.now();
      try {
        await (targets[name] as Target)();
        (latencies[name] as number[]).push(performance.now() - t0);
      } catch (err) {
        const e = (errors[name] ??= { count: 0, first: (err as Error).message.slice(0, 300) });
        e.count++;
      }
    }
    rounds++;
  }
  return { latencies, errors, rounds, elapsedMs: performance.now() - started };
}

export interface ClosedLoopOptions {
  concurrency: number;
  warmupMs: number;
  durationMs: number;
  /** Called at the start and the end of the measured window (resource sampling). */
  onWindow?: (edge: "start" | "end") => void;
}

export interface ClosedLoopResult {
  completed: number;
  errors: number;
  firstError: string | undefined;
  elapsedMs: number;
  qps: number;
  /** Latencies of the queries that started and finished inside the window, ms. */
  latencies: number[];
}

export async function closedLoop(target: Target, options: ClosedLoopOptions): Promise<ClosedLoopResult> {
  const t0 = performance.now();
  const windowStart = t0 + options.warmupMs;
  const windowEnd = windowStart + options.durationMs;
  let completed = 0;
  let errors = 0;
  let firstError: string | undefined;
  const latencies: number[] = [];
  let started = false;
  let ended = false;
  const startTimer = setTimeout(() => {
    started = true;
    options.onWindow?.("start");
  }, options.warmupMs);
  const endTimer = setTimeout(() => {
    ended = true;
    options.onWindow?.("end");
  }, options.warmupMs + options.durationMs);
  const client = async (): Promise<void> => {
    while (performance.now() < windowEnd) {
      const s = performance.now();
      try {
        await target();
        const e = performance.now();
        if (e >= windowStart && e < windowEnd) {
          completed++;
          if (s >= windowStart) latencies.push(e - s);
        }
      } catch (err) {
        errors++;
        firstError ??= (err as Error).message.slice(0, 300);
        // Back off a little: a fast error reply must not turn the client into a busy loop.
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: options.concurrency }, client));
  } finally {
    clearTimeout(startTimer);
    clearTimeout(endTimer);
    if (!started) options.onWindow?.("start");
    if (!ended) options.onWindow?.("end");
  }
  return { completed, errors, firstError, elapsedMs: options.durationMs, qps: completed / (options.durationMs / 1000), latencies };
}

/** Runs `fn` back to back for `durationMs` after `warmupMs`; returns calls per second. */
export async function backToBack(fn: () => Promise<unknown>, options: { warmupMs: number; durationMs: number }): Promise<{ callsPerS: number; calls: number; msPerCall: number[] }> {
  const t0 = performance.now();
  while (performance.now() - t0 < options.warmupMs) await fn();
  const start = performance.now();
  const msPerCall: number[] = [];
  while (performance.now() - start < options.durationMs) {
    const s = performance.now();
    await fn();
    msPerCall.push(performance.now() - s);
  }
  const elapsed = performance.now() - start;
  return { callsPerS: msPerCall.length / (elapsed / 1000), calls: msPerCall.length, msPerCall };
}
