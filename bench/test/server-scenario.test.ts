import { describe, expect, it } from "vitest";
import { poissonOpenLoop } from "../lib/load.js";
import { nextRate, recordStep, searchMaxRate, searchResult, startSearch, type SearchState } from "../lib/server-scenario.js";

/**
 * The server scenario's rate search (lib/server-scenario.ts) against oracles whose boundary is known,
 * and its open-loop step (lib/load.ts poissonOpenLoop) against targets that answer, fail or never
 * answer. No servers.
 */

/** An oracle whose p99 is within a 15 ms bound below `boundaryQps` and far over it from there on; it records the rates tried. */
function cliff(boundaryQps: number): { p99At: (qps: number) => number; tried: number[] } {
  const tried: number[] = [];
  return { tried, p99At: (qps) => (tried.push(qps), qps < boundaryQps ? 5 : 50) };
}

describe("server scenario search", () => {
  it("server scenario - brackets upward from the start, then bisects to the boundary", async () => {
    const o = cliff(1234);
    const r = await searchMaxRate(o.p99At, { boundMs: 15, startQps: 1000, steps: 12 });
    // 1000 ✓ → 2000 ✗ (bracketed) → 1500 ✗ → 1250 ✗ → 1125 ≈ 1130 ✓ → 1190 ✓ → 1220 ✓ → 1235 ≈ 1240 ✗ (three digits):
    // (1240 − 1220) / 1240 = 1.6% < 2%, the bracket is narrow enough
    expect(o.tried).toEqual([1000, 2000, 1500, 1250, 1130, 1190, 1220, 1240]);
    expect(r).toMatchObject({ maxQps: 1220, failQps: 1240, ended: "resolution" });
    expect(r.steps.map((s) => s.pass)).toEqual([true, false, false, false, true, true, true, false]);
  });

  it("server scenario - brackets downward when the start is over the bound", async () => {
    const o = cliff(100);
    const r = await searchMaxRate(o.p99At, { boundMs: 15, startQps: 1000, steps: 6 });
    // 1000 ✗ → 500 ✗ → 250 ✗ → 125 ✗ → 62.5 ✓ (bracketed) → (62.5 + 125) / 2 = 93.75 ✓: six steps, then it stops
    expect(o.tried).toEqual([1000, 500, 250, 125, 62.5, 93.8]);
    expect(r).toMatchObject({ maxQps: 93.8, failQps: 125, ended: "steps" });
  });

  it("server scenario - a fixed number of steps whatever the boundary, and the boundary always between the answer's two rates", async () => {
    for (const boundary of [20, 37, 420, 999, 1001, 5555, 50_000]) {
      const o = cliff(boundary);
      const r = await searchMaxRate(o.p99At, { boundMs: 15, startQps: 1000, steps: 10, minQps: 1, maxQps: 100_000 });
      expect(o.tried.length, `boundary ${boundary}`).toBeLessThanOrEqual(10);
      expect(r.maxQps, `boundary ${boundary}`).toBeLessThan(boundary);
      expect(r.failQps, `boundary ${boundary}`).toBeGreaterThanOrEqual(boundary);
      // Ten steps: at most 7 to bracket (the boundaries are within 2^6 of the start), the other 3 halve the bracket.
      expect((r.failQps! - r.maxQps) / r.failQps!, `boundary ${boundary}`).toBeLessThan(0.3);
    }
  });

  it("server scenario - nothing within the bound: 0, after halving down to minQps", async () => {
    const o = cliff(0);
    const r = await searchMaxRate(o.p99At, { boundMs: 15, startQps: 800, steps: 10, minQps: 100 });
    expect(o.tried).toEqual([800, 400, 200, 100]);
    expect(r).toMatchObject({ maxQps: 0, failQps: 100, ended: "min" });
  });

  it("server scenario - everything within the bound: maxQps, tried once", async () => {
    const o = cliff(Infinity);
    const r = await searchMaxRate(o.p99At, { boundMs: 15, startQps: 800, steps: 10, maxQps: 2000 });
    expect(o.tried).toEqual([800, 1600, 2000]);
    expect(r).toMatchObject({ maxQps: 2000, failQps: null, ended: "max" });
  });

  it("server scenario - an infinite p99 (a query unanswered in time) fails the step; a p99 equal to the bound passes", async () => {
    let s = startSearch({ boundMs: 15, startQps: 100, steps: 4 });
    s = recordStep(s, 100, 15);
    s = recordStep(s, 200, Infinity);
    expect(searchResult(s)).toMatchObject({ maxQps: 100, failQps: 200 });
    expect(nextRate(s)).toBe(150);
  });

  it("server scenario - searches advanced in turn end where each alone would (the serving benchmark interleaves its targets)", async () => {
    const boundaries = [700, 2600];
    const alone = await Promise.all(boundaries.map((b) => searchMaxRate(cliff(b).p99At, { boundMs: 15, startQps: 1000, steps: 7 })));
    let states: SearchState[] = boundaries.map(() => startSearch({ boundMs: 15, startQps: 1000, steps: 7 }));
    for (let k = 0; k < 7; k++) {
      states = states.map((s, i) => {
        const qps = nextRate(s);
        return qps === null ? s : recordStep(s, qps, qps < boundaries[i]! ? 5 : 50);
      });
    }
    expect(states.map(searchResult)).toEqual(alone);
  });

  it("server scenario - options are checked", () => {
    expect(() => startSearch({ boundMs: 0, startQps: 1, steps: 1 })).toThrow("boundMs must be > 0, got 0");
    expect(() => startSearch({ boundMs: 15, startQps: 1, steps: 0 })).toThrow("steps must be an integer >= 1, got 0");
    expect(() => startSearch({ boundMs: 15, startQps: 1, steps: 2, factor: 1 })).toThrow("factor must be > 1, got 1");
  });
});

describe("server scenario step (open loop)", () => {
  const options = { qps: 400, durationMs: 250, graceMs: 100, seed: 7, drainMs: 200 };

  it("open loop - seeded Poisson arrivals: the same count for the same seed, every query answered in time", async () => {
    const answer = () => new Promise<void>((r) => setTimeout(r, 1));
    const a = await poissonOpenLoop(answer, options);
    const b = await poissonOpenLoop(answer, options);
    expect(a.sent).toBe(b.sent);
    // 400 q/s × 0.25 s = 100 expected; a Poisson count is within ±4σ (σ = 10) of it.
    expect(a.sent).toBeGreaterThan(60);
    expect(a.sent).toBeLessThan(140);
    expect(a).toMatchObject({ answered: a.sent, failed: 0, late: 0, undrained: 0 });
    expect(a.p99Ms).toBeLessThan(100);
  });

  it("open loop - a failed query and one never answered both count as over any bound", async () => {
    const failing = await poissonOpenLoop(() => Promise.reject(new Error("HTTP 503")), options);
    expect(failing).toMatchObject({ answered: 0, failed: failing.sent, late: 0, firstError: "HTTP 503", p99Ms: Infinity });
    const silent = await poissonOpenLoop(() => new Promise(() => undefined), options);
    expect(silent).toMatchObject({ answered: 0, failed: 0, late: silent.sent, undrained: silent.sent, p99Ms: Infinity });
  });
});
