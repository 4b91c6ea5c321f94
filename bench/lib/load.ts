/**
 * Load generators. Every loop is bounded by a count and a time limit.
 *
 * - {@link interleaved}: low-load latency. One query at a time; each round sends one query to every
 *   target (in a rotating order), so that all targets see the same machine conditions.
 * - {@link closedLoop}: saturated throughput. N clients, each sending its next query as soon as the
 *   previous one is answered, for a fixed time after a warm-up.
 * - {@link poissonOpenLoop}: the server scenario's step. Queries sent at Poisson arrival times (seeded),
 *   whether or not the earlier ones are answered.
 */
import { ScheduledArrivals, arrivalTimes, createRng, quantileSorted } from "@sloserve/policy";

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

export interface OpenLoopOptions {
  /** Mean arrival rate, queries/s. */
  qps: number;
  /** How long queries are sent, ms. */
  durationMs: number;
  /** Answers are awaited this long after the last send; a query still unanswered then is late (its latency counts as infinite). */
  graceMs: number;
  /** Seed of the arrival times (libs/policy createRng): the same seed and rate give the same times. */
  seed: number;
  /** Once judged, wait up to this long for the late queries to settle, so that the next step starts without their backlog. @default 10000 */
  drainMs?: number;
}

export interface OpenLoopResult {
  qps: number;
  sent: number;
  /** Answered before the step's end + grace. */
  answered: number;
  /** Failed (an error answer, or the request failed): counted as over any bound. */
  failed: number;
  firstError?: string;
  /** Not answered before the step's end + grace: counted as over any bound. */
  late: number;
  /** Over every query sent, failed and late ones as infinite; ms from each query's scheduled arrival time. */
  p50Ms: number;
  p99Ms: number;
  /** How late the load generator sent its queries behind their arrival times, p99, ms (it shares the machine). */
  sendLagP99Ms: number;
  /** Queries still unanswered once the drain wait ended (they may still load the next step). */
  undrained: number;
}

/**
 * One open-loop step: queries at the arrival times of a Poisson process at `qps` (libs/policy
 * ScheduledArrivals with CV 1, seeded), each sent at its time whether or not the earlier ones are
 * answered. Latency is measured from each query's scheduled arrival time, as MLPerf's LoadGen does, so
 * that a load generator falling behind does not hide the queueing it would have seen. A timer fires
 * every query that is due (timers have millisecond granularity: queries due within the same
 * millisecond leave together).
 */
export async function poissonOpenLoop(target: Target, options: OpenLoopOptions): Promise<OpenLoopResult> {
  const times = arrivalTimes(new ScheduledArrivals({ binMs: options.durationMs, rates: [options.qps] }, 1), createRng(options.seed));
  const n = times.length;
  const latency = new Float64Array(n).fill(Infinity);
  const lag = new Float64Array(n);
  let settled = 0;
  let failed = 0;
  let firstError: string | undefined;
  let wake: (() => void) | undefined;
  const t0 = performance.now() + 2;
  const fire = (k: number, now: number): void => {
    const due = t0 + (times[k] as number);
    lag[k] = now - due;
    void target().then(
      () => {
        latency[k] = performance.now() - due;
      },
      (err: unknown) => {
        failed++;
        firstError ??= (err as Error).message.slice(0, 300);
      },
    ).finally(() => {
      settled++;
      if (settled === n) wake?.();
    });
  };
  await new Promise<void>((sent) => {
    let i = 0;
    const tick = (): void => {
      const now = performance.now();
      while (i < n && t0 + (times[i] as number) <= now) fire(i++, now);
      if (i >= n) return sent();
      setTimeout(tick, Math.max(0, t0 + (times[i] as number) - performance.now()));
    };
    tick();
  });
  // Judged at the step's end + grace, or as soon as every query has settled.
  const cutoff = t0 + options.durationMs + options.graceMs;
  const waitFor = async (until: number): Promise<void> => {
    if (settled === n) return;
    await new Promise<void>((done) => {
      const timer = setTimeout(done, Math.max(0, until - performance.now()));
      wake = () => {
        clearTimeout(timer);
        done();
      };
    });
    wake = undefined;
  };
  await waitFor(cutoff);
  // A query answered after the cutoff (the timer may wake a little late) is late as well: infinite.
  const judged = new Float64Array(n);
  let answered = 0;
  for (let k = 0; k < n; k++) {
    const ms = latency[k] as number;
    const inTime = Number.isFinite(ms) && t0 + (times[k] as number) + ms <= cutoff;
    judged[k] = inTime ? ms : Infinity;
    if (inTime) answered++;
  }
  judged.sort();
  const failedInTime = failed;
  const late = n - answered - failedInTime;
  await waitFor(performance.now() + (options.drainMs ?? 10_000));
  const lags = lag.sort();
  return {
    qps: options.qps,
    sent: n,
    answered,
    failed: failedInTime,
    ...(firstError !== undefined ? { firstError } : {}),
    late,
    p50Ms: n > 0 ? quantileSorted(judged, 0.5) : NaN,
    p99Ms: n > 0 ? quantileSorted(judged, 0.99) : NaN,
    sendLagP99Ms: n > 0 ? quantileSorted(lags, 0.99) : NaN,
    undrained: n - settled,
  };
}
