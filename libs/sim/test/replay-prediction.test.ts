import { describe, expect, expectTypeOf, it } from "vitest";
import { calibrationSchema, type Calibration } from "@sloserve/contracts";
import { REPLAY_DEFAULT_PROFILE, drawSeed, ensembleSummary, predictReplay, replayArrivals, replayConfig, replayPredictionInput, replaySchedule, runReplaySim, type ReplayPredictionInput } from "../src/index.js";

/**
 * The live replay predicted from a calibration file alone (scenarios/replay.ts `predictReplay`): the
 * simulator's machines slow down with its own demand (the calibration's contention points), each
 * launch boots for a drawn sample, functions and reports as calibrated, the selected variant preloaded.
 */

const variant = { ...REPLAY_DEFAULT_PROFILE, latencyMs: { "1": 14 } };

/** A small synthetic calibration: the default MLP, a host that slows down with demand (or not: `flat`). */
function calibration(flat = false): Calibration {
  return calibrationSchema.parse({
    version: 1,
    date: "2026-01-01T00:00:00Z",
    command: "test",
    host: { cores: 2, memoryBytes: 8e9, loadAverage: [0, 0, 0] },
    backend: "emulated",
    app: "heavy",
    variants: [variant],
    emulation: {},
    contention: flat
      ? [{ demand: 0, booting: 0, slowdown: 1, p50Ratio: 1, samples: 10 }]
      : [
          { demand: 0, booting: 0, slowdown: 1, p50Ratio: 0.9, samples: 10 },
          { demand: 1, booting: 0, slowdown: 2.5, p50Ratio: 2, samples: 10 },
        ],
    bootMs: [4000, 5000, 6500],
    functions: { coldStartMs: [1800, 2200, 2500], warmMs: [15, 20, 60] },
    reports: { periodMs: 1000, jitterMs: 30 },
    workerMemoryBytes: 4e9,
  });
}

/** 300 trace minutes at 144× (125 s): 15 q/s with 10 minutes (4.2 s) at `peak` q/s (60: under the variant's 71 q/s). */
function window(peak = 60): { config: ReturnType<typeof replayConfig>; arrivalsMs: number[]; durationMs: number } {
  const counts = Array.from({ length: 300 }, (_, m) => (m >= 150 && m < 160 ? peak : 15) * 60);
  const config = replayConfig({ speedup: 144, app: "heavy", sloMs: 1000, minAccuracy: 0 });
  const s = replaySchedule({ binMs: 60_000, counts }, { startMinute: 0, minutes: 300, peakQps: peak }, config.speedup);
  return { config, arrivalsMs: replayArrivals(s, 1), durationMs: s.durationMs };
}

