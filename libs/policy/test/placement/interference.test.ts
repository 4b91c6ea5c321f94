import { describe, expect, it } from "vitest";
import { planMigrations, planModelActions, type InterferenceMemory, type MigrationWorker, type ModelAction, type ModelActionsState, type VariantProfile, type WorkerRuns } from "../../src/index.js";

// A CPU variant of one thread (20 QPS) and one of two threads; workers offer threads.
const v = (name: string, threads: number): VariantProfile => ({
  name, model: `m-${name}`, app: "a", hardware: "cpu", batchSize: 1, accuracy: 0.9,
  latencyMs: { 1: 50 }, peakQps: 20, loadLatencyMs: 2000, pricePerS: 1, profiled: true, resources: { threads },
});
const V1 = v("v1", 1);
const V2 = v("v2", 2);
const profiles = new Map([V1, V2].map((p) => [p.name, p]));

function w(name: string, freeThreads: number, ready: Record<string, number>, interfered: string[] = [], utilisation = 0): MigrationWorker {
  return { name, kind: "cpu", seenAtMs: 0, utilisation, free: { threads: freeThreads }, ready, interfered };
}

interface Case {
  name: string;
  workers: MigrationWorker[];
  nowMs?: number;
  memory?: InterferenceMemory;
  inProgress?: string[];
  held?: string[];
  /** "migrate <variant> ×n <from> → <to> (local)" or "hold <variant> on <worker>". */
  want: string[];
}

const brief = (d: ReturnType<typeof planMigrations>["decisions"][number]): string =>
  d.action === "migrate" ? `migrate ${d.variant} ×${d.count} ${d.worker} → ${d.to}${d.local ? " (local)" : ""}` : `hold ${d.variant} on ${d.worker}`;

describe("interference - planMigrations", () => {
  const cases: Case[] = [
    { name: "an Active variant is left alone", workers: [w("a", 3, { v1: 1 })], want: [] },
    { name: "room on its own worker: moved there (other cores, no fetch)", workers: [w("a", 3, { v1: 1 }, ["v1"]), w("b", 4, {})], want: ["migrate v1 ×1 a → a (local)"] },
    // Two instances need 2 free threads; a has 1 → the least-loaded other worker: c (10%) before b (50%).
    { name: "no room for all its instances: to the least-loaded other worker", workers: [w("a", 1, { v1: 2 }, ["v1"]), w("b", 4, {}, [], 0.5), w("c", 4, {}, [], 0.1)], want: ["migrate v1 ×2 a → c"] },
    { name: "a worker with Interfered variants of its own takes none", workers: [w("a", 0, { v1: 1 }, ["v1"]), w("b", 4, { v2: 1 }, ["v2"])], want: ["hold v1 on a", "migrate v2 ×1 b → b (local)"] },
    { name: "a target must have room for every instance moved", workers: [w("a", 0, { v2: 2 }, ["v2"]), w("b", 3, {})], want: ["hold v2 on a"] },
    {
      // Interfered again 30 s after a local move (within 2 min): the worker's contention → elsewhere.
      name: "Interfered again soon after a local move: to another worker although there is room",
      workers: [w("a", 3, { v1: 1 }, ["v1"]), w("b", 4, {})],
      nowMs: 30_000,
      memory: { "a|v1": { atMs: 0, local: true } },
      want: ["migrate v1 ×1 a → b"],
    },
    { name: "a local move long ago does not count", workers: [w("a", 3, { v1: 1 }, ["v1"])], nowMs: 200_000, memory: { "a|v1": { atMs: 0, local: true } }, want: ["migrate v1 ×1 a → a (local)"] },
    { name: "within the cool-down after a move: hold", workers: [w("a", 3, { v1: 1 }, ["v1"])], nowMs: 5_000, memory: { "a|v1": { atMs: 0, local: false } }, want: ["hold v1 on a"] },
    { name: "a move under way: nothing (its swap holds the model)", workers: [w("a", 3, { v1: 1 }, ["v1"])], inProgress: ["a|v1"], want: [] },
    { name: "a model held by another swap: nothing", workers: [w("a", 3, { v1: 1 }, ["v1"])], held: ["a|m-v1"], want: [] },
    // a's two variants: v1 (1 thread) takes b's only free thread; v2 (2) finds no room left.
    { name: "two moves do not count on the same room", workers: [w("a", 0, { v1: 1, v2: 1 }, ["v1", "v2"]), w("b", 1, {})], want: ["migrate v1 ×1 a → b", "hold v2 on a"] },
  ];
  for (const c of cases) {
    it(`interference - ${c.name}`, () => {
      const res = planMigrations({
        nowMs: c.nowMs ?? 0,
        workers: c.workers.map((x) => ({ ...x, seenAtMs: c.nowMs ?? 0 })),
        profileOf: (name) => profiles.get(name),
        inProgress: new Set(c.inProgress ?? []),
        held: (worker, model) => (c.held ?? []).includes(`${worker}|${model}`),
        ...(c.memory ? { memory: c.memory } : {}),
      });
      expect(res.decisions.map(brief)).toEqual(c.want);
      for (const d of res.decisions) expect(d.reason).toContain(`${d.variant} Interfered on ${d.worker}`);
    });
  }

  it("interference - the reasons say where and why", () => {
    const res = planMigrations({ nowMs: 0, workers: [w("a", 0, { v1: 1 }, ["v1"]), w("b", 4, {}, [], 0.25)], profileOf: (n) => profiles.get(n) });
    expect(res.decisions[0]?.reason).toBe("v1 Interfered on a (a has no room for 1 more): moving its 1 instance(s) to b, lowest-utilised cpu worker (25% busy, 0 variants)");
    expect(res.memory).toEqual({ "a|v1": { atMs: 0, local: false } });
    const none = planMigrations({ nowMs: 0, workers: [w("a", 0, { v1: 1 }, ["v1"])], profileOf: (n) => profiles.get(n) });
    expect(none.decisions[0]?.reason).toBe(
      "v1 Interfered on a (a has no room for 1 more), and no other cpu worker free of interference can take 1 (no live cpu worker); the VM autoscaler adds one when every worker of the kind has Interfered variants",
    );
  });

  it("interference - a move in progress keeps its memory current, so the cool-down counts from its end", () => {
    const res = planMigrations({ nowMs: 7_000, workers: [w("a", 3, { v1: 2 }, ["v1"])], profileOf: (n) => profiles.get(n), inProgress: new Set(["a|v1"]), memory: { "a|v1": { atMs: 0, local: true } } });
    expect(res.memory).toEqual({ "a|v1": { atMs: 7_000, local: true } });
  });
});

