/**
 * The function path's circuit breakers (DESIGN §3 "Serverless overflow": functions behind an `opossum`
 * circuit breaker; if the function path is down too, a clear error).
 *
 * `BreakerFunctionProvider` wraps one provider in its own opossum CircuitBreaker:
 * - **closed**: calls go through. Each is bounded by the query's deadline or `capMs`, whichever comes
 *   first (opossum's own timeout is per breaker, not per call, so the bound is applied here; a call past
 *   it fails with `deadline_exceeded` and its late answer is logged and dropped). A query whose deadline
 *   has already passed is refused without calling (not counted).
 * - **open** once, within the rolling window (`rollingWindowMs`), at least `volumeThreshold` calls were
 *   made and more than `errorThresholdPercentage` % of them failed. Errors that blame the query
 *   (`isCallerFault`: malformed or mismatched inputs) are not failures of the provider and don't count.
 *   While open, calls are refused at once with `overflow_unavailable` (HTTP 503).
 * - **half-open** `resetTimeoutMs` after opening: one trial call goes through (others are still refused);
 *   its success closes the breaker, its failure opens it again for another `resetTimeoutMs`.
 * Transitions are logged and published to listeners (`onStateChange`) with a reason, for metrics.
 *
 * `FallbackFunctionProvider` tries providers in order (e.g. lambda → local, each behind its breaker):
 * the next one when the previous is open or failed for a reason that is not the query's, while the
 * deadline allows; when all fail, one error naming each provider's failure (`overflow_unavailable`, or
 * `deadline_exceeded` when the time ran out).
 */
import CircuitBreaker from "opossum";
import { ErrorCode, ServeError, type Clock } from "@sloserve/contracts";
import type { Logger } from "@sloserve/bus";
import { isCallerFault } from "./function-handler.js";
import type { FunctionProvider, FunctionRequest, FunctionResult, PrewarmOptions } from "./types.js";
import { BREAKER_DEFAULTS, type BreakerOptions } from "./defaults.js";

export type BreakerState = "closed" | "open" | "half-open";

export interface BreakerStateChange {
  provider: string;
  state: BreakerState;
  atMs: number;
  reason: string;
}

function isBreakerRejection(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === "EOPENBREAKER" || code === "ESHUTDOWN";
}

export class BreakerFunctionProvider implements FunctionProvider {
  readonly name: string;
  private readonly breaker: CircuitBreaker<[FunctionRequest], FunctionResult>;
  private readonly config: Required<BreakerOptions>;
  private readonly listeners = new Set<(change: BreakerStateChange) => void>();
  private lastFailure = "none";
  private opened = 0;
  /** Whether the breaker is half-open (the next failure re-opens it). */
  private trial = false;

  constructor(
    readonly inner: FunctionProvider,
    private readonly options: BreakerOptions & { clock: Clock; log: Logger },
  ) {
    this.name = inner.name;
    this.config = {
      capMs: options.capMs ?? BREAKER_DEFAULTS.capMs,
      errorThresholdPercentage: options.errorThresholdPercentage ?? BREAKER_DEFAULTS.errorThresholdPercentage,
      volumeThreshold: options.volumeThreshold ?? BREAKER_DEFAULTS.volumeThreshold,
      resetTimeoutMs: options.resetTimeoutMs ?? BREAKER_DEFAULTS.resetTimeoutMs,
      rollingWindowMs: options.rollingWindowMs ?? BREAKER_DEFAULTS.rollingWindowMs,
    };
    this.breaker = new CircuitBreaker((request: FunctionRequest) => this.bounded(request), {
      name: `functions-${inner.name}`,
      timeout: false,
      errorThresholdPercentage: this.config.errorThresholdPercentage,
      volumeThreshold: this.config.volumeThreshold,
      resetTimeout: this.config.resetTimeoutMs,
      rollingCountTimeout: this.config.rollingWindowMs,
      errorFilter: (err: unknown) => err instanceof ServeError && isCallerFault(err.code),
    });
    this.breaker.on("failure", (err: unknown) => {
      this.lastFailure = err instanceof Error ? err.message : String(err);
    });
    this.breaker.on("open", () => {
      this.opened++;
      const s = this.breaker.stats;
      const why = this.trial
        ? `the half-open trial call failed: ${this.lastFailure}`
        : `${s.failures} of ${s.fires} calls failed in the last ${this.config.rollingWindowMs} ms (threshold ${this.config.errorThresholdPercentage}%, at least ${this.config.volumeThreshold} calls); last: ${this.lastFailure}`;
      this.trial = false;
      this.emit("open", why);
    });
    this.breaker.on("halfOpen", () => {
      this.trial = true;
      this.emit("half-open", `${this.config.resetTimeoutMs} ms open: the next call is a trial`);
    });
    this.breaker.on("close", () => {
      this.trial = false;
      this.emit("closed", "a trial call succeeded");
    });
  }

