import { describe, expect, it } from "vitest";
import { REPLAY_DEFAULT_PROFILE, replayArrivals, replayConfig, replayLaunches, replaySchedule, runReplaySim, traceDollars } from "../src/index.js";

/**
 * The live replay's simulator side (scenarios/replay.ts) and the launch-by-launch account both sides
 * of replay.json get (`launches`): every launched machine with the decision that launched it, how long
 * it was billed inside the window and what that cost in trace time.
 */

/** The simulator's side with the default profile loaded on the stack's one worker. */
function oneWorker(config: ReturnType<typeof replayConfig>, arrivalsMs: number[], durationMs: number, extra: Partial<Parameters<typeof runReplaySim>[0]> = {}): ReturnType<typeof runReplaySim> {
  return runReplaySim({
    config,
    arrivalsMs,
    durationMs,
    variants: [REPLAY_DEFAULT_PROFILE],
    preload: [{ variant: REPLAY_DEFAULT_PROFILE.name, count: 1 }],
    bootMs: 1900,
    functionColdStartMs: 2000,
    functionWarmMs: 20,
    seed: 1,
    ...extra,
  });
}

describe("replay: launch by launch", () => {
  it("replay - each machine is attributed to the launch decision before it, and the launches sum to machine_dollars", () => {
    const price = 0.17;
    const machines = [
      { kind: "cpu", pricePerHour: price, launchedAtMs: 500, endedAtMs: 1500 }, // before the window, billed 500 ms in it
      { kind: "cpu", pricePerHour: price, launchedAtMs: 1000 + 4000, endedAtMs: 1000 + 10_000 },
      { kind: "cpu", pricePerHour: price, launchedAtMs: 1000 + 20_000, endedAtMs: null }, // to the window's end
      { kind: "cpu", pricePerHour: price, launchedAtMs: 0, endedAtMs: 900 }, // ended before the window: not listed
    ];
    const decisions = [
      { atMs: 400, kind: "cpu", reason: "SLO monitor: warm-up" },
      { atMs: 1000 + 4000, kind: "cpu", reason: "INFaaS: utilisation" },
      { atMs: 1000 + 19_990, kind: "gpu", reason: "another kind" },
    ];
    const got = replayLaunches(machines, decisions, 144, 1000, 1000 + 30_000);
    expect(got.map((l) => [l.at_s, l.held_s, l.reason])).toEqual([
      [-0.5, 0.5, "SLO monitor: warm-up"],
      [4, 6, "INFaaS: utilisation"],
      [20, 10, "INFaaS: utilisation"],
    ]);
    const sum = got.reduce((s, l) => s + l.dollars, 0);
    expect(sum).toBeCloseTo(traceDollars(machines, 144, 1000, 1000 + 30_000), 12);
  });

  it("replay - a burst's launch is billed at least the cool-down on the simulator's side, and the account adds up", () => {
    // 300 trace minutes at 144× (125 s): 15 q/s, and 10 minutes (4.2 s) at 70 q/s, near the one
    // worker's profiled peak (71 q/s) → INFaaS launches; the plan (forecast ≈ 0.3 worker) gives each
    // launch back only once its cool-down (5.417 s) is over.
    const counts = Array.from({ length: 300 }, (_, m) => (m >= 150 && m < 160 ? 70 : 15) * 60);
    const config = replayConfig({ speedup: 144, app: "heavy", sloMs: 1000, minAccuracy: 0 });
    const s = replaySchedule({ binMs: 60_000, counts }, { startMinute: 0, minutes: 300, peakQps: 70 }, config.speedup);
    const r = oneWorker(config, replayArrivals(s, 1), s.durationMs);
    expect(r.summary.launches).toBeGreaterThan(0);
    expect(r.launches.length).toBe(r.summary.launches);
    for (const l of r.launches) {
      expect(l.held_s, JSON.stringify(l)).toBeGreaterThanOrEqual(config.cooldownMs / 1000);
      expect(l.reason).toMatch(/INFaaS|SLO monitor|predictive/);
    }
    expect(r.launches.reduce((sum, l) => sum + l.dollars, 0)).toBeCloseTo(r.summary.machine_dollars, 12);
  });

  it("replay - the VM tick reads the worker reports since its last tick: a burst's reading depends on their phase", () => {
    // 20 q/s, and 1.5 s at the worker's profiled peak (one query each 14 ms: busy the whole time) from
    // 10.25 s. The exact busy share over the tick's 2 s, [10, 12], is (1.5 + 0.5 × 0.28) / 2 = 82%: above
    // the INFaaS 80% threshold. Reports each second on the second (10-11, 11-12) read the same 82%; reports
    // at half past (9.5-10.5, 10.5-11.5, read at the 12 s tick) hold 1.25 s of the burst: 73%, no launch.
    // That is with one tick read (INFaaS's rule); the live default reads two, over which the burst is
    // at most (82% + 20 q/s's 28%) / 2 = 55%: no launch at any phase.
    const live = replayConfig({ speedup: 144, app: "heavy", sloMs: 1000, minAccuracy: 0 });
    expect(live.readingTicks).toBe(2);
    const config = { ...live, readingTicks: 1 };
    const arrivalsMs: number[] = [];
    for (let t = 0; t < 20_000; t += 50) if (t < 10_250 || t >= 11_750) arrivalsMs.push(t);
    for (let t = 10_250; t < 11_750; t += 14) arrivalsMs.push(t);
    arrivalsMs.sort((a, b) => a - b);
    const run = (reportTimesMs?: number[]) => oneWorker(config, arrivalsMs, 20_000, reportTimesMs ? { reportTimesMs } : {});
    const infaasLaunchesAt = (r: ReturnType<typeof run>) => r.launches.filter((l) => /INFaaS: utilisation/.test(l.reason)).map((l) => l.at_s);
    const each = (phase: number) => Array.from({ length: 20 }, (_, k) => phase + k * 1000);
    expect(infaasLaunchesAt(run())).toEqual([12]);
    expect(infaasLaunchesAt(run(each(0)))).toEqual([12]);
    expect(infaasLaunchesAt(run(each(500)))).toEqual([]);
    for (const reportTimesMs of [undefined, each(0), each(500)]) {
      expect(oneWorker(live, arrivalsMs, 20_000, reportTimesMs ? { reportTimesMs } : {}).launches.filter((l) => /INFaaS/.test(l.reason))).toEqual([]);
    }
  });

  it("replay - given live's reading at the window's start, the VM autoscaler ticks at 0 with it, as the live one does", () => {
    // The window opens on 2 s at the worker's profiled peak (one query each 12 ms against 14 ms per
    // query), then 20 q/s. Read over two ticks, the live vm-autoscaler has a reading from before the
    // window at its tick at 0 (the window starts on its tick): at 2 s it reads that and the burst's
    // ~100%. A simulator whose first tick is at 2 s read the burst alone and launched.
    const config = replayConfig({ speedup: 144, app: "heavy", sloMs: 1000, minAccuracy: 0 });
    const arrivalsMs: number[] = [];
    for (let t = 0; t < 2000; t += 12) arrivalsMs.push(t);
    for (let t = 2000; t < 20_000; t += 50) arrivalsMs.push(t);
    const launchesAt = (startUtilization?: number) =>
      oneWorker(config, arrivalsMs, 20_000, startUtilization === undefined ? {} : { startUtilization }).launches.filter((l) => /INFaaS: utilisation/.test(l.reason)).map((l) => l.at_s);
    expect(launchesAt()).toEqual([2]);
    expect(launchesAt(0)).toEqual([]);
    // A busy worker before the window: the tick at 0 reads it (its first reading: alone) and launches.
    expect(launchesAt(1)).toEqual([0]);
  });

  it("replay - the variant-state rule reads the mean batch (the busy time: slowdown), the overflow estimate the median (observedFactor)", () => {
    // 30 q/s on a worker whose batches run at twice their profile (28 ms): 84% busy, and Interfered read
    // as the mean (28 ms > 14 × 1.2 + 2), which is what the executors read (Σ observed / Σ profiled batch
    // time): a median half the mean (observedFactor 0.5) does not change the state rule.
    const config = replayConfig({ speedup: 144, app: "heavy", sloMs: 1000, minAccuracy: 0 });
    const arrivalsMs = Array.from({ length: 600 }, (_, k) => Math.round((k * 1000) / 30));
    const reasons = (observedFactor?: number) => oneWorker(config, arrivalsMs, 20_000, { slowdown: 2, ...(observedFactor === undefined ? {} : { observedFactor }) }).launches.map((l) => l.reason);
    for (const f of [undefined, 0.5]) expect(reasons(f).some((r) => /interfered/.test(r))).toBe(true);
    // 45 q/s at twice the profile: past the ~36 q/s the worker then serves, so its queue grows and the
    // overflow estimate sends the queries whose wait would pass the SLO to functions. Reading a median
    // half the mean, it takes the worker for twice as fast and sends fewer.
    const fast = Array.from({ length: 900 }, (_, k) => Math.round((k * 1000) / 45));
    const overflow = (observedFactor?: number) => oneWorker(config, fast, 20_000, { slowdown: 2, ...(observedFactor === undefined ? {} : { observedFactor }) }).summary.overflow_share;
    expect(overflow()).toBeGreaterThan(0);
    expect(overflow(0.5)).toBeLessThan(overflow());
  });
  it("replay - the model autoscaler upgrades on the stack's one-thread worker, as the live executor loads (memory checked, threads shared during the swap)", () => {
    // int8 (40 q/s) loaded; 39 q/s is within the 1.05 slack of its capacity, so the model autoscaler
    // upgrades to fp32 (71 q/s) on the same worker, counting the thread int8 frees. The executor loads it
    // next to int8 (it checks only memory) and unloads int8 once fp32 is ready; the simulator used to
    // refuse the load (no free thread), abandon the swap and let the INFaaS rules launch workers.
    const config = replayConfig({ speedup: 144, app: "heavy", sloMs: 1000, minAccuracy: 0 });
    const int8: typeof REPLAY_DEFAULT_PROFILE = { ...REPLAY_DEFAULT_PROFILE, name: "heavy-mlp--cpu-int8-b1-t1", latencyMs: { 1: 25 }, peakQps: 40, loadLatencyMs: 300, resources: { threads: 1, memoryBytes: 30e6 } };
    const arrivalsMs = Array.from({ length: 39 * 30 }, (_, k) => Math.round((k * 1000) / 39));
    for (const workerMemoryBytes of [undefined, 1e9]) {
      const r = runReplaySim({
        config,
        arrivalsMs,
        durationMs: 30_000,
        variants: [REPLAY_DEFAULT_PROFILE, int8],
        preload: [{ variant: int8.name, count: 1 }],
        bootMs: 1900,
        functionColdStartMs: 2000,
        functionWarmMs: 20,
        seed: 1,
        // The worker was idle before the window (as the live replay reads it): the VM tick at 0 has
        // that reading, so the first second's 97.5% on int8 is read over two ticks (49%), not alone.
        startUtilization: 0,
        ...(workerMemoryBytes !== undefined ? { workerMemoryBytes } : {}),
      });
      const actions = r.log.map((e) => `${e.source}: ${e.action}`);
      expect(actions.some((a) => /^model-autoscaler: upgrade heavy-mlp--cpu-fp32-b1-t1 ×1 on cpu-0/.test(a)), actions.join("\n")).toBe(true);
      expect(actions.some((a) => /abandon|escalate/.test(a)), actions.join("\n")).toBe(false);
      // (fp32's 400 ms load ends within the monitor's second: Inactive → Active; then int8 goes)
      expect(actions).toContain("monitor: heavy-mlp--cpu-fp32-b1-t1: inactive → active");
      expect(actions).toContain("monitor: heavy-mlp--cpu-int8-b1-t1: active → inactive");
      expect(r.launches).toEqual([]);
    }
    // A worker whose memory cannot hold fp32 even with int8's freed (80 MB − 30 MB + 30 MB < 90 MB) does
    // not take it: the model autoscaler places it elsewhere.
    const small = runReplaySim({ config, arrivalsMs, durationMs: 30_000, variants: [REPLAY_DEFAULT_PROFILE, int8], preload: [{ variant: int8.name, count: 1 }], bootMs: 1900, functionColdStartMs: 2000, functionWarmMs: 20, seed: 1, workerMemoryBytes: 80e6 });
    expect(small.log.some((e) => /^place-elsewhere heavy-mlp--cpu-fp32/.test(e.action) || /^escalate/.test(e.action))).toBe(true);
  });
});
