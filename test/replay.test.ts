import { describe, expect, it } from "vitest";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "@sloserve/stack";

/**
 * Live replay end to end (scripts/replay.ts): two trace minutes of the bundled Twitter trace at 12×
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

describe("replay", () => {
  it("replay - drives the stack and the simulator with the same arrivals and counts every query once", async () => {
    const out = mkdtempSync(join(tmpdir(), "sloserve-replay-"));
    const { code, output } = await run(["--out", out, "--start-minute", "92", "--minutes", "2", "--speedup", "12", "--peak-qps", "20", "--slo-ms", "1000", "--no-progress"], 300_000);
    expect(code, output.slice(-4000)).toBe(0);
    const report = JSON.parse(readFileSync(join(out, "replay.json"), "utf8")) as Record<string, unknown> & {
      live: Record<(typeof KEYS)[number], number>;
      sim: Record<(typeof KEYS)[number], number>;
      series: Array<{ t_s: number; trace_minute: number; live?: Record<string, number | null>; sim: Record<string, number | null> }>;
      window: { duration_s: number; speedup: number; started_at_ms: number };
      window_start: { settle_queries: number; slo_miss_fraction: number };
      launches: Record<"live" | "sim", Array<{ at_s: number; held_s: number; dollars: number; reason: string }>>;
    };
    for (const side of ["live", "sim"] as const) {
      for (const k of KEYS) expect(typeof report[side][k], `${side}.${k}`).toBe("number");
      const s = report[side];
      expect(s.queries, side).toBeGreaterThan(0);
      expect(s.answered + s.failed, `${side}: queries = answered + failed`).toBe(s.queries);
      expect(s.slo_attainment).toBeGreaterThanOrEqual(0);
      expect(s.slo_attainment).toBeLessThanOrEqual(1);
      expect(s.overflow_share).toBeGreaterThanOrEqual(0);
      expect(s.workers_max, side).toBeGreaterThanOrEqual(1);
    }
    // The same arrivals on both sides.
    expect(report.sim.queries).toBe(report.live.queries);
    // Launch by launch: each side's launches add up to its machine_dollars.
    for (const side of ["live", "sim"] as const) {
      const machineDollars = (report[side] as unknown as { machine_dollars: number }).machine_dollars;
      expect(report.launches[side].reduce((a, l) => a + l.dollars, 0), side).toBeCloseTo(machineDollars, 9);
    }
    // The window's start: settled, and on a tick of the live vm-autoscaler.
    expect(report.window_start.settle_queries).toBeGreaterThan(0);
    expect(report.window_start.slo_miss_fraction).toBeGreaterThanOrEqual(0);
    expect(typeof report.window.started_at_ms).toBe("number");
    expect(report.window.speedup).toBe(12);
    expect(report.series.length).toBe(Math.ceil(report.window.duration_s));
    const sent = report.series.reduce((a, r) => a + Number(r.live?.load ?? 0), 0);
    expect(sent).toBe(report.live.queries);
    expect(report.series.reduce((a, r) => a + Number(r.sim.load ?? 0), 0)).toBe(report.sim.queries);
    for (const r of report.series) for (const k of ["load", "workers", "overflow", "misses"]) expect(typeof r.sim[k]).toBe("number");
    expect(report.series[0]?.trace_minute).toBe(92);
    const svg = readFileSync(join(out, "replay.svg"), "utf8");
    expect(svg.startsWith("<svg")).toBe(true);
    expect(existsSync(join(out, "decisions-live.jsonl"))).toBe(true);
  }, 330_000);
});
