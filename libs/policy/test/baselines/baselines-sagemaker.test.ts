import { describe, expect, it } from "vitest";
import { initialTargetTrackingState, targetTracking, type TargetTrackingState } from "../../src/baselines/baselines-sagemaker.js";

// One instance serves 10 qps = 600/min; with 2× over-provisioning the target is 300 invocations/instance/min.
function run(loads: number[], instances0: number): number[] {
  let state: TargetTrackingState = initialTargetTrackingState;
  let instances = instances0;
  const out: number[] = [];
  loads.forEach((perMinute, minute) => {
    const d = targetTracking({ nowS: 60 * minute, instances, invocationsLastMinute: perMinute, capacityQps: 10, state });
    state = d.state;
    instances = d.desired;
    out.push(instances);
  });
  return out;
}

describe("baselines-sagemaker", () => {
  it("baselines-sagemaker - scales out after 3 minutes above target, to load / target", () => {
    // 2 instances, 1500/min → 750 per instance > 300; after the 3rd minute desired = ⌈2·750/300⌉ = 5.
    expect(run([1500, 1500, 1500, 1500], 2)).toEqual([2, 2, 5, 5]);
  });

  it("baselines-sagemaker - a 2-minute burst does not trigger it", () => {
    expect(run([1500, 1500, 500, 1500, 1500], 2)).toEqual([2, 2, 2, 2, 2]);
  });

  it("baselines-sagemaker - scales in after 15 minutes below 90% of target", () => {
    // 5 instances, 600/min → 120 per instance < 270; minute 15 (index 14): desired = ⌈5·120/300⌉ = 2.
    const r = run(new Array<number>(16).fill(600), 5);
    expect(r.slice(0, 14)).toEqual(new Array<number>(14).fill(5));
    expect(r[14]).toBe(2);
  });

  it("baselines-sagemaker - scale-out cool-down holds a second step for 300 s", () => {
    // Step to 5 at minute 2; load keeps climbing: next scale-out possible at minute 7 (300 s later), after 3 high minutes.
    const r = run([1500, 1500, 1500, 3000, 3000, 3000, 3000, 3000, 3000], 2);
    expect(r).toEqual([2, 2, 5, 5, 5, 5, 5, 10, 10]); // ⌈5 · 600/300⌉ = 10
  });

  it("baselines-sagemaker - reasons name the metric and target", () => {
    const d = targetTracking({ nowS: 0, instances: 1, invocationsLastMinute: 100, capacityQps: 10, state: initialTargetTrackingState });
    expect(d.reason).toBe("100 invocations/instance/min vs target 300: hold");
  });
});