describe("interference - through planModelActions", () => {
  /** A CPU worker running v1 (one thread), its report showing it Interfered or not. */
  const worker = (name: string, atMs: number, ready: number, loading: number, interfered: boolean, freeThreads: number): WorkerRuns => ({
    name, kind: "cpu", atMs, seenAtMs: atMs, utilisation: 0.2, free: { threads: freeThreads },
    variants: ready + loading > 0 ? { v1: { ready, loading, arrivalsQps: 5, ...(interfered ? { interfered: true } : {}) } } : {},
  });
  const brief = (a: ModelAction): string =>
    a.kind === "decision" ? `${a.decision.action} ${a.decision.model}${a.decision.action === "migrate" ? ` → ${a.decision.to}` : ""}` : a.kind === "unload" ? `unload ${a.variant} ×${a.count} on ${a.worker}${a.oldest ? " (oldest)" : ""}` : `${a.kind} ${a.variant} ×${"count" in a ? a.count : ""} on ${a.worker}`;

  it("interference - a local move adds first, holds the model, then unloads the oldest instance", () => {
    const ticks: Array<{ at: number; runs: WorkerRuns[]; want: string[] }> = [
      // The move, then the autoscaler's hold of the model on a while the swap is under way.
      { at: 1000, runs: [worker("a", 1000, 1, 0, true, 3)], want: ["migrate m-v1 → a", "add v1 ×1 on a", "hold m-v1"] },
      // Loading (2 s): the swap holds the model.
      { at: 2000, runs: [worker("a", 2000, 1, 1, true, 2)], want: ["hold m-v1"] },
      // Ready: the oldest (interfered) instance goes; the report still shows the state Interfered (the
      // state machine judges the new instance over 3 s), so the cool-down, counted from the swap's last
      // tick (2 s), holds.
      { at: 3000, runs: [worker("a", 3000, 2, 0, true, 2)], want: ["unload v1 ×1 on a (oldest)", "hold m-v1"] },
      // Still shown Interfered (the state machine needs its 3 s): the cool-down holds.
      { at: 4000, runs: [worker("a", 4000, 1, 0, true, 3)], want: ["hold m-v1"] },
    ];
    let state: ModelActionsState | undefined;
    for (const t of ticks) {
      const res = planModelActions({ nowMs: t.at, workers: t.runs, catalog: [V1], sloMsByModel: {}, ...(state ? { state } : {}) });
      state = res.state;
      expect(res.actions.map(brief), `t=${t.at}`).toEqual(t.want);
    }
  });

  it("interference - off with interference: false", () => {
    const res = planModelActions({ nowMs: 1000, workers: [worker("a", 1000, 1, 0, true, 3)], catalog: [V1], sloMsByModel: {}, interference: false });
    expect(res.actions).toEqual([]);
  });

  it("interference - a move to another worker unloads the instance on the Interfered one", () => {
    let state: ModelActionsState | undefined;
    const step = (at: number, a: WorkerRuns, b: WorkerRuns): string[] => {
      const res = planModelActions({ nowMs: at, workers: [a, b], catalog: [V1], sloMsByModel: {}, ...(state ? { state } : {}) });
      state = res.state;
      return res.actions.map(brief);
    };
    expect(step(1000, worker("a", 1000, 1, 0, true, 0), worker("b", 1000, 0, 0, false, 4))).toEqual(["migrate m-v1 → b", "add v1 ×1 on b", "hold m-v1"]);
    expect(step(2000, worker("a", 2000, 1, 0, true, 0), worker("b", 2000, 0, 1, false, 3))).toEqual(["hold m-v1"]);
    expect(step(3000, worker("a", 3000, 1, 0, true, 0), worker("b", 3000, 1, 0, false, 3))).toEqual(["unload v1 ×1 on a (oldest)"]);
  });
});
