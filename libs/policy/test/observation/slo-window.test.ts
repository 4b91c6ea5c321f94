import { describe, expect, it } from "vitest";
import { SloWindow } from "../../src/index.js";

describe("slo-window", () => {
  it("slo-window - the tightest SLO of the last minute: tighter at once, looser once every tighter one is older", () => {
    const w = new SloWindow(60_000);
    w.observe("m", 500, 0);
    expect(w.tightest("m", 0)).toBe(500);
    w.observe("m", 200, 1_000); // tighter: at once
    expect(w.tightest("m", 1_000)).toBe(200);
    w.observe("m", 800, 30_000); // looser, 29 s after the tight one: the tight one still counts
    expect(w.tightest("m", 30_000)).toBe(200);
    w.observe("m", 200, 40_000); // seen again
    expect(w.tightest("m", 100_000)).toBe(200); // 60 s after 40 s: still in the window
    w.observe("m", 800, 90_000);
    expect(w.tightest("m", 100_001)).toBe(800); // the 200 ms of 40 s left the window; 800 ms was seen at 90 s
  });

  it("slo-window - a key with nothing in the window has no SLO", () => {
    const w = new SloWindow(60_000);
    w.observe("a", 100, 0);
    w.observe("b", 50, 0);
    expect(w.read(60_000)).toEqual({ a: 100, b: 50 });
    expect(w.read(60_001)).toEqual({});
    expect(w.tightest("a", 60_001)).toBeUndefined();
  });

  it("slo-window - a looser SLO seen within the window takes over when the tighter one leaves it", () => {
    const w = new SloWindow(60_000);
    w.observe("m", 200, 0);
    w.observe("m", 800, 30_000);
    w.observe("m", 500, 50_000);
    expect(w.tightest("m", 60_000)).toBe(200);
    expect(w.tightest("m", 60_001)).toBe(500); // 200 (0 s) left; the tightest of 800 (30 s) and 500 (50 s)
    expect(w.tightest("m", 110_001)).toBeUndefined();
  });
});
