/**
 * Where machines and functions come from (DESIGN §4 "Workers come from a provider interface"): one
 * interface for worker providers (local processes, EC2, Nomad, Docker containers) and one for function
 * providers (a local pool of function processes, AWS Lambda). The vm-autoscaler service decides
 * (libs/policy) and acts through a WorkerProvider; the dispatcher overflows through a FunctionProvider
 * behind a circuit breaker. Implementations live beside this file; tests drive the real local ones, the
 * Docker one against a real engine (test/deploy), and the AWS/Nomad ones through the exact requests
 * they send.
 */
import type { Hardware } from "@sloserve/contracts";

export type Market = "on-demand" | "spot";

/** What to launch. */
export interface WorkerSpec {
  kind: Hardware;
  /** Instance type standing for the machine (prices come from libs/policy costs), e.g. "c5.xlarge". */
  instanceType: string;
  /** @default "on-demand" */
  market?: Market;
  /** Why (logged, tagged). */
  reason: string;
  /** Extra environment for the executor (local) or user data (EC2). */
  env?: Record<string, string>;
}

export type InstanceState = "booting" | "running" | "draining" | "terminated";

/** A machine a provider launched: one executor (worker) runs on it. */
export interface WorkerInstance {
  /** The provider's id (local and Docker: the worker id, which names a Docker worker's container; EC2 instance id, Nomad allocation id). */
  id: string;
  provider: string;
  /** The executor's worker id on the bus (its heartbeats on `metrics.worker.<workerId>`). */
  workerId: string;
  kind: Hardware;
  instanceType: string;
  market: Market;
  /** Dollars per hour while it runs (billing from launch, EC2's 60 s minimum applies). */
  pricePerHour: number;
  launchedAtMs: number;
  state: InstanceState;
  /** When it stopped costing money (terminated), or null. */
  endedAtMs: number | null;
}

/** Something that happened to an instance without being asked for. */
export type ProviderEvent =
  /** A spot instance will be taken back at `terminateAtMs` (EC2 gives 2 minutes). */
  | { type: "interruption-notice"; id: string; atMs: number; terminateAtMs: number }
  /** The instance went away (process exited, instance terminated, allocation lost). */
  | { type: "lost"; id: string; atMs: number; reason: string };

export interface WorkerProvider {
  readonly name: string;
  /** Asks for a machine; resolves once the request is accepted (the worker boots after). */
  launch(spec: WorkerSpec): Promise<WorkerInstance>;
  /** Gives a machine back (graceful: its executor drains first where the provider allows). */
  terminate(id: string, reason: string): Promise<void>;
  /** The machines this provider runs for us, terminated ones included while remembered. */
  list(): Promise<WorkerInstance[]>;
  /** Unrequested changes (spot notices, lost instances). */
  onEvent(listener: (event: ProviderEvent) => void): void;
  /** Stops watching and terminates what a local provider started. */
  close(): Promise<void>;
}

/** One query sent to a function (overflow, MArk §4.1): the variant to run and its inputs. */
export interface FunctionRequest {
  variant: string;
  /** Object name of the variant's ONNX binary in the model repository. */
  object: string;
  /** The query's input tensors in the binary tensor encoding (libs/contracts wire.ts). */
  payload: Uint8Array;
  requestId?: string;
  /** Absolute deadline, epoch ms. */
  deadlineMs: number;
}

export interface FunctionResult {
  /** The output tensors in the binary tensor encoding. */
  payload: Uint8Array;
  /** Time the function ran, ms, and what was billed (Lambda rounds up to 1 ms). */
  durationMs: number;
  billedMs: number;
  coldStart: boolean;
  /**
   * Of `durationMs`, the cold start: container start and model load, ms (0 or absent when warm).
   * Optional: added with the function providers; Lambda reports it when its log tail shows "Init Duration".
   */
  initMs?: number;
  memoryMb: number;
  /** Dollars for this invocation (requests + GB-seconds). */
  costDollars: number;
}

export interface PrewarmOptions {
  /** A model object each warmed container loads (added with the function providers; optional). */
  object?: string;
}

export interface FunctionProvider {
  readonly name: string;
  invoke(request: FunctionRequest): Promise<FunctionResult>;
  /**
   * Starts n containers ahead of a forecast surge or a capacity loss (MArk §4.5): makes sure n exist
   * (or n hold `options.object`), so asking again for the same n starts nothing. Lambda: n concurrent
   * warm-up pings.
   */
  prewarm(n: number, options?: PrewarmOptions): Promise<void>;
  stats(): { invocations: number; coldStarts: number; errors: number; costDollars: number };
  close(): Promise<void>;
}
