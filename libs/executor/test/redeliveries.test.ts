import { describe, expect, it } from "vitest";
import { RecentSequences } from "../src/redeliveries.js";

describe("recent sequences", () => {
  it("recent sequences - remembers what was added, forgets the oldest beyond its capacity", () => {
    const recent = new RecentSequences(3);
    for (const seq of [10, 11, 12]) recent.add(seq);
    expect([10, 11, 12, 13].map((s) => recent.has(s))).toEqual([true, true, true, false]);
    recent.add(13); // 10 goes
    expect([10, 11, 12, 13].map((s) => recent.has(s))).toEqual([false, true, true, true]);
    expect(recent.size).toBe(3);
  });

  it("recent sequences - adding one twice keeps one slot", () => {
    const recent = new RecentSequences(2);
    recent.add(1);
    recent.add(1);
    recent.add(2);
    expect([recent.has(1), recent.has(2), recent.size]).toEqual([true, true, 2]);
  });

  it("recent sequences - a capacity below 1 is refused", () => {
    expect(() => new RecentSequences(0)).toThrow("RecentSequences needs a capacity of at least 1 (got 0)");
  });
});
