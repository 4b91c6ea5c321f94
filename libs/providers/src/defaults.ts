/**
 * The providers' defaults that settings read, in a module of their own (`@sloserve/providers/defaults`):
 * it imports nothing, so a process that reads its settings (every service, every worker) does not
 * load the providers and their cloud SDKs to learn two defaults.
 */

export interface BreakerOptions {
  /** Longest one call may take, ms, even when the deadline is further. @default 30_000 */
  capMs?: number;
  /** Percentage of failed calls in the window above which the breaker opens. @default 50 */
  errorThresholdPercentage?: number;
  /** Calls in the window before the breaker may open. @default 5 */
  volumeThreshold?: number;
  /** Time open before a trial call (half-open), ms. @default 10_000 */
  resetTimeoutMs?: number;
  /** The rolling window the percentages are taken over, ms. @default 10_000 */
  rollingWindowMs?: number;
}

export const BREAKER_DEFAULTS: Required<BreakerOptions> = {
  capMs: 30_000,
  errorThresholdPercentage: 50,
  volumeThreshold: 5,
  resetTimeoutMs: 10_000,
  rollingWindowMs: 10_000,
};

/** The Nomad job that runs the executors (deploy/nomad/executors.nomad.hcl), the vm-autoscaler's NOMAD_JOB default. */
export const NOMAD_EXECUTORS_JOB = "sloserve-executors";
