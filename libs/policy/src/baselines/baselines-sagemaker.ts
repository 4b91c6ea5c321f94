/**
 * The SageMaker-style baseline of MArk §5.1: target-tracking autoscaling (AWS Application Auto
 * Scaling on the SageMakerVariantInvocationsPerInstance metric) with the 2× over-provisioning factor
 * the AWS guidelines recommend, i.e. the target per instance is half of its measured peak throughput.
 *
 * Modelled on how target tracking behaves (AWS Application Auto Scaling documentation): the metric is
 * invocations per instance per minute; a scale-out alarm fires after 3 consecutive minutes above the
 * target, a scale-in alarm after 15 consecutive minutes below 90% of it; either sets
 * desired = ⌈instances · metric / target⌉; scale-out and scale-in cool-downs default to 300 s.
 * The policy is SLO-oblivious (it never looks at latency), which is the point MArk makes against it.
 * Pure: call once a minute with the state it returned last time.
 */

export interface TargetTrackingOptions {
  /** Over-provisioning factor: target = capacity / factor. @default 2 */
  overProvisioning?: number;
  /** Consecutive minutes above target before scaling out. @default 3 */
  scaleOutMinutes?: number;
  /** Consecutive minutes below 90% of target before scaling in. @default 15 */
  scaleInMinutes?: number;
  /** @default 300 */
  scaleOutCooldownS?: number;
  /** @default 300 */
  scaleInCooldownS?: number;
  /** @default 1 */
  minInstances?: number;
}

export interface TargetTrackingState {
  highMinutes: number;
  lowMinutes: number;
  lastScaleOutS: number;
  lastScaleInS: number;
}

export const initialTargetTrackingState: TargetTrackingState = {
  highMinutes: 0, lowMinutes: 0, lastScaleOutS: -Infinity, lastScaleInS: -Infinity,
};

export interface TargetTrackingInput {
  nowS: number;
  /** Instances currently desired (in service or starting). */
  instances: number;
  /** Invocations in the last minute, all instances together. */
  invocationsLastMinute: number;
  /** Peak throughput of one instance, queries per second. */
  capacityQps: number;
  state: TargetTrackingState;
}

export interface TargetTrackingDecision {
  desired: number;
  state: TargetTrackingState;
  reason: string;
}

export function targetTracking(input: TargetTrackingInput, options: TargetTrackingOptions = {}): TargetTrackingDecision {
  const factor = options.overProvisioning ?? 2;
  const minInstances = options.minInstances ?? 1;
  const target = (input.capacityQps * 60) / factor;
  const n = Math.max(input.instances, 1);
  const metric = input.invocationsLastMinute / n;
  const wanted = Math.max(minInstances, Math.ceil((input.instances * metric) / target - 1e-9));
  const s = { ...input.state };
  s.highMinutes = metric > target ? s.highMinutes + 1 : 0;
  s.lowMinutes = metric < 0.9 * target ? s.lowMinutes + 1 : 0;
  const m = `${metric.toFixed(0)} invocations/instance/min vs target ${target.toFixed(0)}`;
  if (s.highMinutes >= (options.scaleOutMinutes ?? 3) && wanted > input.instances) {
    if (input.nowS - s.lastScaleOutS < (options.scaleOutCooldownS ?? 300)) {
      return { desired: input.instances, state: s, reason: `${m}: scale-out cool-down` };
    }
    s.lastScaleOutS = input.nowS;
    s.highMinutes = 0;
    return { desired: wanted, state: s, reason: `${m} for ${options.scaleOutMinutes ?? 3} min: scale out to ${wanted}` };
  }
  if (s.lowMinutes >= (options.scaleInMinutes ?? 15) && wanted < input.instances) {
    if (input.nowS - s.lastScaleInS < (options.scaleInCooldownS ?? 300) || input.nowS - s.lastScaleOutS < (options.scaleInCooldownS ?? 300)) {
      return { desired: input.instances, state: s, reason: `${m}: scale-in cool-down` };
    }
    s.lastScaleInS = input.nowS;
    s.lowMinutes = 0;
    return { desired: wanted, state: s, reason: `${m} below 90% for ${options.scaleInMinutes ?? 15} min: scale in to ${wanted}` };
  }
  return { desired: input.instances, state: s, reason: `${m}: hold` };
}