  private emit(state: BreakerState, reason: string): void {
    const change: BreakerStateChange = { provider: this.name, state, atMs: this.options.clock.now(), reason };
    const level = state === "open" ? "warn" : "info";
    this.options.log[level]({ provider: this.name, state, reason }, "function circuit breaker");
    for (const l of this.listeners) l(change);
  }

  get state(): BreakerState {
    if (this.breaker.opened) return "open";
    if (this.breaker.halfOpen) return "half-open";
    return "closed";
  }

  /** Listens to state changes (open, half-open, closed); returns the function that stops listening. */
  onStateChange(listener: (change: BreakerStateChange) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Counts of the current rolling window and how often the breaker opened. */
  breakerStats(): { state: BreakerState; fires: number; failures: number; rejects: number; successes: number; opened: number } {
    const s = this.breaker.stats;
    return { state: this.state, fires: s.fires, failures: s.failures, rejects: s.rejects, successes: s.successes, opened: this.opened };
  }

  /** The call, bounded by the query's deadline or capMs. */
  private bounded(request: FunctionRequest): Promise<FunctionResult> {
    const budgetMs = request.deadlineMs - this.options.clock.now();
    const limitMs = Math.max(0, Math.min(budgetMs, this.config.capMs));
    const why = limitMs === this.config.capMs ? `the ${this.config.capMs} ms cap` : "the query's deadline";
    const call = this.inner.invoke(request);
    return new Promise<FunctionResult>((resolveCall, rejectCall) => {
      let late = false;
      const timer = setTimeout(() => {
        late = true;
        rejectCall(new ServeError(ErrorCode.deadlineExceeded, `function provider "${this.name}" did not answer within ${limitMs} ms (${why})`));
      }, limitMs);
      call.then(
        (result) => {
          clearTimeout(timer);
          if (late) this.options.log.info({ provider: this.name, requestId: request.requestId, durationMs: result.durationMs }, "late function answer dropped");
          else resolveCall(result);
        },
        (err: unknown) => {
          clearTimeout(timer);
          if (late) this.options.log.info({ err, provider: this.name, requestId: request.requestId }, "late function failure dropped");
          else rejectCall(err);
        },
      );
    });
  }

  async invoke(request: FunctionRequest): Promise<FunctionResult> {
    const budgetMs = request.deadlineMs - this.options.clock.now();
    if (budgetMs <= 0) throw new ServeError(ErrorCode.deadlineExceeded, `the query's deadline passed ${-budgetMs} ms before it was sent to function provider "${this.name}"`);
    try {
      return await this.breaker.fire(request);
    } catch (err) {
      if (isBreakerRejection(err)) throw this.unavailable();
      throw err;
    }
  }

  private unavailable(): ServeError {
    const state = this.state;
    const why =
      state === "half-open"
        ? "its circuit breaker is half-open and a trial call is in flight"
        : this.breaker.isShutdown
          ? "it is closed"
          : `its circuit breaker is open (last failure: ${this.lastFailure}); a trial call is let through ${this.config.resetTimeoutMs} ms after it opened`;
    return new ServeError(ErrorCode.overflowUnavailable, `function provider "${this.name}" is unavailable: ${why}`, { provider: this.name, state });
  }

  /** Pre-warms through the provider unless the breaker is open (then refused like a call). */
  async prewarm(n: number, options?: PrewarmOptions): Promise<void> {
    if (this.state !== "closed") throw this.unavailable();
    await this.inner.prewarm(n, options);
  }

  stats(): { invocations: number; coldStarts: number; errors: number; costDollars: number } {
    return this.inner.stats();
  }

  async close(): Promise<void> {
    this.breaker.shutdown();
    await this.inner.close();
  }
}

export interface FallbackAttempt {
  provider: string;
  code: ErrorCode;
  message: string;
}

export class FallbackFunctionProvider implements FunctionProvider {
  readonly name: string;

