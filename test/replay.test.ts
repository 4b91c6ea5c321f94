import { describe, expect, it } from "vitest";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "@sloserve/stack";

/**
 * Live replay end to end (scripts/replay.ts), the prediction first: two trace minutes of the bundled Twitter trace at 12×
 * (10 s of load at up to 20 queries/s) through a stack the replay starts itself (real nats-server,
 * redis-server and services; the MLP registered and profiled), then the simulator on the same arrivals.
 * Checks the structure of replay.json and that every query is counted once on each side, not the
 * figures (a shared machine's performance varies).
 */

const KEYS = ["queries", "answered", "failed", "slo_attainment", "p99_ms", "cost_dollars", "overflow_share", "workers_max"] as const;

function run(args: string[], timeoutMs: number): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", join(REPO_ROOT, "scripts", "replay.ts"), ...args], { cwd: REPO_ROOT, env: process.env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (c: Buffer) => void (output += c.toString()));
    child.stderr.on("data", (c: Buffer) => void (output += c.toString()));
    const timer = setTimeout(() => {
      child.kill("SIGINT");
      reject(new Error(`replay did not finish within ${timeoutMs} ms; output:\n${output.slice(-4000)}`));
    }, timeoutMs);
    child.on("error", reject);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/**
 * A hand-written calibration (libs/contracts `calibrationSchema`) of the heavy app's fp32 variant: the
 * test checks the replay's bookkeeping (the prediction made first, the same arrivals, every query
 * counted once), not how well it predicts (that is `npm run replay` with `npm run calibrate`'s file).
 */
function calibrationFile(dir: string): string {
  const calibration = {
    version: 1,
    date: "2026-11-29T00:00:00.000Z",
    command: "hand-written for test/replay.test.ts",
    host: { cores: 2, memoryBytes: 24e9, loadAverage: [0, 0, 0] },
    backend: "native",
    app: "heavy",
    variants: [
      { name: "heavy-mlp--cpu-fp32-b1-t1", model: "heavy-mlp", app: "heavy", hardware: "cpu", batchSize: 1, accuracy: 0, latencyMs: { "1": 5 }, peakQps: 200, loadLatencyMs: 300, pricePerS: 0.17 / 3600, profiled: true, resources: { threads: 1, memoryBytes: 150e6 } },
    ],
    emulation: { variants: { "heavy-mlp--cpu-fp32-b1-t1": { batches: { "1": { p50: 5, p99: 8 } } } }, models: {} },
    contention: [
      { demand: 0.2, booting: 0, slowdown: 1.1, p50Ratio: 1.1, samples: 10 },
      { demand: 1.5, booting: 0, slowdown: 1.6, p50Ratio: 1.5, samples: 10 },
    ],
    bootMs: [2000, 2500],
    functions: { coldStartMs: [3500], warmMs: [40, 60] },
    reports: { periodMs: 1000, jitterMs: 20 },
    workerMemoryBytes: 2e10,
  };
  const path = join(dir, "calibration.json");
  writeFileSync(path, JSON.stringify(calibration));
  return path;
}

