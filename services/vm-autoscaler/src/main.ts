import { createWriteStream, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { z } from "zod";
import { EC2Client } from "@aws-sdk/client-ec2";
import { commonEnvSchema, compileOptions, hardwareSchema, type Hardware } from "@sloserve/contracts";
import { connectBus, natsChildEnv, runEvery, runService, systemClock, type Bus, type Logger } from "@sloserve/bus";
import { Catalog, MetadataStore } from "@sloserve/store";
import { INSTANCE_PRICES, LIVE_READING_TICKS, instanceOffer, parseSpotPriceCsv, pricePerSecond, type MachineKind, type MachinePlanConfig } from "@sloserve/policy";
import { Ec2WorkerProvider, LocalWorkerProvider, NOMAD_EXECUTORS_JOB, NomadWorkerProvider, natsSpotNotices, nomadExecutorGroup, type WorkerProvider } from "@sloserve/providers";
import { VmAutoscalerController } from "./controller.js";
import { VmMetrics } from "./costs.js";
import { startServiceMetrics } from "@sloserve/metrics";

/**
 * vm-autoscaler: every 2 s, the machine plan (libs/policy machine-plan.ts): INFaaS's VM rules (add on
 * 80% utilisation / Interfered everywhere / > 80% Overloaded / `scale.vm` requests, replace lost
 * workers and reload their variants, remove idle ones), MArk's predictive plan on `forecast.<app>` and
 * its SLO monitor, spot standbys; through a WorkerProvider (PROVIDER=local | ec2 | nomad). Decisions on
 * `decision.vm.*`, results on `scale.result.vm.*`, costs on `metrics.cost` and Prometheus (METRICS_PORT).
 */

const kinds = z
  .string()
  .transform((s) => s.split(",").map((x) => x.trim()).filter((x) => x !== ""))
  .pipe(z.array(hardwareSchema));
const optionalInt = z.coerce.number().int().min(0).optional();

const envSchema = commonEnvSchema.extend({
  /** Where workers come from. @default "local" (executor processes on this machine) */
  PROVIDER: z.enum(["local", "ec2", "nomad"]).default("local"),
  TICK_MS: z.coerce.number().int().positive().default(2000),
  /**
   * Ticks the INFaaS rules read (utilisation: their mean; Interfered, Overloaded: at each); 1 is
   * INFaaS's rule. @default 2 (libs/policy LIVE_READING_TICKS)
   */
  READING_TICKS: z.coerce.number().int().min(1).default(LIVE_READING_TICKS),
  /** Hardware kinds it may launch. @default "cpu" */
  LAUNCH_KINDS: kinds.default(["cpu"]),
  /** Kinds launched on the spot market (MArk §4.5). @default none */
  SPOT_KINDS: kinds.default([]),
  /**
   * Spot prices over time: a CSV with columns timestamp, instance_type, spot_price (as
   * `aws ec2 describe-spot-price-history` gives them). With it, SPOT_KINDS go on-demand while their
   * type's spot price is above on-demand, and the plan prices them at the price of now. @default none (static prices)
   */
  SPOT_PRICES_FILE: z.string().optional(),
  CPU_INSTANCE_TYPE: z.string().default("c5.xlarge"),
  GPU_INSTANCE_TYPE: z.string().default("p3.2xlarge"),
  INFERENTIA_INSTANCE_TYPE: z.string().default("inf1.xlarge"),
  /** local: delay between a launch and the executor process starting (the VM's boot). @default 2000 */
  BOOT_DELAY_MS: z.coerce.number().int().min(0).default(2000),
  /** Launch to first heartbeat, for the predictive plan. @default local: BOOT_DELAY_MS + 5 s; ec2: 5 min; nomad: 1 min */
  BOOT_TIME_MS: optionalInt,
  /** Threads and memory of the executors it launches (and what the plan counts a new worker for). */
  WORKER_THREADS: z.coerce.number().int().min(1).optional(),
  WORKER_MEMORY_MB: z.coerce.number().int().min(64).optional(),
  /** Workers of each launchable kind, all of them counted (the autoscaler's and the others). */
  MIN_WORKERS: z.coerce.number().int().min(0).default(0),
  MAX_WORKERS: z.coerce.number().int().min(0).default(4),
  CPU_MIN_WORKERS: optionalInt,
  CPU_MAX_WORKERS: optionalInt,
  GPU_MIN_WORKERS: optionalInt,
  GPU_MAX_WORKERS: optionalInt,
  INFERENTIA_MIN_WORKERS: optionalInt,
  INFERENTIA_MAX_WORKERS: optionalInt,
  /** Time before capacity is given back (idle workers; the predictive plan's history). @default 300000 */
  COOLDOWN_MS: z.coerce.number().int().min(0).default(300_000),
  /** EC2's billing minimum: no termination before. @default 60000 */
  BILLING_MINIMUM_MS: z.coerce.number().int().min(0).default(60_000),
  /** Period of the predictive plan. @default 60000 */
  PLAN_PERIOD_MS: z.coerce.number().int().positive().default(60_000),
  HEARTBEAT_TIMEOUT_MS: z.coerce.number().int().positive().default(10_000),
  /** Period of the SLO monitor. @default 10000 */
  SLO_PERIOD_MS: z.coerce.number().int().positive().default(10_000),
  /** SLmin: the share of queries within their SLO (MArk §4.1). @default 0.98 */
  SL_MIN: z.coerce.number().gt(0).lt(1).default(0.98),
  /** Per app, e.g. "digits=0.95,ocr-cls=0.99". */
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
    }),
  /** Share of a worker's capacity the predictive plan fills. @default 0.8 */
  TARGET_UTILIZATION: z.coerce.number().gt(0).max(1).default(0.8),
  /** Period of the cost summary on `metrics.cost`. @default 10000 */
  COST_EVERY_MS: z.coerce.number().int().positive().default(10_000),
  /** local: where the launched executors' output goes (appended). @default this process's stdout */
  EXECUTOR_LOG_FILE: z.string().optional(),
  /** local: time a terminated executor has to drain before SIGKILL. @default 8000 */
  LOCAL_STOP_TIMEOUT_MS: z.coerce.number().int().positive().default(8000),
  /** ec2: launch template (name or id), the `sloserve:cluster` tag, the container image. */
  EC2_LAUNCH_TEMPLATE: z.string().optional(),
  EC2_LAUNCH_TEMPLATE_ID: z.string().optional(),
  EC2_CLUSTER: z.string().default("sloserve"),
  EC2_IMAGE: z.string().optional(),
  /**
   * ec2: the workers' NATS user, and the SSM parameters of its password (SecureString) and of the NATS
   * servers' TLS CA (PEM), read at boot by the instances' role (libs/providers ec2-user-data.ts).
   */
  EC2_NATS_USER: z.string().default("executor"),
  EC2_NATS_PASSWORD_PARAMETER: z.string().optional(),
  EC2_NATS_TLS_CA_PARAMETER: z.string().optional(),
  /** nomad: the API, and the job whose groups run each kind's executor (group "executor-<kind>"). */
  NOMAD_ADDR: z.string().default("http://127.0.0.1:4646"),
  NOMAD_TOKEN: z.string().optional(),
  NOMAD_NAMESPACE: z.string().optional(),
  NOMAD_REGION: z.string().optional(),
  NOMAD_JOB: z.string().default(NOMAD_EXECUTORS_JOB),
});
type Options = z.infer<typeof envSchema>;

