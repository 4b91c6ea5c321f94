import { describe, expect, it } from "vitest";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { calibrationSchema, type Calibration } from "@sloserve/contracts";
import { REPO_ROOT } from "@sloserve/stack";

/**
 * `npm run calibrate` end to end (scripts/calibrate.ts), --quick on two workers: the stack it starts
 * (real nats-server, redis-server and services; the heavy MLP registered and profiled), function
 * bursts, the contention sweep with a launched worker booting, boot samples; then the same with
 * emulated workers serving the first file. Checks that each file passes calibrationSchema and that
 * its figures are sane, not their values (a shared machine's performance varies).
 */

function run(args: string[], timeoutMs: number): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", join(REPO_ROOT, "scripts", "calibrate.ts"), ...args], { cwd: REPO_ROOT, env: process.env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (c: Buffer) => void (output += c.toString()));
    child.stderr.on("data", (c: Buffer) => void (output += c.toString()));
    const timer = setTimeout(() => {
      // (it stops every process it started on SIGINT)
      child.kill("SIGINT");
      reject(new Error(`calibrate did not finish within ${timeoutMs} ms; output:\n${output.slice(-4000)}`));
    }, timeoutMs);
    child.on("error", reject);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

function checkSane(c: Calibration, backend: Calibration["backend"], output: string): void {
  expect(c.backend).toBe(backend);
  expect(c.app).toBe("heavy");
  expect(c.host.cores).toBeGreaterThan(0);
  expect(c.variants.length, output).toBeGreaterThan(0);
  for (const v of c.variants) {
    expect(v.app).toBe("heavy");
    expect(v.peakQps, v.name).toBeGreaterThan(0);
    expect(v.latencyMs["1"], v.name).toBeGreaterThan(0);
    // Its batch times, in the emulated executors' format.
    const entry = c.emulation.variants[v.name];
    expect(entry?.batches["1"]?.p50, v.name).toBe(v.latencyMs["1"]);
  }
  expect(c.contention.length, output).toBeGreaterThan(0);
  for (const p of c.contention) {
    expect(p.slowdown).toBeGreaterThan(0);
    expect(p.p50Ratio).toBeGreaterThan(0);
    expect(p.demand).toBeGreaterThan(0);
    expect(p.samples).toBeGreaterThan(0);
    expect(p.workers).toBeGreaterThanOrEqual(1);
    expect(c.variants.map((v) => v.name)).toContain(p.variant);
  }
  expect(c.contention.some((p) => p.booting === 0), output).toBe(true);
  // heavy: the selection's pick (int8) and the variant the plan sizes workers by (fp32) are both swept.
  expect(new Set(c.contention.map((p) => p.variant)).size, output).toBeGreaterThanOrEqual(2);
  expect(c.bootMs.length, output).toBeGreaterThanOrEqual(3);
  for (const b of c.bootMs) expect(b).toBeGreaterThan(0);
  expect(c.reports.periodMs).toBeGreaterThan(500);
  expect(c.reports.periodMs).toBeLessThan(2000);
  expect(c.workerMemoryBytes).toBeGreaterThan(0);
  for (const ms of [...c.functions.coldStartMs, ...c.functions.warmMs]) expect(ms).toBeGreaterThan(0);
}

describe("calibrate", () => {
  it("calibrate - measures the variants, the contention sweep, boots, functions and reports, native then emulated, into files calibrationSchema takes", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sloserve-calibrate-"));
    const native = join(dir, "native.json");
    const first = await run(["--out", native, "--quick", "--max-workers", "2"], 240_000);
    expect(first.code, first.output.slice(-4000)).toBe(0);
    const n = calibrationSchema.parse(JSON.parse(readFileSync(native, "utf8")));
    checkSane(n, "native", first.output);
    // The bursts went to functions.
    expect(n.functions.coldStartMs.length + n.functions.warmMs.length, first.output).toBeGreaterThan(0);

    const emulated = join(dir, "emulated.json");
    // (up to 6 workers: 1, then 3 launched alone for the boot samples, then 2 launched together)
    const second = await run(["--emulated", "--from", native, "--out", emulated, "--quick", "--max-workers", "6"], 300_000);
    expect(second.code, second.output.slice(-4000)).toBe(0);
    const e = calibrationSchema.parse(JSON.parse(readFileSync(emulated, "utf8")));
    checkSane(e, "emulated", second.output);
    // The emulated executors profiled the variants at the native calibration's batch times (within the timers' overhead and the draws' spread).
    for (const v of e.variants) {
      const before = n.emulation.variants[v.name]?.batches["1"];
      if (before) expect(v.latencyMs["1"], v.name).toBeGreaterThan(0.5 * before.p50);
    }
    // The launches made together: their boots with how many, and a point with as many booting.
    expect(e.groupBoots?.map((g) => g.together), second.output).toEqual([2, 2]);
    for (const g of e.groupBoots ?? []) expect(g.ms).toBeGreaterThan(0);
    expect(e.contention.some((p) => p.booting === 2), second.output).toBe(true);
  }, 600_000);
});