describe("replay", () => {
  it("replay - predicts from the calibration first, then drives the stack with the same arrivals, and counts every query once", async () => {
    const out = mkdtempSync(join(tmpdir(), "sloserve-replay-"));
    const cal = calibrationFile(out);
    const { code, output } = await run(["--out", out, "--calibration", cal, "--consistency", "--start-minute", "92", "--minutes", "2", "--speedup", "12", "--peak-qps", "20", "--slo-ms", "1000", "--no-progress"], 300_000);
    expect(code, output.slice(-4000)).toBe(0);
    // The prediction was written before the stack started, and is the report's.
    const first = JSON.parse(readFileSync(join(out, "prediction.json"), "utf8")) as { prediction: Record<string, number>; date: string };
    const report = JSON.parse(readFileSync(join(out, "replay.json"), "utf8")) as Record<string, unknown> & {
      live: Record<(typeof KEYS)[number], number> & { machine_seconds: number; launches: number };
      prediction: Record<string, number>;
      prediction_error: Record<string, number | null>;
      consistency: { summary: Record<(typeof KEYS)[number], number> };
      series: Array<{ t_s: number; trace_minute: number; live?: Record<string, number | null>; sim: Record<string, number | null> }>;
      window: { duration_s: number; speedup: number; started_at_ms: number };
      window_start: Record<"live" | "predicted", { settle_queries: number; slo_miss_fraction: number; workers: number; instance_states: Record<string, string> }>;
      prediction_draws: Array<{ seed: number; cost_dollars: number }>;
      launches: Record<"live" | "predicted" | "consistency", Array<{ at_s: number; held_s: number; dollars: number; reason: string }>>;
    };
    expect(report.prediction).toEqual(first.prediction);
    expect(Date.parse(first.date)).toBeLessThan(report.window.started_at_ms);
    for (const k of ["queries", "cost_dollars", "machine_seconds", "launches", "slo_attainment", "p99_ms"]) expect(typeof report.prediction[k], `prediction.${k}`).toBe("number");
    for (const k of ["cost_ratio_live_over_predicted", "launches_live_minus_predicted", "slo_points_live_minus_predicted", "p99_ratio_live_over_predicted", "machine_seconds_ratio_live_over_predicted"]) expect(k in report.prediction_error, k).toBe(true);
    expect(report.prediction_error.launches_live_minus_predicted).toBe(report.live.launches - report.prediction.launches!);
    for (const [side, s] of [["live", report.live], ["consistency", report.consistency.summary]] as const) {
      for (const k of KEYS) expect(typeof s[k], `${side}.${k}`).toBe("number");
      expect(s.queries, side).toBeGreaterThan(0);
      expect(s.answered + s.failed, `${side}: queries = answered + failed`).toBe(s.queries);
      expect(s.slo_attainment).toBeGreaterThanOrEqual(0);
      expect(s.slo_attainment).toBeLessThanOrEqual(1);
      expect(s.overflow_share).toBeGreaterThanOrEqual(0);
      expect(s.workers_max, side).toBeGreaterThanOrEqual(1);
    }
    // The same arrivals on every side.
    expect(report.prediction.queries).toBe(report.live.queries);
    expect(report.consistency.summary.queries).toBe(report.live.queries);
    // Launch by launch: the live side's launches add up to its machine_dollars.
    expect(report.launches.live.reduce((a, l) => a + l.dollars, 0)).toBeCloseTo((report.live as unknown as { machine_dollars: number }).machine_dollars, 9);
    expect(Array.isArray(report.launches.predicted)).toBe(true);
    // The window's start: settled, live and in the prediction's own prelude (each with its variant loaded).
    for (const side of ["live", "predicted"] as const) {
      const w = report.window_start[side];
      expect(w.settle_queries, side).toBeGreaterThan(0);
      expect(w.slo_miss_fraction, side).toBeGreaterThanOrEqual(0);
      expect(w.workers, side).toBeGreaterThanOrEqual(1);
      expect(Object.keys(w.instance_states).length, side).toBeGreaterThan(0);
    }
    // The prediction: the mean of its draws (5 by default).
    expect(report.prediction_draws.length).toBe(5);
    expect(report.prediction.cost_dollars).toBeCloseTo(report.prediction_draws.reduce((a, d) => a + d.cost_dollars, 0) / 5, 9);
    expect(typeof report.window.started_at_ms).toBe("number");
    expect(report.window.speedup).toBe(12);
    expect(report.series.length).toBe(Math.ceil(report.window.duration_s));
    const sent = report.series.reduce((a, r) => a + Number(r.live?.load ?? 0), 0);
    expect(sent).toBe(report.live.queries);
    expect(report.series.reduce((a, r) => a + Number(r.sim.load ?? 0), 0)).toBe(report.prediction.queries);
    for (const r of report.series) for (const k of ["load", "workers", "overflow", "misses"]) expect(typeof r.sim[k]).toBe("number");
    expect(report.series[0]?.trace_minute).toBe(92);
    const svg = readFileSync(join(out, "replay.svg"), "utf8");
    expect(svg.startsWith("<svg")).toBe(true);
    expect(existsSync(join(out, "decisions-live.jsonl"))).toBe(true);
  }, 330_000);

  it("replay - refuses to run without a calibration (or --consistency), and a calibration of other workers", async () => {
    const out = mkdtempSync(join(tmpdir(), "sloserve-replay-"));
    const none = await run(["--out", out, "--no-progress"], 60_000);
    expect(none.code).toBe(2);
    expect(none.output).toMatch(/--calibration FILE/);
    const emulated = await run(["--out", out, "--calibration", calibrationFile(out), "--emulated", "--no-progress"], 60_000);
    expect(emulated.code).toBe(2);
    expect(emulated.output).toMatch(/it measured native workers, and this run has emulated ones/);
  }, 130_000);
});
