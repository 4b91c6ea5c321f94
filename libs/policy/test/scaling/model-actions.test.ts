import { describe, expect, it } from "vitest";
import {
  chooseWorker,
  planModelActions,
  windowedArrivalsQps,
  type ModelAction,
  type ModelActionsConfig,
  type ModelActionsState,
  type VariantFloor,
  type VariantProfile,
  type WorkerRuns,
} from "../../src/index.js";

// Digits-like variants: a batch-1 CPU variant (20 QPS, 1 thread, price 1/s), a batch-8 one (100 QPS,
// 2 threads, 2/s), and a batch-8 GPU variant (800 QPS, one accelerator, 10/s). λ = 0.1 /s, T_load 2 s
// (GPU 5 s): a new instance costs C·(1 + 0.1·2) = 1.2·C (GPU 1.5·C).
const v = (name: string, o: Partial<VariantProfile>): VariantProfile => ({
  name, model: "digits", app: "digits", hardware: "cpu", batchSize: 1, accuracy: 0.9,
  latencyMs: { 1: 50 }, peakQps: 20, loadLatencyMs: 2000, pricePerS: 1, profiled: true, ...o,
});
const D1 = v("d1", { resources: { threads: 1, memoryBytes: 1e8 } });
const D8 = v("d8", { batchSize: 8, latencyMs: { 1: 40, 8: 80 }, peakQps: 100, pricePerS: 2, resources: { threads: 2, memoryBytes: 1e8 } });
const G8 = v("g8", { hardware: "gpu", batchSize: 8, latencyMs: { 1: 5, 8: 10 }, peakQps: 800, loadLatencyMs: 5000, pricePerS: 10, resources: { accelerators: 1, memoryBytes: 1e8 } });
const catalog = [D1, D8, G8];

type Runs = Record<string, [ready: number, loading: number, qps: number]>;
/** A worker's view at time `atMs` (received then too). */
function w(name: string, atMs: number, runs: Runs, o: { kind?: string; free?: Record<string, number>; utilisation?: number } = {}): WorkerRuns {
  return {
    name,
    kind: o.kind ?? "cpu",
    atMs,
    seenAtMs: atMs,
    utilisation: o.utilisation ?? 0,
    free: o.free ?? { threads: 4, memoryBytes: 1e9, accelerators: 0 },
    variants: Object.fromEntries(Object.entries(runs).map(([k, [ready, loading, arrivalsQps]]) => [k, { ready, loading, arrivalsQps }])),
  };
}

const brief = (a: ModelAction): string => {
  switch (a.kind) {
    case "decision":
      return a.decision.action === "hold" ? `hold ${a.decision.model}` : `${a.decision.action} ${a.decision.variant} ×${a.decision.count}`;
    case "add":
    case "unload":
      return `${a.kind} ${a.variant} ×${a.count} on ${a.worker}`;
    case "escalate":
      return `escalate ${a.variant} ×${a.count} (${a.hardware})`;
    case "abandon":
      return `abandon ${a.variant}`;
  }
};

interface Tick {
  workers: WorkerRuns[];
  want: string[];
}

/** Runs ticks in order, carrying the state; returns every tick's actions. */
function run(ticks: Tick[], config: Partial<ModelActionsConfig> = {}): ModelAction[][] {
  let state: ModelActionsState | undefined;
  const out: ModelAction[][] = [];
  for (const t of ticks) {
    const nowMs = Math.max(...t.workers.map((x) => x.seenAtMs));
    const res = planModelActions({ nowMs, workers: t.workers, catalog, sloMsByModel: { digits: 1000 }, config, state });
    state = res.state;
    out.push(res.actions);
  }
  return out;
}

