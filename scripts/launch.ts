import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { startStack, bearer, prometheusFileSd, REPO_ROOT, ocrModels, ocrPipelineSpec, digitsModels, registerOverHttp, digitsCascadeSpec, registerPipelineOverHttp } from "@sloserve/stack";
import { probeExecutionProvider } from "@sloserve/runtime";
import { DEFAULT_SCALING_POLICY, SCALING_POLICIES, isScalingPolicy, scalingRulesOf } from "@sloserve/policy";

/**
 * Starts the whole system locally: nats-server (JetStream) and redis-server on free ports, every
 * service as its own process, the frontend on HTTP_PORT (default 8080), and the bundled models
 * registered. State lives in .run/ and starts fresh each time; within a run Redis keeps an append-only
 * file (.run/redis), so a redis-server restart keeps the registry. Ctrl-C stops everything.
 */
const { values } = parseArgs({
  options: {
    port: { type: "string", default: process.env.HTTP_PORT ?? "8080" },
    // The Open Inference Protocol over gRPC (inference.GRPCInferenceService).
    "grpc-port": { type: "string", default: process.env.GRPC_PORT ?? "8081" },
    workers: { type: "string", default: process.env.CPU_WORKERS ?? "1" },
    // Frontend processes on the HTTP and gRPC ports (FRONTEND_PROCESSES: Node's cluster, one port each).
    frontends: { type: "string", default: process.env.FRONTEND_PROCESSES ?? "1" },
    // CPU workers the vm-autoscaler may run in all (its own launches on top of --workers): default 2 more.
    "max-workers": { type: "string", default: process.env.MAX_CPU_WORKERS },
    "no-models": { type: "boolean", default: false },
    // An Inferentia host: the Neuron-backed OIP gRPC server (host:port) that executor-inferentia hands its batches to.
    "neuron-server": { type: "string", default: process.env.NEURON_SERVER },
    // Access control (docs/SECURITY.md): API keys on HTTP and gRPC, NATS users; prints the keys.
    auth: { type: "boolean", default: false },
  },
});

const dir = join(REPO_ROOT, ".run");
rmSync(dir, { recursive: true, force: true });
const say = (line: string): void => console.log(`[sloserve] ${line}`);
say("starting nats-server, redis-server and the services...");
const cpuWorkers = Number(values.workers);
const maxWorkers = values["max-workers"] === undefined ? cpuWorkers + 2 : Number(values["max-workers"]);
// The scaling policy (the vm-autoscaler's SCALING_POLICY, libs/policy scaling-policy.ts) and the
// dispatcher's overflow that goes with it: to the local function pool unless the policy runs none
// (infaas, static) or OVERFLOW says otherwise (off, lambda, lambda,local).
const scalingPolicy = process.env.SCALING_POLICY ?? DEFAULT_SCALING_POLICY;
if (!isScalingPolicy(scalingPolicy)) throw new Error(`SCALING_POLICY=${scalingPolicy}: use one of ${SCALING_POLICIES.join(", ")}`);
const overflow = process.env.OVERFLOW ?? (scalingRulesOf(scalingPolicy).overflow ? "local" : "off");
const frontendProcesses = Number(values.frontends);
if (!Number.isInteger(frontendProcesses) || frontendProcesses < 1) throw new Error(`--frontends (FRONTEND_PROCESSES) takes a number of processes, 1 or more, not ${values.frontends}`);
const stack = await startStack({ dir, httpPort: Number(values.port), grpcPort: Number(values["grpc-port"]), frontendProcesses, cpuWorkers, maxWorkers, persistRedis: true, auth: values.auth, logLevel: process.env.LOG_LEVEL ?? "info", env: { OVERFLOW: overflow, SCALING_POLICY: scalingPolicy } });
let stopping = false;
const stop = async (): Promise<void> => {
  if (stopping) return;
  stopping = true;
  say("stopping...");
  await stack.stop();
  say("stopped");
  process.exit(0);
};
process.on("SIGINT", () => void stop());
process.on("SIGTERM", () => void stop());

