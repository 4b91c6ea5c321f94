import { createWriteStream, readFileSync } from "node:fs";
import { availableParallelism, hostname, totalmem } from "node:os";
import { resolve } from "node:path";
import { z } from "zod";
import { EC2Client } from "@aws-sdk/client-ec2";
import { compileOptions, hardwareSchema, type Hardware } from "@sloserve/contracts";
import { WORKER_MEMORY_SHARE, cpuWorkerMemoryMb, defaultWorkerMemoryMb, vmAutoscalerSettings } from "@sloserve/settings";
import { connectBus, natsChildEnv, runEvery, runService, systemClock, type Bus, type Logger } from "@sloserve/bus";
import { Catalog, MetadataStore } from "@sloserve/store";
import { INSTANCE_PRICES, instanceOffer, parseSpotPriceCsv, pricePerSecond, type MachineKind } from "@sloserve/policy";
import { DockerWorkerProvider, Ec2WorkerProvider, LocalWorkerProvider, NomadWorkerProvider, natsSpotNotices, nomadExecutorGroup, type WorkerProvider } from "@sloserve/providers";
import { VmAutoscalerController } from "./controller.js";
import { planConfigOf } from "./plan-config.js";
import { VmMetrics } from "./costs.js";
import { startServiceMetrics } from "@sloserve/metrics";

/**
 * vm-autoscaler: every 2 s, the machine plan (libs/policy machine-plan.ts): INFaaS's VM rules (add on
 * 80% utilisation / Interfered everywhere / > 80% Overloaded / `scale.vm` requests, replace lost
 * workers and reload their variants, remove idle ones), MArk's predictive plan on `forecast.<app>` and
 * its SLO monitor, spot standbys (which of the rules run: SCALING_POLICY); through a WorkerProvider
 * (PROVIDER=local | ec2 | nomad | docker). Decisions on `decision.vm.*`, results on `scale.result.vm.*`, costs
 * on `metrics.cost` and Prometheus (METRICS_PORT).
 */

const envSchema = vmAutoscalerSettings;
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
      if (o.NATS_USER && !o.EC2_NATS_PASSWORD_PARAMETER) {
        throw new Error("invalid configuration for vm-autoscaler: NATS has users (NATS_USER is set), so PROVIDER=ec2 needs EC2_NATS_PASSWORD_PARAMETER (the SSM parameter of the workers' NATS password, user EC2_NATS_USER) for its workers to join");
      }
      if (o.NATS_TLS_CA && !o.EC2_NATS_TLS_CA_PARAMETER) {
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
    case "docker":
      return new DockerWorkerProvider({
        host: o.DOCKER_HOST,
        image: o.DOCKER_IMAGE,
        network: o.DOCKER_NETWORK,
        owner: o.DOCKER_OWNER,
        natsUrl: o.DOCKER_NATS_URL ?? o.NATS_URL,
        redisUrl: o.DOCKER_REDIS_URL ?? o.REDIS_URL,
        // The same CA file, mounted into the containers (the engine runs on this machine's files).
        ...(o.NATS_TLS_CA ? { natsTlsCaFile: resolve(o.NATS_TLS_CA) } : {}),
        logLevel: o.LOG_LEVEL,
        stopTimeoutS: o.DOCKER_STOP_TIMEOUT_S,
        // A container is a machine: its CPUs and memory limited as a VM's would be.
        ...(o.DOCKER_CPUS ?? o.WORKER_THREADS ? { cpus: o.DOCKER_CPUS ?? o.WORKER_THREADS } : {}),
        ...(o.DOCKER_MEMORY_MB ? { memoryMb: o.DOCKER_MEMORY_MB } : {}),
        // The workers connect to NATS as the executor user (EXECUTOR_NATS_USER/_PASSWORD), not as this service.
        kindEnv: Object.fromEntries(hardwareSchema.options.map((k) => [k, { ...kindEnv[k], ...natsChildEnv(process.env, "EXECUTOR") }])),
        logTo: o.EXECUTOR_LOG_FILE ? createWriteStream(o.EXECUTOR_LOG_FILE, { flags: "a" }) : process.stdout,
        clock,
        log,
      });
  }
}

