import { describe, expect, it } from "vitest";
import { chooseContainer, expiredContainers, planPrewarm, type FunctionContainerView } from "../../src/index.js";

const c = (id: string, state: FunctionContainerView["state"], objects: string[], lastUsedMs: number, claimed = false): FunctionContainerView => ({ id, state, objects, lastUsedMs, claimed });
const queue = { maxConcurrency: 3, whenFull: "queue" as const };

describe("function pool - choose a container", () => {
  const cases: Array<{ name: string; containers: FunctionContainerView[]; limits?: typeof queue | { maxConcurrency: number; whenFull: "reject" }; want: { action: string; id?: string } }> = [
    { name: "empty pool: start one", containers: [], want: { action: "start" } },
    {
      name: "warm beats idle without the model, most recently used first",
      containers: [c("a", "idle", ["m"], 100), c("b", "idle", ["m"], 300), c("c", "idle", [], 500)],
      want: { action: "warm", id: "b" },
    },
    { name: "idle without the model: load it there", containers: [c("a", "busy", ["m"], 900), c("b", "idle", ["x"], 100)], want: { action: "load", id: "b" } },
    {
      name: "an unclaimed starting container beats starting a new one",
      containers: [c("a", "busy", ["m"], 0), c("b", "starting", [], 0, true), c("c", "starting", [], 0, false)],
      want: { action: "claim", id: "c" },
    },
    { name: "all busy below the limit: start", containers: [c("a", "busy", ["m"], 0), c("b", "starting", [], 0, true)], want: { action: "start" } },
    { name: "all busy at the limit: wait", containers: [c("a", "busy", ["m"], 0), c("b", "busy", ["m"], 0), c("d", "starting", [], 0, true)], want: { action: "wait" } },
    {
      name: "all busy at the limit, rejecting: reject",
      containers: [c("a", "busy", ["m"], 0)],
      limits: { maxConcurrency: 1, whenFull: "reject" },
      want: { action: "reject" },
    },
  ];
  for (const t of cases) {
    it(t.name, () => {
      const choice = chooseContainer(t.containers, "m", t.limits ?? queue);
      expect(choice.action).toBe(t.want.action);
      if (t.want.id) expect((choice as { id: string }).id).toBe(t.want.id);
      expect(choice.reason.length).toBeGreaterThan(0);
    });
  }
});

describe("function pool - keep-alive", () => {
  it("expires idle containers unused for keepAliveMs, never busy or starting ones", () => {
    const containers = [c("a", "idle", [], 0), c("b", "idle", [], 400_001), c("d", "busy", [], 0), c("e", "starting", [], 0)];
    // now 1_000_000, keep-alive 600_000: a idle 1_000_000 ms (expires), b idle 599_999 ms (stays)
    expect(expiredContainers(containers, 1_000_000, 600_000)).toEqual([{ id: "a", reason: "idle for 1000000 ms ≥ keep-alive 600000 ms" }]);
    // exactly keepAliveMs idle expires
    expect(expiredContainers(containers, 1_000_001, 600_000).map((e) => e.id)).toEqual(["a", "b"]);
  });
});

describe("function pool - pre-warm", () => {
  it("without a model: starts containers until n exist, within maxConcurrency", () => {
    expect(planPrewarm([], 2, 4)).toMatchObject({ load: [], start: 2 });
    expect(planPrewarm([c("a", "busy", [], 0)], 3, 4)).toMatchObject({ start: 2 });
    // asking again for the same n starts nothing
    expect(planPrewarm([c("a", "busy", [], 0), c("b", "idle", [], 0)], 2, 4)).toMatchObject({ start: 0 });
    // n = 10 capped at maxConcurrency 4, 1 exists: 3 more
    expect(planPrewarm([c("a", "idle", [], 0)], 10, 4)).toMatchObject({ start: 3 });
  });

  it("with a model: counts holders, loads it into idle containers first, then starts new ones", () => {
    const containers = [c("a", "idle", ["m"], 0), c("b", "idle", ["x"], 10), c("d", "idle", [], 20), c("e", "busy", ["x"], 30)];
    // 1 holds m, 3 wanted: the two idle without m load it (most recent first), nothing starts
    expect(planPrewarm(containers, 3, 8, "m")).toMatchObject({ load: ["d", "b"], start: 0 });
    // 6 wanted: 1 holds, 2 load, 3 start (4 exist, room for 4)
    expect(planPrewarm(containers, 6, 8, "m")).toMatchObject({ load: ["d", "b"], start: 3 });
    // maxConcurrency 5: 6 wanted → 5; 1 holds, 2 load, 1 starts, 1 short (e is busy)
    const plan = planPrewarm(containers, 6, 5, "m");
    expect(plan).toMatchObject({ load: ["d", "b"], start: 1 });
    expect(plan.reason).toBe("1 of 5 wanted containers hold m; 2 idle load it; start 1; 1 short: maxConcurrency 5 reached or containers busy");
  });
});
