import { z } from "zod";
import { commonEnvSchema, hardwareSchema } from "@sloserve/contracts";
import { DEFAULT_MACHINE_PLAN_CONFIG, DEFAULT_SCALING_POLICY, DEFAULT_VM_AUTOSCALER_CONFIG, LIVE_READING_TICKS, SCALING_POLICIES } from "@sloserve/policy";
import { NOMAD_EXECUTORS_JOB } from "@sloserve/providers/defaults";
import { hostSettings } from "./machine.js";

const kinds = z
  .string()
  .transform((s) => s.split(",").map((x) => x.trim()).filter((x) => x !== ""))
  .pipe(z.array(hardwareSchema));
const optionalInt = z.coerce.number().int().min(0).optional();

/** The VM autoscaler's settings (services/vm-autoscaler): the machine plan (libs/policy scaling/machine-plan.ts) and the worker provider. */
export const vmAutoscalerSettings = commonEnvSchema.extend({
  PROVIDER: z.enum(["local", "ec2", "nomad", "docker"]).default("local").describe("Where workers come from: `local` (executor processes on this machine), `ec2` (EC2 instances running the project's image), `nomad` (allocations of a Nomad job), `docker` (containers of the project's image on a Docker engine)."),
  SCALING_POLICY: z
    .enum(SCALING_POLICIES)
    .default(DEFAULT_SCALING_POLICY)
    .describe(
      "Which rules the machine plan runs (libs/policy scaling/scaling-policy.ts; the simulator runs the same): `combined` (INFaaS's VM rules, MArk's predictive plan and SLO monitor), `infaas` (INFaaS's VM rules alone), `mark` (MArk's plan and SLO monitor; no INFaaS add or idle removal), `static` (no launch or termination: the fleet started beside it, MIN_WORKERS of each kind). Every policy replaces lost workers and handles spot notices. Overflow is the dispatcher's own setting: with `infaas` and `static`, set OVERFLOW=off for the dispatcher too (`npm start` does).",
    ),
  TICK_MS: z.coerce.number().int().positive().default(2000).describe("Period of the machine plan, ms."),
  READING_TICKS: z.coerce.number().int().min(1).default(LIVE_READING_TICKS).describe("Ticks the INFaaS rules read (utilisation: their mean; Interfered, Overloaded: at each); 1 is INFaaS's rule."),
  LAUNCH_KINDS: kinds.default(["cpu"]).describe("Hardware kinds it may launch."),
  SPOT_KINDS: kinds.default([]).describe("Kinds launched on the spot market (MArk §4.5)."),
  SPOT_PRICES_FILE: z.string().optional().meta({ description: "Spot prices over time: a CSV with columns timestamp, instance_type, spot_price (as `aws ec2 describe-spot-price-history` gives them). With it, SPOT_KINDS go on-demand while their type's spot price is above on-demand, and the plan prices them at the price of now.", defaultText: "none (static prices)" }),
  CPU_INSTANCE_TYPE: z.string().default("c5.xlarge").describe("The instance type standing for CPU workers (prices, resources; launched by ec2)."),
  GPU_INSTANCE_TYPE: z.string().default("p3.2xlarge").describe("The instance type standing for GPU workers."),
  INFERENTIA_INSTANCE_TYPE: z.string().default("inf1.xlarge").describe("The instance type standing for Inferentia workers."),
  BOOT_DELAY_MS: z.coerce.number().int().min(0).default(2000).describe("local: delay between a launch and the executor process starting (the VM's boot)."),
  BOOT_TIME_MS: optionalInt.meta({ description: "Launch to first heartbeat, for the predictive plan.", defaultText: "local: BOOT_DELAY_MS + 5 s; ec2: 5 min; nomad: 1 min; docker: 20 s" }),
  WORKER_THREADS: z.coerce.number().int().min(1).optional().meta({ description: "Threads of the executors it launches (and what the plan counts a new worker for).", defaultText: "the machine's cores" }),
  WORKER_MEMORY_MB: z.coerce.number().int().min(64).optional().meta({ description: "Memory of the executors it launches, MiB (and what the plan counts a new worker for).", defaultText: "the executor's own (80% of its machine's memory); the plan: no memory limit" }),
  MIN_WORKERS: z.coerce.number().int().min(0).default(DEFAULT_VM_AUTOSCALER_CONFIG.minWorkersPerKind).describe("Fewest workers of each launchable kind, all of them counted (the autoscaler's and the others)."),
  MAX_WORKERS: z.coerce.number().int().min(0).default(4).describe("Most workers of each launchable kind, all of them counted."),
  CPU_MIN_WORKERS: optionalInt.describe("MIN_WORKERS for CPU workers."),
  CPU_MAX_WORKERS: optionalInt.describe("MAX_WORKERS for CPU workers."),
  GPU_MIN_WORKERS: optionalInt.describe("MIN_WORKERS for GPU workers."),
  GPU_MAX_WORKERS: optionalInt.describe("MAX_WORKERS for GPU workers."),
  INFERENTIA_MIN_WORKERS: optionalInt.describe("MIN_WORKERS for Inferentia workers."),
  INFERENTIA_MAX_WORKERS: optionalInt.describe("MAX_WORKERS for Inferentia workers."),
  COOLDOWN_MS: z.coerce.number().int().min(0).default(DEFAULT_MACHINE_PLAN_CONFIG.cooldownMs).describe("Time before capacity is given back (idle workers; the predictive plan's history)."),
  BILLING_MINIMUM_MS: z.coerce.number().int().min(0).default(DEFAULT_MACHINE_PLAN_CONFIG.billingMinimumMs).describe("EC2's billing minimum: no termination before."),
  PLAN_PERIOD_MS: z.coerce.number().int().positive().default(DEFAULT_MACHINE_PLAN_CONFIG.planPeriodMs).describe("Period of the predictive plan."),
  HEARTBEAT_TIMEOUT_MS: z.coerce.number().int().positive().default(DEFAULT_VM_AUTOSCALER_CONFIG.heartbeatTimeoutMs).describe("A worker silent for longer is lost (replaced, its variants reloaded), ms."),
  SLO_PERIOD_MS: z.coerce.number().int().positive().default(DEFAULT_MACHINE_PLAN_CONFIG.sloPeriodMs).describe("Period of the SLO monitor."),
  SL_MIN: z.coerce.number().gt(0).lt(1).default(DEFAULT_MACHINE_PLAN_CONFIG.slMin).describe("SLmin: the share of queries within their SLO (MArk §4.1)."),
  SL_MIN_BY_APP: z
    .string()
    .default("")
    .transform((s, ctx) => {
      const out: Record<string, number> = {};
      for (const part of s.split(",").map((x) => x.trim()).filter((x) => x !== "")) {
        const [app, value] = part.split("=");
        const n = Number(value);
        if (!app || !(n > 0 && n < 1)) ctx.addIssue({ code: "custom", message: `"${part}": use app=fraction, e.g. digits=0.95` });
        else out[app] = n;
      }
      return out;
    }).describe("Per app, e.g. \"digits=0.95,ocr-cls=0.99\"."),
  TARGET_UTILIZATION: z.coerce.number().gt(0).max(1).default(DEFAULT_MACHINE_PLAN_CONFIG.targetUtilization).describe("Share of a worker's capacity the predictive plan fills."),
  COST_EVERY_MS: z.coerce.number().int().positive().default(10_000).describe("Period of the cost summary on `metrics.cost`."),
  EXECUTOR_LOG_FILE: z.string().optional().meta({ description: "local, docker: where the launched executors' output goes (appended; a docker worker's stays in the engine too, `docker logs`).", defaultText: "this process's stdout" }),
  LOCAL_STOP_TIMEOUT_MS: z.coerce.number().int().positive().default(8000).describe("local: time a terminated executor has to drain before SIGKILL."),
  LOCAL_WORKER_BACKEND: z.enum(["native", "emulated"]).default("native").describe("local: the engine of the executors it launches: `native` (each kind's own, onnxruntime or the Neuron server) or `emulated` (BACKEND=emulated: variants served by their latency distributions, so that tens of CPU, GPU and Inferentia workers run on one small machine; EMULATED_CALIBRATION and EMULATED_LATENCY_MS in this service's environment reach them too). Never for real queries."),
  ...hostSettings,
  EC2_LAUNCH_TEMPLATE: z.string().optional().describe("ec2: the launch template of its instances, by name."),
  EC2_LAUNCH_TEMPLATE_ID: z.string().optional().describe("ec2: the launch template by id (instead of EC2_LAUNCH_TEMPLATE)."),
  EC2_CLUSTER: z.string().default("sloserve").describe("ec2: the value of the `sloserve:cluster` tag of its instances."),
  EC2_IMAGE: z.string().optional().describe("ec2: the project's container image the instances run."),
  EC2_NATS_USER: z.string().default("executor").describe("ec2: the workers' NATS user; its password and the NATS servers' TLS CA are read at boot from SSM by the instances' role (libs/providers ec2-user-data.ts)."),
  EC2_NATS_PASSWORD_PARAMETER: z.string().optional().describe("ec2: the SSM SecureString parameter holding the password of EC2_NATS_USER."),
  EC2_NATS_TLS_CA_PARAMETER: z.string().optional().describe("ec2: the SSM parameter holding the NATS servers' TLS CA (PEM)."),
  EXECUTOR_NATS_USER: z.string().optional().meta({ description: "local, docker: the NATS user of the executors it starts (with EXECUTOR_NATS_PASSWORD; docs/SECURITY.md).", defaultText: "unset (the executors get no NATS user)" }),
  EXECUTOR_NATS_PASSWORD: z.string().optional().meta({ description: "local, docker: the NATS password of EXECUTOR_NATS_USER.", defaultText: "unset" }),
  NOMAD_ADDR: z.string().default("http://127.0.0.1:4646").describe("nomad: the address of the Nomad API."),
  NOMAD_TOKEN: z.string().optional().describe("nomad: the ACL token."),
  NOMAD_NAMESPACE: z.string().optional().describe("nomad: the namespace."),
  NOMAD_REGION: z.string().optional().describe("nomad: the region."),
  NOMAD_JOB: z.string().default(NOMAD_EXECUTORS_JOB).describe("nomad: the job whose groups run each kind's executor (group `executor-<kind>`)."),
  DOCKER_HOST: z.string().default("unix:///var/run/docker.sock").describe("docker: the Docker engine's API, `unix:///path/to/docker.sock` or `tcp://host:port` (plain HTTP; the docker CLI's DOCKER_HOST)."),
  DOCKER_IMAGE: z.string().min(1).default("sloserve:latest").describe("docker: the project's image the worker containers run (`bash scripts/docker-images.sh` builds it; pulled when the engine lacks it)."),
  DOCKER_NETWORK: z.string().min(1).default("host").describe("docker: the worker containers' network: `host` (the host's own; an engine started without a bridge has no other) or a network's name."),
  DOCKER_NATS_URL: z.string().optional().meta({ description: "docker: NATS as seen from inside a worker container.", defaultText: "NATS_URL" }),
  DOCKER_REDIS_URL: z.string().optional().meta({ description: "docker: Redis as seen from inside a worker container.", defaultText: "REDIS_URL" }),
  DOCKER_OWNER: z.string().regex(/^[A-Za-z0-9_.-]+$/, "use letters, digits, '_', '.', '-'").default("sloserve").describe("docker: the `sloserve.launcher` label of its containers; it lists, stops and takes back after a restart only containers with it (one owner per vm-autoscaler sharing an engine)."),
  DOCKER_CPUS: z.coerce.number().positive().optional().meta({ description: "docker: CPUs of each worker container (`docker run --cpus`), as a VM's vCPUs.", defaultText: "WORKER_THREADS when set; else no limit" }),
  DOCKER_MEMORY_MB: z.coerce.number().int().min(64).optional().meta({ description: "docker: memory of each worker container, MiB (`docker run --memory`, no swap), as a VM's; its executor then offers 80% of it to variant instances unless WORKER_MEMORY_MB says otherwise.", defaultText: "no limit" }),
  DOCKER_STOP_TIMEOUT_S: z.coerce.number().int().positive().default(15).describe("docker: time a terminated worker's executor has to drain after SIGTERM before the engine kills it (`docker stop --time`), s."),
});
export type VmAutoscalerSettings = z.infer<typeof vmAutoscalerSettings>;