describe("replay: prediction from a calibration", () => {
  it("replay - the prediction's input is the calibration, the settings and the arrivals: nothing measured of the run", () => {
    expectTypeOf<keyof ReplayPredictionInput>().toEqualTypeOf<"calibration" | "config" | "arrivalsMs" | "durationMs" | "seed" | "settleQps" | "draws">();
    const { config, arrivalsMs, durationMs } = window();
    const cal = calibration();
    const input = replayPredictionInput({ calibration: cal, config: { ...config, staticWorkers: 2 }, arrivalsMs, durationMs, seed: 1 });
    for (const live of ["slowdown", "observedFactor", "startUtilization", "reportTimesMs"]) expect(input).not.toHaveProperty(live);
    // Nothing loaded and the function pool cold: the prelude (warm-up, burst, settling) loads and starts them.
    expect(input.preload).toBeUndefined();
    expect(input.functionsWarm).toBeUndefined();
    expect(input.prelude!.windowStartMs % 1000).toBe(0);
    expect(input.prelude!.arrivalsMs.every((t) => t < input.prelude!.windowStartMs)).toBe(true);
    expect(input.contention).toBe(cal.contention);
    expect(input.bootMsSamples).toEqual([4000, 5000, 6500]);
    expect(input.bootMs).toBe(5000);
    expect(input.functionColdStartMs).toBe(2200);
    expect(input.functionWarmMs).toBeCloseTo(95 / 3, 12);
    expect(input.reportPeriod).toEqual({ periodMs: 1000, jitterMs: 30 });
    expect(input.workerMemoryBytes).toBe(4e9);
    expect(input.variants[0]?.latencyMs).toEqual({ 1: 14 });
    // Without function samples: the defaults (2000 ms cold, the variant's batch-1 latency warm).
    const bare = replayPredictionInput({ calibration: { ...cal, functions: { coldStartMs: [], warmMs: [] } }, config, arrivalsMs, durationMs, seed: 1 });
    expect([bare.functionColdStartMs, bare.functionWarmMs]).toEqual([2000, 14]);
    // A calibration of another app predicts nothing.
    expect(() => replayPredictionInput({ calibration: cal, config: { ...config, app: "digits" }, arrivalsMs, durationMs, seed: 1 })).toThrow(/no profiled CPU variant of app digits/);
  });

  it("replay - the prediction runs, is deterministic per seed, and slows the machines with their own demand", () => {
    const { config, arrivalsMs, durationMs } = window();
    const p = { calibration: calibration(), config, arrivalsMs, durationMs, seed: 1 };
    const a = predictReplay(p);
    expect(a.summary.queries).toBe(arrivalsMs.length);
    expect(a.summary.answered + a.summary.failed).toBe(arrivalsMs.length);
    expect(predictReplay(p)).toEqual(a);
    const seconds = Math.ceil(durationMs / 1000);
    const c = a.contention!;
    expect(c.demand.length).toBe(seconds);
    // 15 q/s × 14 ms ≈ 0.21 CPU-s/s: 1 + 1.5 × 0.21 ≈ 1.3× slower; the burst's seconds much more.
    const quiet = c.demand.slice(10, 60);
    const meanQuiet = quiet.reduce((s, x) => s + x, 0) / quiet.length;
    expect(meanQuiet).toBeGreaterThan(0.15);
    expect(meanQuiet).toBeLessThan(0.3);
    // (one booting level measured: a second with a worker booting reads it too)
    for (let i = 0; i < seconds; i++) {
      expect(c.slowdown[i]).toBeCloseTo(1 + 1.5 * Math.min(1, c.demand[i]!), 9);
      expect(c.observedFactor[i]! * c.slowdown[i]!).toBeCloseTo(0.9 + 1.1 * Math.min(1, c.demand[i]!), 9);
    }
    // The burst's 60 q/s (0.84 CPU-s/s as profiled) slows the one worker until it serves less: at
    // slowdown s it does at most 1/s of its profiled work, so the feedback settles near 1 + 1.5/s ≈ 1.8.
    expect(Math.max(...c.slowdown)).toBeGreaterThan(1.6);
    expect(c.booting.some((b) => b > 0)).toBe(true);
  });

  it("replay - the demand the model reads is the machines' busy time at profiled batch times", () => {
    // A flat host: every batch as profiled (14 ms), so the demand summed over the window is the work
    // the workers did: the queries they answered × 14 ms.
    const { config, arrivalsMs, durationMs } = window();
    const r = predictReplay({ calibration: calibration(true), config, arrivalsMs: arrivalsMs.filter((t) => t < durationMs - 5000), durationMs, seed: 1 });
    const byWorkers = r.summary.answered - Math.round(r.summary.overflow_share * r.summary.queries);
    const demand = r.contention!.demand.reduce((s, x) => s + x, 0);
    expect(demand).toBeCloseTo((byWorkers * 14) / 1000, 1);
  });

  it("replay - a host that slows down with demand predicts a higher p99 and a lower SLO attainment than a flat one, on the same arrivals", () => {
    const { config, arrivalsMs, durationMs } = window();
    // (the burst: the flat host answers it within ~100 ms; the busy one runs its worker ~1.8× slower,
    // past what it serves, until the launched worker is up)
    for (const seed of [1, 2, 3]) {
      const flat = predictReplay({ calibration: calibration(true), config, arrivalsMs, durationMs, seed });
      const busy = predictReplay({ calibration: calibration(), config, arrivalsMs, durationMs, seed });
      expect(busy.summary.p99_ms, `seed ${seed}`).toBeGreaterThan(2 * flat.summary.p99_ms);
      expect(busy.summary.slo_attainment, `seed ${seed}`).toBeLessThan(flat.summary.slo_attainment);
    }
  });

  it("replay - each launch boots for a drawn sample, its process starting after the boot delay: the seconds read booting add up", () => {
    const { config, arrivalsMs, durationMs } = window();
    expect(config.bootDelayMs).toBe(417);
    const base = replayPredictionInput({ calibration: calibration(), config, arrivalsMs, durationMs, seed: 1 });
    for (const bootS of [3, 8]) {
      const r = runReplaySim({ ...base, bootMsSamples: [bootS * 1000] });
      expect(r.launches.length).toBeGreaterThan(0);
      // A launch at a whole second t starts its process at t + 0.417 s: read booting at the seconds
      // t + 1 … t + bootS − 1 (and at t + bootS when its readiness comes after the reading); near the end, fewer.
      // (those held past their boot: a launch given back while it boots stops being read)
      const inside = r.launches.filter((l) => l.at_s + bootS + 1 < durationMs / 1000 && l.held_s >= bootS + 1).length;
      const booting = r.contention!.booting.reduce((s, x) => s + x, 0);
      expect(booting).toBeGreaterThanOrEqual((bootS - 1) * inside);
      expect(booting).toBeLessThanOrEqual(bootS * r.launches.length);
    }
  });

  it("replay - launches booting together draw from the samples of as many launched together (the calibration's groupBoots)", () => {
    // A burst that three workers serve.
    const { config, arrivalsMs, durationMs } = window(250);
    const base = { ...replayPredictionInput({ calibration: calibration(true), config, arrivalsMs, durationMs, seed: 1 }), bootMsSamples: [3000] };
    const alone = runReplaySim(base);
    const together = runReplaySim({ ...base, bootGroupSamples: [{ together: 3, ms: 9000 }] });
    // The three launched in one tick.
    const at = alone.launches.map((l) => l.at_s);
    expect(at).toHaveLength(3);
    expect(new Set(at).size).toBe(1);
    expect(together.launches.map((l) => l.at_s)).toEqual(at);
    const booting = (r: typeof alone): number => r.contention!.booting.reduce((s, x) => s + x, 0);
    // Seconds read booting: about each boot less the delay before its process starts. Alone, 3 × 2-3 s;
    // together, three booting: each draws 3's sample, 9 s: 3 × 8-9 s.
    expect(booting(alone)).toBeLessThanOrEqual(3 * 3);
    expect(booting(together)).toBeGreaterThanOrEqual(3 * 8);
    expect(booting(together)).toBeLessThanOrEqual(3 * 9);
  });

  it("replay - a function runs the sampled duration less the sampled variant's latency plus its own (the calibration's functions.variant)", () => {
    // A burst past what one worker serves: queries overflow to functions from the app's variant (14 ms).
    const { config, arrivalsMs, durationMs } = window(150);
    const base = { ...replayPredictionInput({ calibration: calibration(true), config, arrivalsMs, durationMs, seed: 1 }), functionWarmMsSamples: [30] };
    const plain = runReplaySim(base);
    // Samples taken with a 4 ms variant: an invocation of the 14 ms one runs 30 − 4 + 14 = 40 ms.
    const sampled = { ...variant, name: "sampled-elsewhere", app: "elsewhere", latencyMs: { "1": 4 } };
    const shifted = runReplaySim({ ...base, variants: [...base.variants, sampled], functionWarmMsVariant: sampled.name });
    expect(plain.summary.overflow_share).toBeGreaterThan(0);
    expect(shifted.summary.overflow_share).toBeCloseTo(plain.summary.overflow_share, 2);
    // Money sums durations (cold starts add the same to both): 40 / 30 on the warm ones.
    expect(shifted.summary.function_dollars).toBeGreaterThan(1.2 * plain.summary.function_dollars);
    expect(shifted.summary.function_dollars).toBeLessThan(1.4 * plain.summary.function_dollars);
  });

  it("replay - the contention model reads the machines serving: a second worker up slows them at the same demand", () => {
    // A host flat in demand whose batches run 1× on one worker, 2× on two, 3× on three or more; a
    // burst above what one worker serves.
    const { config, arrivalsMs, durationMs } = window(150);
    const levels = [1, 2, 3].flatMap((workers) => [0, 1].map((demand) => ({ demand, booting: 0, slowdown: workers, p50Ratio: workers, samples: 10, workers })));
    const r = predictReplay({ calibration: { ...calibration(), contention: levels }, config, arrivalsMs, durationMs, seed: 1 });
    const c = r.contention!;
    const seconds = Math.ceil(durationMs / 1000);
    expect(c.workers.length).toBe(seconds);
    expect(c.workers[0]).toBe(config.staticWorkers);
    // (the burst launches workers: once one is up, two serve)
    expect(r.launches.length).toBeGreaterThan(0);
    expect(Math.max(...c.workers)).toBeGreaterThan(config.staticWorkers);
    for (let i = 0; i < seconds; i++) expect(c.slowdown[i], `second ${i}`).toBe(Math.min(3, Math.max(1, c.workers[i]!)));
    // The machines the heartbeats count a second later are those the model read (up, or draining what they hold).
    for (let i = 1; i < seconds; i++) expect(Math.abs(c.workers[i]! - r.series.workers[i - 1]!), `second ${i}`).toBeLessThanOrEqual(1);
  });

  it("replay - the prelude: the window starts from the state the warm-up, burst and settling leave", () => {
    const { config, arrivalsMs, durationMs } = window();
    const r = predictReplay({ calibration: calibration(), config, arrivalsMs, durationMs, seed: 1, settleQps: 50 });
    const p = r.prelude;
    // 20 warm-up queries, the burst (3 SLOs of the variant's 71 q/s peak), then at least 3000 at 50/s (or the window's own count)
    expect(p.warmupQueries).toBe(20);
    expect(p.burstQueries).toBe(Math.ceil(3 * variant.peakQps));
    expect(p.settleQueries).toBeGreaterThanOrEqual(Math.min(3000, arrivalsMs.length));
    expect(p.arrivalsMs.length).toBe(p.warmupQueries + p.burstQueries + p.settleQueries);
    // settling at 50/s takes its queries / 50 s, and the window waits at least 5 s more for the fleet
    const settleStart = p.arrivalsMs[p.warmupQueries + p.burstQueries]!;
    expect(p.arrivalsMs.at(-1)! - settleStart).toBeCloseTo(((p.settleQueries - 1) * 1000) / 50, 6);
    expect(p.windowStartMs).toBeGreaterThanOrEqual(p.arrivalsMs.at(-1)! + 5000);
    // the variant is loaded when the window starts, and only the window's queries are counted
    expect(Object.keys(p.instanceStates)).toEqual([`${variant.name}@cpu-0`]);
    expect(r.summary.queries).toBe(arrivalsMs.length);
    expect(r.series.load.reduce((a, b) => a + b, 0)).toBe(arrivalsMs.length);
  });

  it("replay - an ensemble prediction is the mean of its runs, each drawing the calibrated distributions anew", () => {
    const { config, arrivalsMs, durationMs } = window();
    const p = { calibration: calibration(), config, arrivalsMs, durationMs, seed: 3 };
    const one = predictReplay(p);
    const three = predictReplay({ ...p, draws: 3 });
    expect(three.draws.map((d) => d.seed)).toEqual([3, drawSeed(3, 1), drawSeed(3, 2)]);
    expect(three.draws[0]!.cost_dollars).toBe(one.summary.cost_dollars);
    const runs = [0, 1, 2].map((k) => predictReplay({ ...p, seed: drawSeed(3, k) }).summary);
    expect(three.summary).toEqual(ensembleSummary(runs));
    expect(three.summary.cost_dollars).toBeCloseTo(runs.reduce((a, r) => a + r.cost_dollars, 0) / 3, 12);
    expect(three.series).toEqual(one.series);
  });

  it("replay - a series given wins over the contention model (the consistency mode)", () => {
    const { config, arrivalsMs, durationMs } = window();
    const base = replayPredictionInput({ calibration: calibration(), config, arrivalsMs, durationMs, seed: 1 });
    const seconds = Math.ceil(durationMs / 1000);
    const slowdown = Array.from({ length: seconds }, (_, i) => 1 + (i % 3) / 10);
    const r = runReplaySim({ ...base, slowdown, observedFactor: 0.8 });
    expect(r.contention!.slowdown).toEqual(slowdown);
    expect(new Set(r.contention!.observedFactor)).toEqual(new Set([0.8]));
    // without a contention model, no such series
    const { contention: _model, ...noModel } = base;
    expect(runReplaySim(noModel).contention).toBeUndefined();
  });
});