  constructor(
    readonly providers: readonly FunctionProvider[],
    private readonly options: { clock: Clock; log: Logger },
  ) {
    if (providers.length === 0) throw new Error("FallbackFunctionProvider needs at least one provider");
    this.name = providers.map((p) => p.name).join(">");
  }

  async invoke(request: FunctionRequest): Promise<FunctionResult> {
    const attempts: FallbackAttempt[] = [];
    for (const [i, provider] of this.providers.entries()) {
      if (this.options.clock.now() >= request.deadlineMs) break;
      try {
        const result = await provider.invoke(request);
        if (attempts.length > 0) this.options.log.info({ provider: provider.name, requestId: request.requestId, attempts }, "function fallback served the query");
        return result;
      } catch (err) {
        if (err instanceof ServeError && isCallerFault(err.code)) throw err;
        const failure = err instanceof ServeError ? { code: err.code, message: err.message } : { code: ErrorCode.internal, message: String((err as Error)?.message ?? err) };
        attempts.push({ provider: provider.name, ...failure });
        const nextProvider = this.providers[i + 1]?.name ?? null;
        this.options.log.warn({ provider: provider.name, next: nextProvider, requestId: request.requestId, code: failure.code, err }, "function provider failed");
      }
    }
    const tried = attempts.map((a) => `${a.provider}: ${a.message}`).join("; ");
    const outOfTime = this.options.clock.now() >= request.deadlineMs;
    if (outOfTime) {
      throw new ServeError(ErrorCode.deadlineExceeded, `overflow ran out of time before a function answered${tried ? ` (${tried})` : ""}`, { attempts });
    }
    throw new ServeError(ErrorCode.overflowUnavailable, `overflow failed on every function provider (${tried})`, { attempts });
  }

  /** Pre-warms the first provider that takes it (a breaker that is open refuses). */
  async prewarm(n: number, options?: PrewarmOptions): Promise<void> {
    const failures: string[] = [];
    for (const provider of this.providers) {
      try {
        await provider.prewarm(n, options);
        return;
      } catch (err) {
        failures.push(`${provider.name}: ${(err as Error).message}`);
        this.options.log.warn({ err, provider: provider.name, n }, "pre-warm failed; trying the next provider");
      }
    }
    throw new ServeError(ErrorCode.overflowUnavailable, `pre-warm failed on every function provider (${failures.join("; ")})`);
  }

  stats(): { invocations: number; coldStarts: number; errors: number; costDollars: number } {
    const total = { invocations: 0, coldStarts: 0, errors: 0, costDollars: 0 };
    for (const p of this.providers) {
      const s = p.stats();
      total.invocations += s.invocations;
      total.coldStarts += s.coldStarts;
      total.errors += s.errors;
      total.costDollars += s.costDollars;
    }
    return total;
  }

  async close(): Promise<void> {
    const results = await Promise.allSettled(this.providers.map((p) => p.close()));
    for (const [i, r] of results.entries()) {
      if (r.status === "rejected") this.options.log.warn({ err: r.reason, provider: this.providers[i]?.name }, "closing a function provider failed");
    }
  }
}