await runService("vm-autoscaler", process.env, async (log) => {
  const o = compileOptions(envSchema, process.env, "vm-autoscaler");
  const types = instanceTypes(o);
  const clock = systemClock;
  const bootMs = o.BOOT_TIME_MS ?? (o.PROVIDER === "local" ? o.BOOT_DELAY_MS + 5000 : o.PROVIDER === "ec2" ? 300_000 : o.PROVIDER === "docker" ? 20_000 : 60_000);
  const threads = o.WORKER_THREADS ?? availableParallelism();
  // Local workers with the native engines share this host's cores and memory (libs/policy host-room.ts); emulated ones stand for machines of their own.
  const sharesHost = o.PROVIDER === "local" && o.LOCAL_WORKER_BACKEND === "native";
  const kindEnv: Partial<Record<Hardware, Record<string, string>>> = {};
  const machineKinds: Record<string, MachineKind> = {};
  for (const k of o.LAUNCH_KINDS) {
    const env: Record<string, string> = {};
    if (o.WORKER_THREADS) env.WORKER_THREADS = String(o.WORKER_THREADS);
    // What the executors offer variants: WORKER_MEMORY_MB, else, in a container of DOCKER_MEMORY_MB, the executor's default share of it.
    // Local CPU workers on the one host: their share of its memory by their share of its cores (what they take by default).
    const workerMemoryMb = o.WORKER_MEMORY_MB ?? (o.PROVIDER === "docker" && o.DOCKER_MEMORY_MB ? defaultWorkerMemoryMb(o.DOCKER_MEMORY_MB * 1048576) : sharesHost && k === "cpu" ? cpuWorkerMemoryMb(threads) : undefined);
    if (workerMemoryMb) env.WORKER_MEMORY_MB = String(workerMemoryMb);
    // Local workers share this host and inherit this environment: they would all ask for our METRICS_PORT.
    // Their figures reach Prometheus through the model autoscaler's sloserve_cluster_* (their reports).
    if (o.PROVIDER === "local") env.METRICS_PORT = "0";
    // Emulated engines (libs/executor emulated-backend.ts): a fleet of any kind on this machine.
    if (o.PROVIDER === "local" && o.LOCAL_WORKER_BACKEND === "emulated") env.BACKEND = "emulated";
    kindEnv[k] = env;
    const spot = o.SPOT_KINDS.includes(k);
    const memoryBytes = workerMemoryMb ? workerMemoryMb * 1048576 : Infinity;
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
  const plan = planConfigOf(o);

  const bus = await connectBus({ servers: o.NATS_URL, name: "vm-autoscaler", log, replicas: o.JS_REPLICAS });
  const store = MetadataStore.connect(o.REDIS_URL);
  const catalog = new Catalog(store);
  const provider = buildProvider(o, bus, log, kindEnv, types);
  const served = await startServiceMetrics(o, log);
  const metrics = new VmMetrics(served.registry);
  const spotPrices = o.SPOT_PRICES_FILE ? parseSpotPriceCsv(readFileSync(o.SPOT_PRICES_FILE, "utf8")) : undefined;
  const controller = new VmAutoscalerController(bus, store, catalog, provider, log, clock, { kinds: machineKinds, plan, launchEnv: kindEnv, metrics, ...(spotPrices ? { spotPrices } : {}), ...(sharesHost ? { host: { name: hostname(), cores: o.HOST_CORES, memoryBytes: totalmem() * WORKER_MEMORY_SHARE, kinds: ["cpu"] } } : {}) });
  await controller.start();
  await catalog.load();

  const timer = runEvery(o.TICK_MS, () => controller.tick(), log, "VM autoscaler tick");
  const costTimer = setInterval(() => void controller.publishCosts().catch((err: unknown) => log.warn({ err }, "publishing the cost summary failed")), o.COST_EVERY_MS);

  return {
    info: { provider: provider.name, scalingPolicy: o.SCALING_POLICY, kinds: o.LAUNCH_KINDS, ...(o.PROVIDER === "local" ? { workerBackend: o.LOCAL_WORKER_BACKEND, ...(sharesHost ? { hostCores: o.HOST_CORES } : {}) } : {}), ...(o.PROVIDER === "docker" ? { dockerImage: o.DOCKER_IMAGE, dockerOwner: o.DOCKER_OWNER } : {}), metricsPort: served.port, bootMs, minWorkers: o.MIN_WORKERS, maxWorkers: o.MAX_WORKERS },
    async stop() {
      clearInterval(timer);
      clearInterval(costTimer);
      await served.close();
      await controller.stop();
      // The local provider terminates the executors it started (each drains); EC2, Nomad and Docker keep theirs.
      await provider.close().catch((err: unknown) => log.error({ err, provider: provider.name }, "closing the provider failed"));
      await bus.close();
      await store.close();
    },
  };
});
