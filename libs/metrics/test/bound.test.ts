import { describe, expect, it } from "vitest";
import { boundCounter, boundHistogram, client } from "../src/index.js";

/** The exposition of a registry, the series' lines only. */
async function lines(registry: client.Registry): Promise<string[]> {
  return (await registry.metrics()).split("\n").filter((l) => l !== "" && !l.startsWith("#"));
}

describe("bound series", () => {
  it("bound series - record what prom-client's own children record, through resets and removes", async () => {
    const make = (): { registry: client.Registry; h: client.Histogram<"m" | "phase">; c: client.Counter<"m" | "outcome"> } => {
      const registry = new client.Registry();
      const h = new client.Histogram({ name: "h_seconds", help: "h", labelNames: ["m", "phase"], buckets: [0.001, 0.01, 0.1], registers: [registry] });
      const c = new client.Counter({ name: "c_total", help: "c", labelNames: ["m", "outcome"], registers: [registry] });
      return { registry, h, c };
    };
    const fast = make();
    const slow = make();
    const fh = boundHistogram(fast.h, { m: "a", phase: "queue" });
    const sh = slow.h.labels({ m: "a", phase: "queue" });
    const fc = boundCounter(fast.c, { m: "a", outcome: "ok" });
    const sc = slow.c.labels({ m: "a", outcome: "ok" });
    const values = [0, 0.0005, 0.001, 0.002, 0.05, 0.1, 0.5, 7, 0.003];
    const both = (v: number): void => {
      fh.observe(v);
      sh.observe(v);
      fc.inc();
      sc.inc();
    };
    for (const v of values) both(v);
    fc.inc(2.5);
    sc.inc(2.5);
    // Other series of the same metrics are untouched.
    fast.h.observe({ m: "b", phase: "queue" }, 0.02);
    slow.h.observe({ m: "b", phase: "queue" }, 0.02);
    expect(await lines(fast.registry)).toEqual(await lines(slow.registry));
    for (const r of [fast, slow]) {
      r.h.reset();
      r.c.remove({ m: "a", outcome: "ok" });
    }
    for (const v of values.slice(0, 4)) both(v);
    expect(await lines(fast.registry)).toEqual(await lines(slow.registry));
    expect(await lines(fast.registry)).toContain('h_seconds_count{m="a",phase="queue"} 4');
    expect(() => fh.observe(Number.NaN)).toThrow("Value is not a valid number");
    expect(() => fc.inc(-1)).toThrow();
  });
});