describe("model-actions", () => {
  it("model-actions - load is Σ qps·ms / Σ ms over the samples", () => {
    // a: (10·1000 + 4·2000) / 3000 = 6; b: 2·2000 / 3000 = 1.33
    const load = windowedArrivalsQps([
      { atMs: 1000, seenAtMs: 1000, ms: 1000, qps: { a: 10 } },
      { atMs: 3000, seenAtMs: 3000, ms: 2000, qps: { a: 4, b: 2 } },
    ]);
    expect(load.a).toBeCloseTo(6, 10);
    expect(load.b).toBeCloseTo(4 / 3, 10);
  });

  const scenarios: Array<{ name: string; ticks: Tick[]; config?: Partial<ModelActionsConfig> }> = [
    {
      // Window 5 s: at 4 s the samples 0..4 s give (4·10 + 50) / 5 = 18 < 20 / 1.05; at 5 s the samples
      // 1..5 s give (3·10 + 2·50) / 5 = 26 > 20 / 1.05 → replicate ⌈(27.3 − 20) / 20⌉ = 1 (1.2 < d8's 2.4 − 1).
      name: "the load is the mean over the 5 s window",
      ticks: [0, 1000, 2000, 3000, 4000, 5000].map((t) => ({
        workers: [w("w1", t, { d1: [1, 0, t >= 4000 ? 50 : 10] })],
        want: t === 5000 ? ["replicate d1 ×1", "add d1 ×1 on w1"] : [],
      })),
    },
    {
      // Load 30 on one d1 (20 QPS): replicate. The next report does not show the add yet: it counts as
      // loading (capacity 40), so nothing more; then the worker shows it loading, then ready.
      name: "an add in flight counts as loading until the worker shows it",
      ticks: [
        { workers: [w("w1", 0, { d1: [1, 0, 30] })], want: ["replicate d1 ×1", "add d1 ×1 on w1"] },
        { workers: [w("w1", 1000, { d1: [1, 0, 30] })], want: [] },
        { workers: [w("w1", 2000, { d1: [1, 1, 30] })], want: [] },
        { workers: [w("w1", 3000, { d1: [2, 0, 30] })], want: [] },
      ],
    },
    {
      // Reports received 3 s after the add still do not show it: it failed; the autoscaler decides again.
      name: "an add the worker never shows is forgotten after settleMs",
      ticks: [
        { workers: [w("w1", 0, { d1: [1, 0, 30] })], want: ["replicate d1 ×1", "add d1 ×1 on w1"] },
        { workers: [w("w1", 1000, { d1: [1, 0, 30] })], want: [] },
        { workers: [w("w1", 2000, { d1: [1, 0, 30] })], want: [] },
        { workers: [w("w1", 3000, { d1: [1, 0, 30] })], want: ["replicate d1 ×1", "add d1 ×1 on w1"] },
      ],
    },
    {
      // Two d1 at 39 QPS: target 40.95 > 40. Replicate d1 ×1 costs 1.2; upgrade d8 ×1 costs 2·1.2 − 2 = 0.4.
      // The old d1 go only once d8 is ready; meanwhile the model is held. After the unload, the load
      // (d1's arrivals, 39) is d8's: 100 QPS is enough, and a downgrade to d1 ×3 would cost 3.6 − 2 > 0.
      name: "an upgrade unloads the old instances once the new ones are ready",
      ticks: [
        { workers: [w("w1", 0, { d1: [2, 0, 39] })], want: ["upgrade d8 ×1", "add d8 ×1 on w1"] },
        { workers: [w("w1", 1000, { d1: [2, 0, 39] })], want: ["hold digits"] },
        { workers: [w("w1", 2000, { d1: [2, 0, 39], d8: [0, 1, 0] })], want: ["hold digits"] },
        { workers: [w("w1", 3000, { d1: [2, 0, 39], d8: [1, 0, 0] })], want: ["unload d1 ×2 on w1"] },
        // The report lags: d1 still shows; the unload in flight hides it.
        { workers: [w("w1", 4000, { d1: [2, 0, 20], d8: [1, 0, 19] })], want: [] },
      ],
    },
    {
      // The new instance never shows (the worker refused it): after settleMs the swap is abandoned with
      // the old instances kept, and the autoscaler decides again.
      name: "a swap whose new instances fail is abandoned",
      ticks: [
        { workers: [w("w1", 0, { d1: [2, 0, 39] })], want: ["upgrade d8 ×1", "add d8 ×1 on w1"] },
        { workers: [w("w1", 1000, { d1: [2, 0, 39] })], want: ["hold digits"] },
        { workers: [w("w1", 3000, { d1: [2, 0, 39] })], want: ["abandon d8", "upgrade d8 ×1", "add d8 ×1 on w1"] },
      ],
    },
    {
      name: "a swap still loading after swapTimeoutMs is abandoned",
      config: { swapTimeoutMs: 10_000 },
      ticks: [
        { workers: [w("w1", 0, { d1: [2, 0, 39] })], want: ["upgrade d8 ×1", "add d8 ×1 on w1"] },
        { workers: [w("w1", 10_000, { d1: [2, 0, 39], d8: [0, 1, 0] })], want: ["hold digits"] },
        // Abandoned (d1 stays); capacity 2·20 + 100 counts the d8 still loading, and nothing is
        // removed while an instance loads.
        { workers: [w("w1", 11_000, { d1: [2, 0, 39], d8: [0, 1, 0] })], want: ["abandon d8"] },
      ],
    },
    {
      // w1 has no free thread: the replica goes to the least busy CPU worker with room (w2, 10% busy;
      // w3 is 50%; g1 is a GPU worker), and the model waits on w1 until it is ready there.
      name: "place-elsewhere picks a worker with chooseWorker and holds the model",
      ticks: [
        {
          workers: [
            w("w1", 0, { d1: [1, 0, 30] }, { free: { threads: 0, memoryBytes: 1e9, accelerators: 0 } }),
            w("w2", 0, {}, { utilisation: 0.1 }),
            w("w3", 0, {}, { utilisation: 0.5 }),
            w("g1", 0, {}, { kind: "gpu", free: { threads: 4, memoryBytes: 1e9, accelerators: 1 } }),
          ],
          want: ["place-elsewhere d1 ×1", "add d1 ×1 on w2"],
        },
        {
          workers: [
            w("w1", 1000, { d1: [1, 0, 30] }, { free: { threads: 0, memoryBytes: 1e9, accelerators: 0 } }),
            w("w2", 1000, { d1: [0, 1, 0] }, { utilisation: 0.1 }),
            w("w3", 1000, {}, { utilisation: 0.5 }),
          ],
          want: ["hold digits"],
        },
        // Ready on w2: the model is no longer held on w1, which decides again on its own load (INFaaS
        // scales per worker): (30 + 30 + 15) / 3 = 25 QPS on its one d1 is still too much.
        {
          workers: [
            w("w1", 2000, { d1: [1, 0, 15] }, { free: { threads: 0, memoryBytes: 1e9, accelerators: 0 } }),
            w("w2", 2000, { d1: [1, 0, 15] }, { utilisation: 0.1 }),
            w("w3", 2000, {}, { utilisation: 0.5 }),
          ],
          want: ["place-elsewhere d1 ×1", "add d1 ×1 on w2"],
        },
      ],
    },
    {
      // Only w1 (full): nothing can take the replica → ask the VM autoscaler for a CPU worker.
      name: "place-elsewhere with no worker escalates",
      ticks: [{ workers: [w("w1", 0, { d1: [1, 0, 30] }, { free: { threads: 0, memoryBytes: 1e9, accelerators: 0 } })], want: ["place-elsewhere d1 ×1", "escalate d1 ×1 (cpu)"] }],
    },
    {
      // 700 QPS on one d1: target 735. d1 ×36 costs 43.2; d8 ×8 costs 8·2.4 − 1 = 18.2; g8 ×1 costs
      // 10·1.5 − 1 = 14 → g8, a GPU variant: it fits nothing on a CPU worker, so it goes to the GPU
      // worker (which has a free accelerator), and d1 is unloaded once it is ready there.
      name: "an upgrade to another hardware kind is placed on a worker of that kind",
      ticks: [
        {
          workers: [w("w1", 0, { d1: [1, 0, 700] }), w("g1", 0, {}, { kind: "gpu", free: { threads: 4, memoryBytes: 1e9, accelerators: 1 } })],
          want: ["place-elsewhere g8 ×1", "add g8 ×1 on g1"],
        },
        {
          workers: [w("w1", 5000, { d1: [1, 0, 700] }), w("g1", 5000, { g8: [1, 0, 0] }, { kind: "gpu", free: { threads: 4, memoryBytes: 1e9, accelerators: 0 } })],
          want: ["unload d1 ×1 on w1"],
        },
      ],
    },
    {
      // The same load with no GPU worker: g8 is no candidate (none can be added), so d8 ×8 (18.2) wins;
      // its 8 × 2 threads fit in the 16 free plus the one d1 frees.
      name: "variants of a kind no worker has are no candidates unless one can be added",
      ticks: [{ workers: [w("w1", 0, { d1: [1, 0, 700] }, { free: { threads: 16, memoryBytes: 1e9, accelerators: 0 } })], want: ["upgrade d8 ×8", "add d8 ×8 on w1"] }],
    },
    {
      // A GPU worker with a free accelerator replicates its GPU variant: 900 QPS on one g8 (800).
      name: "an accelerator variant is replicated on its worker",
      ticks: [{ workers: [w("g1", 0, { g8: [1, 0, 900] }, { kind: "gpu", free: { threads: 4, memoryBytes: 1e9, accelerators: 1 } })], want: ["replicate g8 ×1", "add g8 ×1 on g1"] }],
    },
  ];
  for (const s of scenarios) {
    it(`model-actions - ${s.name}`, () => {
      const got = run(s.ticks, s.config);
      expect(got.map((actions) => actions.map(brief))).toEqual(s.ticks.map((t) => t.want));
    });
  }

  it("model-actions - a kind the VM autoscaler can add makes its variants candidates", () => {
    // As above, but a GPU worker can be added: g8 ×1 (14) beats d8 ×8 (18.2); no GPU worker runs → escalate.
    const res = planModelActions({ nowMs: 0, workers: [w("w1", 0, { d1: [1, 0, 700] }, { free: { threads: 16, memoryBytes: 1e9, accelerators: 0 } })], catalog, sloMsByModel: { digits: 1000 }, launchableKinds: ["gpu"] });
    expect(res.actions.map(brief)).toEqual(["place-elsewhere g8 ×1", "escalate g8 ×1 (gpu)"]);
  });

  it("model-actions - arrivals of a variant no longer running count toward its model", () => {
    // d1 served 150 QPS until it was unloaded; d8 (100 QPS) now runs alone: the model's load is 150.
    const state: ModelActionsState = { autoscaler: {}, swaps: [], inFlight: [], arrivals: { w1: [{ atMs: 0, seenAtMs: 0, ms: 1000, qps: { d1: 150 } }] } };
    const res = planModelActions({ nowMs: 1000, workers: [w("w1", 1000, { d8: [1, 0, 150] })], catalog, sloMsByModel: { digits: 1000 }, state });
    const d = res.actions.find((a) => a.kind === "decision");
    expect(d?.kind === "decision" && d.decision.reason).toContain("load 150 QPS");
  });

  it("model-actions - reasons say what happened", () => {
    const got = run([
      { workers: [w("w1", 0, { d1: [2, 0, 39] })], want: [] },
      { workers: [w("w1", 1000, { d1: [2, 0, 39], d8: [1, 0, 0] })], want: [] },
    ]);
    expect(got[1]?.[0]).toEqual({ kind: "unload", worker: "w1", model: "digits", variant: "d1", count: 2, reason: "upgrade to d8 ×1: 1 of 1 new d8 ready on w1, unloading the d1 ×2 they replace" });
    const esc = run([{ workers: [w("w1", 0, { d1: [1, 0, 30] }, { free: { threads: 0, memoryBytes: 1e9, accelerators: 0 } })], want: [] }])[0]?.find((a) => a.kind === "escalate");
    expect(esc?.reason).toMatch(/; no other worker can take 1 \(no live cpu worker\)$/);
  });
});