if ((await probeExecutionProvider("cuda")).ok) {
  const gpu = await stack.startService("executor-gpu");
  say(`CUDA is usable here: started executor-gpu ${String(gpu.info.worker)}`);
}
if (values["neuron-server"]) {
  const inf = await stack.startService("executor-inferentia", { NEURON_SERVER: values["neuron-server"] });
  say(`started executor-inferentia ${String(inf.info.worker)}, serving through the Neuron server at ${values["neuron-server"]}`);
}
say(`services up (logs: ${stack.logPath}); the vm-autoscaler (SCALING_POLICY=${scalingPolicy}, OVERFLOW=${overflow}) runs up to ${maxWorkers} CPU worker(s) as far as this host's cores allow (HOST_CORES), replaces lost ones, and gives back only those it launched`);
if (!values["no-models"]) {
  const digits = await digitsModels((p) => {
    if (p.type === "start") say(`training ${p.model} (${p.index + 1}/${p.total}, cached after this run)...`);
  });
  for (const model of [...digits, ...ocrModels()]) {
    const { status, body } = await registerOverHttp(stack.httpUrl, model, stack.adminKey);
    if (status === 201) say(`registered ${model.app}/${model.name} (${(body.variants as unknown[]).length} variants; profiling in the background)`);
    else say(`could not register ${model.name}: ${status} ${JSON.stringify(body)}`);
  }
  const cascade = await registerPipelineOverHttp(stack.httpUrl, digitsCascadeSpec(), stack.adminKey);
  if (cascade.status === 201) say("registered pipeline digits-cascade (POST /v1/pipelines/digits-cascade/infer)");
  else say(`could not register pipeline digits-cascade: ${cascade.status} ${JSON.stringify(cascade.body)}`);
  const ocr = await registerPipelineOverHttp(stack.httpUrl, ocrPipelineSpec(), stack.adminKey);
  if (ocr.status === 201) say("registered pipeline ocr (POST /v1/pipelines/ocr/infer with an image as the body, Content-Type image/png or image/jpeg)");
  else say(`could not register pipeline ocr: ${ocr.status} ${JSON.stringify(ocr.body)}`);
}
const url = `http://localhost:${Number(values.port) || new URL(stack.httpUrl).port}`;
// Every service's Prometheus endpoint, for a Prometheus here (file_sd_configs; docs/METRICS.md).
writeFileSync(join(dir, "prometheus-targets.json"), JSON.stringify(prometheusFileSd(stack.metricsTargets()), null, 2));
say(`metrics: ${stack.metricsTargets().map((t) => `${t.service} ${t.url}`).join(", ")} (listed in .run/prometheus-targets.json)`);
if (stack.adminKey) {
  // Printed here, on the console only: the services' logs never carry a key.
  say(`access control is on: every route but health, metrics and the dashboard page needs 'Authorization: Bearer <key>' (gRPC: metadata 'authorization')`);
  say(`admin key (everything; also the dashboard: ${url}/dashboard#key=<admin key>): ${stack.adminKey}`);
  // A user key per bundled app, and one for the ocr pipeline, whose stages span the three OCR apps.
  const ocrApps = ocrModels().map((m) => m.app);
  const userKeys = [{ name: "digits", apps: ["digits"] }, ...ocrApps.map((a) => ({ name: a, apps: [a] })), { name: "ocr pipeline", apps: ocrApps }];
  for (const { name, apps } of userKeys) {
    const made = await fetch(`${stack.httpUrl}/v1/keys`, { method: "POST", headers: { "content-type": "application/json", ...bearer(stack.adminKey) }, body: JSON.stringify({ role: "user", apps, name }) });
    const key = (await made.json()) as { key?: string; error?: string };
    say(key.key ? `user key for ${name} (app ${apps.join(", ")}): ${key.key}` : `could not make a key for ${name}: ${made.status} ${key.error ?? ""}`);
  }
}
if (stack.natsUsers) {
  // NATS users (docs/SECURITY.md): printed here and written to .run (owner-only), never logged.
  const { client, admin } = stack.natsUsers;
  writeFileSync(join(dir, "nats-users.json"), JSON.stringify(stack.natsUsers, null, 2), { mode: 0o600 });
  say(`NATS users are on (${stack.env.NATS_URL}): your own services as NATS_USER=${client.user} NATS_PASSWORD=${client.password} (queries, registrations, metrics); operators as ${admin.user} / ${admin.password}; every service's user in .run/nats-users.json`);
}
say(`ready: ${url}  (dashboard: ${url}/dashboard, health: ${url}/v2/health/ready; OIP gRPC: ${stack.grpcAddress}${frontendProcesses > 1 ? `; ${frontendProcesses} frontend processes` : ""}). Ctrl-C stops.`);