const KIND_ENV = { cpu: "CPU", gpu: "GPU", inferentia: "INFERENTIA" } as const;

/** The instance type standing for each launchable kind, checked against the price table. */
function instanceTypes(o: Options): Record<Hardware, string> {
  const types: Record<Hardware, string> = { cpu: o.CPU_INSTANCE_TYPE, gpu: o.GPU_INSTANCE_TYPE, inferentia: o.INFERENTIA_INSTANCE_TYPE };
  const problems: string[] = [];
  for (const k of o.LAUNCH_KINDS) {
    const p = INSTANCE_PRICES[types[k]];
    if (!p) problems.push(`${KIND_ENV[k]}_INSTANCE_TYPE: unknown instance type "${types[k]}" (known: ${Object.keys(INSTANCE_PRICES).join(", ")})`);
    else if (p.kind !== k) problems.push(`${KIND_ENV[k]}_INSTANCE_TYPE: ${types[k]} is ${p.kind} hardware, not ${k}`);
  }
  if (problems.length > 0) throw new Error(`invalid configuration for vm-autoscaler: ${problems.join("; ")}`);
  return types;
}

function buildProvider(o: Options, bus: Bus, log: Logger, kindEnv: Partial<Record<Hardware, Record<string, string>>>, types: Record<Hardware, string>): WorkerProvider {
  const clock = systemClock;
  switch (o.PROVIDER) {
    case "local":
      return new LocalWorkerProvider({
        natsUrl: o.NATS_URL,
        redisUrl: o.REDIS_URL,
        logLevel: o.LOG_LEVEL,
        bootDelayMs: o.BOOT_DELAY_MS,
        stopTimeoutMs: o.LOCAL_STOP_TIMEOUT_MS,
        // The workers connect to NATS as the executor user (EXECUTOR_NATS_USER/_PASSWORD), not as this service.
        kindEnv: Object.fromEntries(hardwareSchema.options.map((k) => [k, { ...kindEnv[k], ...natsChildEnv(process.env, "EXECUTOR") }])),
        logTo: o.EXECUTOR_LOG_FILE ? createWriteStream(o.EXECUTOR_LOG_FILE, { flags: "a" }) : process.stdout,
        clock,
        log,
      });
    case "ec2": {
      if (!o.EC2_IMAGE) throw new Error("invalid configuration for vm-autoscaler: PROVIDER=ec2 needs EC2_IMAGE (the project's container image)");
      const launchTemplate = o.EC2_LAUNCH_TEMPLATE_ID ? { id: o.EC2_LAUNCH_TEMPLATE_ID } : o.EC2_LAUNCH_TEMPLATE ? { name: o.EC2_LAUNCH_TEMPLATE } : undefined;
      if (!launchTemplate) throw new Error("invalid configuration for vm-autoscaler: PROVIDER=ec2 needs EC2_LAUNCH_TEMPLATE or EC2_LAUNCH_TEMPLATE_ID");
      // With NATS users on (this service has one), the workers need theirs, or they could not join.
      if (process.env["NATS_USER"] && !o.EC2_NATS_PASSWORD_PARAMETER) {
        throw new Error("invalid configuration for vm-autoscaler: NATS has users (NATS_USER is set), so PROVIDER=ec2 needs EC2_NATS_PASSWORD_PARAMETER (the SSM parameter of the workers' NATS password, user EC2_NATS_USER) for its workers to join");
      }
      if (process.env["NATS_TLS_CA"] && !o.EC2_NATS_TLS_CA_PARAMETER) {
        throw new Error("invalid configuration for vm-autoscaler: NATS uses TLS (NATS_TLS_CA is set), so PROVIDER=ec2 needs EC2_NATS_TLS_CA_PARAMETER (the SSM parameter of the CA's PEM) for its workers to join");
      }
      const nats = o.EC2_NATS_PASSWORD_PARAMETER ? { user: o.EC2_NATS_USER, passwordParameter: o.EC2_NATS_PASSWORD_PARAMETER, tlsCaParameter: o.EC2_NATS_TLS_CA_PARAMETER } : undefined;
      return new Ec2WorkerProvider({ client: new EC2Client({}), launchTemplate, cluster: o.EC2_CLUSTER, image: o.EC2_IMAGE, natsUrl: o.NATS_URL, redisUrl: o.REDIS_URL, logLevel: o.LOG_LEVEL, nats, kindEnv, spotNotices: natsSpotNotices(bus, log), clock, log });
    }
    case "nomad": {
      const groups = Object.fromEntries(o.LAUNCH_KINDS.map((k) => [k, { job: o.NOMAD_JOB, group: nomadExecutorGroup(k), instanceType: types[k], market: o.SPOT_KINDS.includes(k) ? ("spot" as const) : ("on-demand" as const) }]));
      return new NomadWorkerProvider({
        address: o.NOMAD_ADDR,
        ...(o.NOMAD_TOKEN ? { token: o.NOMAD_TOKEN } : {}),
        ...(o.NOMAD_NAMESPACE ? { namespace: o.NOMAD_NAMESPACE } : {}),
        ...(o.NOMAD_REGION ? { region: o.NOMAD_REGION } : {}),
        groups,
        clock,
        log,
      });
    }
  }
}

