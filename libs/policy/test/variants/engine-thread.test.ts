import { describe, expect, it } from "vitest";
import {
  EngineThreadChoice,
  INLINE_BATCH_MAX_MS,
  INLINE_LEAVE_FACTOR,
  INLINE_MIN_BATCHES,
  INLINE_MODEL_MAX_BYTES,
  engineThreadPlan,
  mayRunInline,
  maxBatchEstimateMs,
  type EngineThread,
} from "../../src/index.js";

describe("engine-thread: inline or in a thread", () => {
  const cases: Array<{ why: string; current: EngineThread; estimateMs: number | undefined; batches: number; want: EngineThread }> = [
    { why: "no evidence: a new session stays in its thread", current: "thread", estimateMs: undefined, batches: 0, want: "thread" },
    { why: "no evidence: an inline session stays inline", current: "inline", estimateMs: undefined, batches: 0, want: "inline" },
    { why: "short batches, enough of them: inline", current: "thread", estimateMs: 0.3, batches: INLINE_MIN_BATCHES, want: "inline" },
    { why: "short batches, too few yet: stays in its thread", current: "thread", estimateMs: 0.3, batches: INLINE_MIN_BATCHES - 1, want: "thread" },
    { why: "exactly the threshold: inline", current: "thread", estimateMs: INLINE_BATCH_MAX_MS, batches: 100, want: "inline" },
    { why: "just over the threshold: stays in its thread", current: "thread", estimateMs: INLINE_BATCH_MAX_MS * 1.01, batches: 100, want: "thread" },
    { why: "long batches (ocr-rec, ~120 ms at 8): thread", current: "thread", estimateMs: 120, batches: 1000, want: "thread" },
    { why: "inline, between the threshold and the leave factor: stays inline (no flapping)", current: "inline", estimateMs: INLINE_BATCH_MAX_MS * (1 + INLINE_LEAVE_FACTOR) / 2, batches: 100, want: "inline" },
    { why: "inline, exactly threshold × leave factor: stays inline", current: "inline", estimateMs: INLINE_BATCH_MAX_MS * INLINE_LEAVE_FACTOR, batches: 100, want: "inline" },
    { why: "inline, past threshold × leave factor: back to a thread", current: "inline", estimateMs: INLINE_BATCH_MAX_MS * INLINE_LEAVE_FACTOR * 1.01, batches: 100, want: "thread" },
    { why: "inline, batches grew long (a slowed machine): back to a thread", current: "inline", estimateMs: 50, batches: 100, want: "thread" },
    { why: "a non-finite estimate is no evidence", current: "thread", estimateMs: Number.NaN, batches: 100, want: "thread" },
  ];
  it.each(cases)("engineThreadPlan - $why", ({ current, estimateMs, batches, want }) => {
    expect(engineThreadPlan(current, estimateMs, batches)).toBe(want);
  });

  const estimates: Array<{ ms: number; size: number; maxBatch: number; want: number }> = [
    { ms: 0.05, size: 1, maxBatch: 8, want: 0.4 },
    { ms: 0.4, size: 8, maxBatch: 8, want: 0.4 },
    { ms: 0.3, size: 4, maxBatch: 8, want: 0.6 },
    // a batch larger than maxBatch (the profiler's sizes) is its own figure
    { ms: 2, size: 16, maxBatch: 8, want: 2 },
    { ms: 1, size: 0, maxBatch: 1, want: 1 },
  ];
  it.each(estimates)("maxBatchEstimateMs - $ms ms at $size of $maxBatch → $want ms", ({ ms, size, maxBatch, want }) => {
    expect(maxBatchEstimateMs(ms, size, maxBatch)).toBeCloseTo(want, 9);
  });

  const eligible: Array<{ why: string; hardware: string; bytes: number; maxBatch: number | undefined; want: boolean }> = [
    { why: "a small CPU variant", hardware: "cpu", bytes: 2_610, maxBatch: 8, want: true },
    { why: "a CPU variant at the size limit", hardware: "cpu", bytes: INLINE_MODEL_MAX_BYTES, maxBatch: 1, want: true },
    { why: "a CPU model past the size limit (its bytes are not kept)", hardware: "cpu", bytes: INLINE_MODEL_MAX_BYTES + 1, maxBatch: 8, want: false },
    { why: "a GPU variant (a second CUDA session per move is too dear)", hardware: "gpu", bytes: 2_610, maxBatch: 8, want: false },
    { why: "a profiling job (no variant's max batch)", hardware: "cpu", bytes: 2_610, maxBatch: undefined, want: false },
  ];
  it.each(eligible)("mayRunInline - $why: $want", ({ hardware, bytes, maxBatch, want }) => {
    expect(mayRunInline(hardware, bytes, maxBatch)).toBe(want);
  });

  it("EngineThreadChoice - a tiny model moves inline after INLINE_MIN_BATCHES short batches despite a slow first run, and back when its batches turn long", () => {
    const choice = new EngineThreadChoice(8);
    const seen: EngineThread[] = [choice.observe(1, 5)]; // onnxruntime's first run: warming up
    for (let i = 1; i < INLINE_MIN_BATCHES; i++) seen.push(choice.observe(1, 0.05));
    expect(seen.slice(0, -1).every((w) => w === "thread")).toBe(true);
    expect(seen.at(-1)).toBe("inline");
    expect(choice.maxBatchMs).toBeCloseTo(0.4, 9);
    // the new session's own slow first run and a GC pause do not move it back
    expect(choice.observe(1, 5)).toBe("inline");
    expect(choice.observe(8, 30)).toBe("inline");
    // batches that stay slow do, once they are half of the recent ones (with the two above: the 8th)
    const after: EngineThread[] = [];
    for (let i = 0; i < INLINE_MIN_BATCHES; i++) after.push(choice.observe(8, 10));
    expect(after.indexOf("thread")).toBe(INLINE_MIN_BATCHES / 2 - 3);
    expect(choice.thread).toBe("thread");
  });

  it("EngineThreadChoice - a compute-bound model never leaves its thread", () => {
    const choice = new EngineThreadChoice(8);
    for (let i = 0; i < 200; i++) expect(choice.observe(i % 8 + 1, 15 * (i % 8 + 1))).toBe("thread");
  });
});
