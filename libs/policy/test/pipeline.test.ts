import { describe, expect, it } from "vitest";
import {
  configCostPerHour, replicaThroughputQps, rootModels, scaleFactors, serviceTimeMs, topologicalOrder, validatePipeline,
  type Pipeline, type ProfileSet,
} from "../src/pipeline.js";

// Social-media-like: preprocess → {language id → translate (30%), image classifier}.
const social: Pipeline = {
  name: "social",
  models: ["pre", "lang", "nmt", "img"],
  edges: [{ from: "pre", to: "lang" }, { from: "lang", to: "nmt", probability: 0.3 }, { from: "pre", to: "img" }],
};
const profiles: ProfileSet = {
  pre: [{ hardware: "cpu", pricePerHour: 0.1, batchLatencyMs: [[1, 2], [2, 4]] }],
  lang: [{ hardware: "gpu", pricePerHour: 0.9, batchLatencyMs: [[1, 5], [4, 8]] }],
  nmt: [{ hardware: "gpu", pricePerHour: 0.9, batchLatencyMs: [[1, 40], [8, 68]] }],
  img: [{ hardware: "gpu", pricePerHour: 0.9, batchLatencyMs: [[1, 20], [8, 34]] }],
};

describe("pipeline", () => {
  it("pipeline - a valid pipeline has no errors and a topological order", () => {
    expect(validatePipeline(social, profiles)).toEqual([]);
    expect(topologicalOrder(social)).toEqual(["pre", "lang", "img", "nmt"]);
    expect(rootModels(social)).toEqual(["pre"]);
  });

  it("pipeline - validation reports every error", () => {
    const bad: Pipeline = {
      name: "bad",
      models: ["a", "b", "a"],
      edges: [{ from: "a", to: "x" }, { from: "b", to: "b", probability: 1.5 }],
    };
    expect(validatePipeline(bad, { a: [{ hardware: "cpu", pricePerHour: 1, batchLatencyMs: [[2, 0]] }] })).toEqual([
      "model a is declared twice",
      "edge a → x: unknown model x",
      "edge b → b: probability 1.5 is not in (0, 1]",
      "edge b → b: a model cannot feed itself",
      "model a on cpu: no latency for batch 1",
      "model a on cpu: latency 0 ms at batch 2 is not positive",
      "model b has no profile",
    ]);
    expect(validatePipeline({ name: "cyc", models: ["a", "b"], edges: [{ from: "a", to: "b" }, { from: "b", to: "a" }] }))
      .toEqual(["pipeline cyc: the edges form a cycle"]);
  });

  it("pipeline - scale factors follow conditional edges", () => {
    expect(scaleFactors(social)).toEqual({ pre: 1, lang: 1, nmt: 0.3, img: 1 });
    // Diamond with two conditional branches into d: s_d = 1 − (1 − 0.5)(1 − 0.2) = 0.6; e after d at 50%: 0.3.
    const diamond: Pipeline = {
      name: "diamond", models: ["a", "b", "c", "d", "e"],
      edges: [{ from: "a", to: "b" }, { from: "a", to: "c" }, { from: "b", to: "d", probability: 0.5 }, { from: "c", to: "d", probability: 0.2 }, { from: "d", to: "e", probability: 0.5 }],
    };
    const s = scaleFactors(diamond);
    expect(s.d).toBeCloseTo(0.6, 12);
    expect(s.e).toBeCloseTo(0.3, 12);
  });

  it("pipeline - service time is the longest path; cost and throughput per replica", () => {
    const config = {
      pre: { hardware: "cpu", maxBatch: 1, replicas: 2 },
      lang: { hardware: "gpu", maxBatch: 4, replicas: 1 },
      nmt: { hardware: "gpu", maxBatch: 8, replicas: 3 },
      img: { hardware: "gpu", maxBatch: 1, replicas: 1 },
    };
    // pre 2 → lang T(4) = 8 → nmt T(8) = 68: 78 ms; pre → img T(1) = 20: 22 ms.
    expect(serviceTimeMs(social, profiles, config)).toBe(78);
    // 2·0.1 + 0.9 + 3·0.9 + 0.9 = 4.7 $/h
    expect(configCostPerHour(profiles, config)).toBeCloseTo(4.7, 12);
    expect(replicaThroughputQps(profiles, "nmt", config.nmt)).toBeCloseTo(8000 / 68, 12);
  });
});