await runService("vm-autoscaler", process.env, async (log) => {
  const o = compileOptions(envSchema, process.env, "vm-autoscaler");
  const types = instanceTypes(o);
  const clock = systemClock;
  const bootMs = o.BOOT_TIME_MS ?? (o.PROVIDER === "local" ? o.BOOT_DELAY_MS + 5000 : o.PROVIDER === "ec2" ? 300_000 : 60_000);
  const threads = o.WORKER_THREADS ?? availableParallelism();
  const kindEnv: Partial<Record<Hardware, Record<string, string>>> = {};
  const machineKinds: Record<string, MachineKind> = {};
  for (const k of o.LAUNCH_KINDS) {
    const env: Record<string, string> = {};
    if (o.WORKER_THREADS) env.WORKER_THREADS = String(o.WORKER_THREADS);
    if (o.WORKER_MEMORY_MB) env.WORKER_MEMORY_MB = String(o.WORKER_MEMORY_MB);
    // Local workers share this host and inherit this environment: they would all ask for our METRICS_PORT.
    // Their figures reach Prometheus through the model autoscaler's sloserve_cluster_* (their reports).
    if (o.PROVIDER === "local") env.METRICS_PORT = "0";
    kindEnv[k] = env;
    const spot = o.SPOT_KINDS.includes(k);
    const memoryBytes = o.WORKER_MEMORY_MB ? o.WORKER_MEMORY_MB * 1048576 : Infinity;
    machineKinds[k] = {
      instanceType: types[k],
      pricePerHour: pricePerSecond(types[k], spot ? "spot" : "on-demand") * 3600,
      spot,
      bootMs,
      resources: instanceOffer(k, types[k], threads, memoryBytes),
      minWorkers: o[`${KIND_ENV[k]}_MIN_WORKERS`] ?? o.MIN_WORKERS,
      maxWorkers: o[`${KIND_ENV[k]}_MAX_WORKERS`] ?? o.MAX_WORKERS,
    };
  }
  const plan: Partial<MachinePlanConfig> = {
    vm: { heartbeatTimeoutMs: o.HEARTBEAT_TIMEOUT_MS, minWorkersPerKind: o.MIN_WORKERS, maxWorkersPerKind: o.MAX_WORKERS, readingTicks: o.READING_TICKS },
    cooldownMs: o.COOLDOWN_MS,
    billingMinimumMs: o.BILLING_MINIMUM_MS,
    planPeriodMs: o.PLAN_PERIOD_MS,
    sloPeriodMs: o.SLO_PERIOD_MS,
    slMin: o.SL_MIN,
    slMinByApp: o.SL_MIN_BY_APP,
    targetUtilization: o.TARGET_UTILIZATION,
  };

  const bus = await connectBus({ servers: o.NATS_URL, name: "vm-autoscaler", log, replicas: o.JS_REPLICAS });
  const store = MetadataStore.connect(o.REDIS_URL);
  const catalog = new Catalog(store);
  const provider = buildProvider(o, bus, log, kindEnv, types);
  const served = await startServiceMetrics(o, log);
  const metrics = new VmMetrics(served.registry);
  const spotPrices = o.SPOT_PRICES_FILE ? parseSpotPriceCsv(readFileSync(o.SPOT_PRICES_FILE, "utf8")) : undefined;
  const controller = new VmAutoscalerController(bus, store, catalog, provider, log, clock, { kinds: machineKinds, plan, launchEnv: kindEnv, metrics, ...(spotPrices ? { spotPrices } : {}) });
  await controller.start();
  await catalog.load();

  const timer = runEvery(o.TICK_MS, () => controller.tick(), log, "VM autoscaler tick");
  const costTimer = setInterval(() => void controller.publishCosts().catch((err: unknown) => log.warn({ err }, "publishing the cost summary failed")), o.COST_EVERY_MS);

  return {
    info: { provider: provider.name, kinds: o.LAUNCH_KINDS, metricsPort: served.port, bootMs, minWorkers: o.MIN_WORKERS, maxWorkers: o.MAX_WORKERS },
    async stop() {
      clearInterval(timer);
      clearInterval(costTimer);
      await served.close();
      await controller.stop();
      // The local provider terminates the executors it started (each drains); EC2 and Nomad keep theirs.
      await provider.close().catch((err: unknown) => log.error({ err, provider: provider.name }, "closing the provider failed"));
      await bus.close();
      await store.close();
    },
  };
});
