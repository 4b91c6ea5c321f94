import { describe, expect, it } from "vitest";
import { initialProvisioningState, planProvisioning, type InstanceTypeSpec, type ProvisioningState } from "../../src/scaling/provisioning.js";

// A: 10 qps at $0.36/h = $0.0001/s, overhead 180 s → $0.018. B: 40 qps at $1.08/h = $0.0003/s, overhead $0.054.
const A: InstanceTypeSpec = { name: "A", pricePerHour: 0.36, capacityQps: 10 };
const B: InstanceTypeSpec = { name: "B", pricePerHour: 1.08, capacityQps: 40 };
const flat = (qps: number, steps = 10): number[] => new Array<number>(steps).fill(qps);

describe("provisioning", () => {
  const cases: Array<{ name: string; forecast: number[]; plan: Record<string, number> }> = [
    // 35 qps over steps 5..10 (span 360 s). A: N = 10·360 = 3600, (0.018 + 0.036)/3600 = 1.5e-5;
    // B: N = 35·360 = 12600, (0.054 + 0.108)/12600 = 1.29e-5 → B; 40 ≥ 35, done.
    { name: "a large load takes the cheaper-per-request big type", forecast: flat(35), plan: { B: 1 } },
    // 12 qps. A: 3600 → 1.5e-5; B: N = 12·360 = 4320 → 0.162/4320 = 3.75e-5 → A. Then 2 unmet:
    // A: 0.054/720 = 7.5e-5; B: 0.162/720 = 2.25e-4 → A.
    { name: "a small load takes small instances", forecast: flat(12), plan: { A: 2 } },
    // Spike at step 5 only: 50, then 10. Round 1 (e = 10): A: N = (10 + 5·10)·60 = 3600 → 1.5e-5;
    // B: N = (40 + 50)·60 = 5400 → 0.162/5400 = 3e-5 → A. Round 2 (40 unmet, e = 5, span 60 s):
    // A: (0.018 + 0.006)/600 = 4e-5; B: (0.054 + 0.018)/2400 = 3e-5 → B.
    { name: "a short spike is covered by the type cheapest over the spike's span", forecast: [0, 0, 0, 0, 50, 10, 10, 10, 10, 10], plan: { A: 1, B: 1 } },
    { name: "no load at t0 + τ: empty plan", forecast: [50, 50, 50, 50, 0, 50], plan: {} },
  ];
  for (const c of cases) {
    it(`provisioning - ${c.name}`, () => {
      const d = planProvisioning({ forecastQps: c.forecast, types: [A, B], running: [], state: initialProvisioningState });
      expect(d.plan).toEqual(c.plan);
      expect(d.launches.map((l) => l.type).sort()).toEqual(Object.entries(c.plan).flatMap(([k, v]) => new Array<string>(v).fill(k)).sort());
      expect(d.destroys).toEqual([]);
    });
  }

  it("provisioning - running instances come first (no launch overhead)", () => {
    // 12 qps with one A running: the running A costs 0.036/3600 (no overhead) < any new one; 2 unmet → new A.
    const d = planProvisioning({ forecastQps: flat(12), types: [A, B], running: [{ id: "a1", type: "A" }], state: initialProvisioningState });
    expect(d.plan).toEqual({ A: 2 });
    expect(d.kept).toEqual(["a1"]);
    expect(d.launches).toEqual([{ type: "A", reason: "2.0 qps unmet at t0+5; cheapest at $75.00 per 1M requests over steps 5-10" }]);
  });

  it("provisioning - a running big instance is kept over launching cheaper small ones", () => {
    // 12 qps with B running: B costs 0.108/4320 = 2.5e-5 with no overhead vs A new 1.5e-5 — A is still cheaper per
    // request, so the plan is A + A and B is destroyed (nothing in the history holds it).
    const d = planProvisioning({ forecastQps: flat(12), types: [A, B], running: [{ id: "b1", type: "B" }], state: initialProvisioningState });
    expect(d.plan).toEqual({ A: 2 });
    expect(d.destroys.map((x) => x.id)).toEqual(["b1"]);
    // 38 qps: running B: 0.108/(38·360) = 7.9e-6 beats a new B (1.18e-5) and A → keep B alone.
    const e = planProvisioning({ forecastQps: flat(38), types: [A, B], running: [{ id: "b1", type: "B" }], state: initialProvisioningState });
    expect(e.plan).toEqual({ B: 1 });
    expect(e.launches).toEqual([]);
  });

  it("provisioning - destroys wait until the last 6 plans all want fewer", () => {
    let running = [{ id: "b1", type: "B" }, { id: "b2", type: "B" }, { id: "b3", type: "B" }];
    let state: ProvisioningState = { recentPlans: [{ B: 3 }] };
    const destroyed: number[] = [];
    for (let minute = 0; minute < 7; minute++) {
      const d = planProvisioning({ forecastQps: flat(35), types: [A, B], running, state });
      state = d.state;
      destroyed.push(d.destroys.length);
      running = running.filter((r) => !d.destroys.some((x) => x.id === r.id));
    }
    // History [3], then plans of 1: the 3 stays in the window for 5 more plans (6 remembered), then 2 go at once.
    expect(destroyed).toEqual([0, 0, 0, 0, 0, 2, 0]);
    expect(state.recentPlans).toHaveLength(6);
  });

  it("provisioning - types that miss the SLO are never chosen and their instances go", () => {
    const slow = { ...B, meetsSlo: false };
    const d = planProvisioning({ forecastQps: flat(35), types: [A, slow], running: [{ id: "b1", type: "B" }], state: initialProvisioningState });
    expect(d.plan).toEqual({ A: 4 });
    expect(d.destroys).toEqual([{ id: "b1", type: "B", reason: "B cannot meet the SLO" }]);
    expect(() => planProvisioning({ forecastQps: flat(1), types: [slow], running: [], state: initialProvisioningState }))
      .toThrow("provisioning: no instance type can meet the SLO");
  });

  it("provisioning - a cheaper spot type wins and an interrupted one is replaced", () => {
    // Spot B at 30% of the price: (0.0162 + 0.0324)/12600 = 3.9e-6 per request.
    const spotB: InstanceTypeSpec = { ...B, name: "B-spot", pricePerHour: 0.324, spot: true };
    const d = planProvisioning({ forecastQps: flat(35), types: [A, B, spotB], running: [], state: initialProvisioningState });
    expect(d.plan).toEqual({ "B-spot": 1 });
    // The caller got a 2-minute notice for s1 and leaves it out of `running`: the plan launches a replacement.
    const e = planProvisioning({ forecastQps: flat(35), types: [A, B, spotB], running: [], state: d.state });
    expect(e.launches.map((l) => l.type)).toEqual(["B-spot"]);
  });
});