describe("placement - by resources", () => {
  const view = (worker: string, free: Record<string, number>, utilisation = 0) => ({ worker, hardware: "gpu", utilisation, threads: 0, threadsUsed: 0, variants: [], seenAtMs: 0, free });
  it("placement - by resources: a worker needs every resource the instance takes", () => {
    const request = { variant: "g8", hardware: "gpu", threads: 0, resources: { accelerators: 1, memoryBytes: 100 }, allowOversubscription: false };
    expect(chooseWorker([view("a", { accelerators: 0, memoryBytes: 1000 }), view("b", { accelerators: 1, memoryBytes: 1000 }, 0.9)], request, 0).worker).toBe("b");
    expect(chooseWorker([view("a", { accelerators: 1, memoryBytes: 50 })], request, 0)).toEqual({ worker: undefined, reason: "no gpu worker has room for g8 (accelerators 1, memoryBytes 100)" });
    // A resource the worker does not list is one it lacks.
    expect(chooseWorker([view("a", { memoryBytes: 1000 })], request, 0).worker).toBeUndefined();
  });
});

describe("model-actions - floors (pipeline plans)", () => {
  /** Runs ticks with floors, carrying the state. */
  function runFloors(ticks: Tick[], floors: VariantFloor[]): string[][] {
    let state: ModelActionsState | undefined;
    return ticks.map((t) => {
      const nowMs = Math.max(...t.workers.map((x) => x.seenAtMs));
      const res = planModelActions({ nowMs, workers: t.workers, catalog, sloMsByModel: { digits: 1000 }, state, floors });
      state = res.state;
      return res.actions.map(brief);
    });
  }
  const floor = (variant: string, count: number): VariantFloor => ({ variant, count, owner: "pipeline-p", reason: `pipeline p stage s: plan, ${count} replicas` });
  const threads = (n: number) => ({ free: { threads: n, memoryBytes: 1e9, accelerators: 0 } });

  it("model-actions - floors: missing instances go first to workers without the variant, then to any with room; the rest is escalated", () => {
    // d1 takes 1 thread. a has 2 free, b 1. #1: both idle, no d1 → a (name order); #2: b (a runs d1 now);
    // #3: both run d1 → any with room: a (1 thread left); #4: no thread left anywhere → escalate ×1.
    const got = runFloors([{ workers: [w("a", 0, {}, threads(2)), w("b", 0, {}, threads(1))], want: [] }], [floor("d1", 4)]);
    expect(got[0]).toEqual(["add d1 ×1 on a", "add d1 ×1 on b", "add d1 ×1 on a", "escalate d1 ×1 (cpu)"]);
  });

  it("model-actions - floors: scarce room is shared between the floors, one instance of each in turn", () => {
    // 4 free threads; d1 ×3 (1 thread each) and d8 ×2 (2 threads each) wanted. Round 1: d1 (3 left), d8
    // (1 left); round 2: d1 (0 left), then d8 finds no room; round 3: d1 none either → one of each escalated
    // (placed in variant order, d1 would have taken 3 threads and d8 only 0).
    const got = runFloors([{ workers: [w("a", 0, {}, threads(4))], want: [] }], [floor("d1", 3), floor("d8", 2)]);
    expect(got[0]).toEqual(["add d1 ×1 on a", "add d8 ×1 on a", "add d1 ×1 on a", "escalate d1 ×1 (cpu)", "escalate d8 ×1 (cpu)"]);
  });

  it("model-actions - floors: adds in flight count; a floor met adds nothing", () => {
    const got = runFloors([
      { workers: [w("a", 0, {}, threads(4))], want: [] },
      // The report does not show the adds yet: in flight, nothing more.
      { workers: [w("a", 1000, {}, threads(4))], want: [] },
      { workers: [w("a", 2000, { d1: [0, 2, 0] }, threads(2))], want: [] },
    ], [floor("d1", 2)]);
    expect(got).toEqual([["add d1 ×1 on a", "add d1 ×1 on a"], [], []]);
  });

  it("model-actions - floors: the autoscaler removes idle instances only down to the floor", () => {
    // Three idle d1 (no load): the autoscaler may remove one after T_v = 2 s at a time. Floor 2: one goes.
    // Without a floor it goes on down to minInstances = 1.
    const ticks = (n: number[]): Tick[] => [0, 1000, 2000, 3000, 4000, 5000, 6000].map((t, i) => ({ workers: [w("a", t, { d1: [n[i]!, 0, 0] })], want: [] }));
    const withFloor = runFloors(ticks([3, 3, 3, 2, 2, 2, 2]), [floor("d1", 2)]);
    expect(withFloor.flat().filter((a) => a.startsWith("unload") || a.startsWith("remove"))).toEqual(["remove d1 ×1", "unload d1 ×1 on a"]);
    const without = runFloors(ticks([3, 3, 3, 2, 2, 2, 1]), []);
    expect(without.flat().filter((a) => a.startsWith("unload"))).toEqual(["unload d1 ×1 on a", "unload d1 ×1 on a"]);
  });

  it("model-actions - floors: a pinned variant is not downgraded (the plan chose it); replicas are still added under load", () => {
    // One idle d8 (2/s): downgrading to d1 ×1 (1/s) saves money after T_v; pinned by a floor it stays.
    const idle = [0, 1000, 2000, 3000].map((t) => ({ workers: [w("a", t, { d8: [1, 0, 0] })], want: [] }));
    expect(runFloors(idle, []).flat()).toContain("downgrade d1 ×1");
    expect(runFloors(idle, [floor("d8", 1)]).flat()).toEqual([]);
    // 150 QPS on one pinned d8 (100): no upgrade to g8 (no GPU worker anyway) — replicate d8.
    expect(runFloors([{ workers: [w("a", 0, { d8: [1, 0, 150] })], want: [] }], [floor("d8", 1)])[0]).toEqual(["replicate d8 ×1", "add d8 ×1 on a"]);
  });

  it("model-actions - floors: a lowered floor unloads what it no longer wants, from the worker that runs most; a lifted one, the rest", () => {
    // Floor 3 on d1 (a: 2, b: 1); the Tuner lowers it to 1 → two unloads, both from a (2 there, then 1
    // each: name order). The next report does not show them yet: in flight, nothing more. Then the
    // pipeline goes (no floor): the last one is unloaded too.
    let state: ModelActionsState | undefined;
    const tick = (t: number, runs: Record<string, Runs>, floors: VariantFloor[]): string[] => {
      const res = planModelActions({ nowMs: t, workers: Object.entries(runs).map(([name, r]) => w(name, t, r)), catalog, sloMsByModel: {}, state, floors });
      state = res.state;
      return res.actions.map(brief);
    };
    expect(tick(0, { a: { d1: [2, 0, 0] }, b: { d1: [1, 0, 0] } }, [floor("d1", 3)])).toEqual([]);
    expect(tick(1000, { a: { d1: [2, 0, 0] }, b: { d1: [1, 0, 0] } }, [floor("d1", 1)])).toEqual(["unload d1 ×1 on a", "unload d1 ×1 on a"]);
    expect(tick(2000, { a: { d1: [2, 0, 0] }, b: { d1: [1, 0, 0] } }, [floor("d1", 1)])).toEqual([]);
    expect(tick(3000, { a: {}, b: { d1: [1, 0, 0] } }, [])).toEqual(["unload d1 ×1 on b"]);
  });

  it("model-actions - floors: two plans on one variant add up; an escalation names the owner", () => {
    const res = planModelActions({ nowMs: 0, workers: [w("a", 0, {}, threads(1))], catalog, sloMsByModel: {}, floors: [floor("d1", 1), { ...floor("d1", 1), owner: "pipeline-q" }] });
    expect(res.actions.map(brief)).toEqual(["add d1 ×1 on a", "escalate d1 ×1 (cpu)"]);
    const esc = res.actions.find((a) => a.kind === "escalate");
    expect(esc).toMatchObject({ worker: "pipeline-p", reason: "pipeline p stage s: plan, 1 replicas; pipeline p stage s: plan, 1 replicas: 1 of 2 d1 running and no worker can take 1 more (no cpu worker has room for d1 (threads 1, memoryBytes 100000000))" });
  });
});
