import { describe, expect, it } from "vitest";
import { classFor, inputClasses, queryElements, selectVariant, SelectionIndex, type QueryRequirements, type VariantProfile } from "../../src/index.js";

describe("input size classes", () => {
  const cases: Array<{ name: string; inputs: Array<{ name: string; shape: number[] }>; profileShape: Record<string, number[]>; scales?: number[]; want: Array<[string, number]> }> = [
    {
      // OCR recognition: width dynamic, profiled at 320 → 80, 160, 320, 640.
      name: "a dynamic width is scaled, the fixed dimensions kept",
      inputs: [{ name: "x", shape: [-1, 3, 48, -1] }],
      profileShape: { x: [3, 48, 320] },
      want: [["x=3x48x80", 3 * 48 * 80], ["x=3x48x160", 3 * 48 * 160], ["x=3x48x320", 3 * 48 * 320], ["x=3x48x640", 3 * 48 * 640]],
    },
    {
      name: "two dynamic dimensions scale together; classes that coincide are one",
      inputs: [{ name: "img", shape: [-1, 3, -1, -1] }],
      profileShape: { img: [3, 4, 2] },
      scales: [0.1, 0.25, 1],
      // 0.1 and 0.25 both round to at least 1 × 1.
      want: [["img=3x1x1", 3], ["img=3x4x2", 24]],
    },
    { name: "no dynamic dimension besides the batch: no classes", inputs: [{ name: "x", shape: [-1, 784] }], profileShape: {}, want: [] },
    { name: "a dynamic dimension the profile shape does not size: no classes", inputs: [{ name: "x", shape: [-1, 3, 48, -1] }], profileShape: {}, want: [] },
  ];
  for (const c of cases) {
    it(`input-classes - ${c.name}`, () => {
      expect(inputClasses(c.inputs, c.profileShape, c.scales).map((k) => [k.name, k.elements])).toEqual(c.want);
    });
  }

  it("input-classes - a query's class: the smallest that holds its elements, else the largest", () => {
    const classes = [{ elements: 10 }, { elements: 20 }, { elements: 40 }];
    expect([1, 10, 11, 20, 39, 40, 400].map((n) => classFor(classes, n)?.elements)).toEqual([10, 10, 20, 20, 40, 40, 40]);
    expect(classFor([], 5)).toBeUndefined();
    // One row of each input, the batch dimension left out: 3·48·200 + 2.
    expect(queryElements([[4, 3, 48, 200], [4, 2]])).toBe(3 * 48 * 200 + 2);
  });

  // An OCR-like model with two variants: a fast expensive one and a slow cheap one whose latency grows
  // with the text's width. At 100 ms SLO the cheap one serves narrow lines only.
  const v = (name: string, o: Partial<VariantProfile>): VariantProfile => ({
    name, model: name, app: "ocr", hardware: "cpu", batchSize: 1, accuracy: 0.9, latencyMs: { 1: 60 }, peakQps: 10, loadLatencyMs: 500, pricePerS: 1, profiled: true, ...o,
  });
  const small = 3 * 48 * 80;
  const large = 3 * 48 * 640;
  const cheap = v("cheap", { pricePerS: 1, latencyMs: { 1: 60 }, inputClasses: [{ elements: small, latencyMs: { 1: 20 } }, { elements: 3 * 48 * 320, latencyMs: { 1: 60 } }, { elements: large, latencyMs: { 1: 130 } }] });
  const fast = v("fast", { pricePerS: 5, latencyMs: { 1: 15 }, inputClasses: [{ elements: small, latencyMs: { 1: 8 } }, { elements: large, latencyMs: { 1: 30 } }] });
  const variants = [cheap, fast];
  const active = new Map(variants.map((x) => [x.name, { state: "active" as const, instances: 1, qps: 0, workers: [{ worker: "w1", qps: 0 }] }]));
  const table: Array<{ name: string; req: QueryRequirements; want: string }> = [
    { name: "a narrow line: the cheap variant (20 ms)", req: { latencyMs: 100, inputElements: small }, want: "active cheap" },
    { name: "a wide line: the cheap one's class takes 130 ms > 100: the fast one", req: { latencyMs: 100, inputElements: large }, want: "active fast" },
    { name: "wider than any class: the largest class", req: { latencyMs: 100, inputElements: large * 2 }, want: "active fast" },
    { name: "no size given: the base profile (60 ms)", req: { latencyMs: 100 }, want: "active cheap" },
    { name: "a wide line at 25 ms: none (fast takes 30)", req: { latencyMs: 25, inputElements: large }, want: "infeasible" },
    { name: "a narrow line at 25 ms: cheap (20 ms)", req: { latencyMs: 25, inputElements: small }, want: "active cheap" },
  ];
  const brief = (d: ReturnType<typeof selectVariant>): string => (d.kind === "infeasible" ? "infeasible" : `${d.kind} ${d.variant.name}`);
  for (const c of table) {
    it(`input-classes - selection: ${c.name} (index and reference agree)`, () => {
      const index = new SelectionIndex(variants);
      for (const [name, rt] of active) index.setRuntime(name, rt);
      expect(brief(index.select("ocr", c.req))).toBe(c.want);
      expect(brief(selectVariant("ocr", variants, active, c.req))).toBe(c.want);
    });
  }

  it("input-classes - the index remembers decisions per input size only for apps profiled per class", () => {
    const index = new SelectionIndex(variants);
    for (const [name, rt] of active) index.setRuntime(name, rt);
    // Same requirements, two sizes: two decisions, not one remembered for both.
    expect(brief(index.select("ocr", { latencyMs: 100, inputElements: small }))).toBe("active cheap");
    expect(brief(index.select("ocr", { latencyMs: 100, inputElements: large }))).toBe("active fast");
    expect(brief(index.select("ocr", { latencyMs: 100, inputElements: small }))).toBe("active cheap");
    // An app without classes decides the same for every size.
    const plain = new SelectionIndex([v("p", { app: "digits" })]);
    plain.setRuntime("p", { state: "active", instances: 1, qps: 0, workers: [] });
    const a = plain.select("digits", { latencyMs: 100, inputElements: 1 });
    expect(plain.select("digits", { latencyMs: 100, inputElements: 99 })).toBe(a);
  });
});
