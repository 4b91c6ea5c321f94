import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { arrivalsReportSchema, oipGrpcProtoPath } from "@sloserve/contracts";
import { median } from "@sloserve/policy";
import { digitsModels, registerOverHttp, startStack, waitForProfiles, type Stack } from "@sloserve/stack";
import { HttpClient } from "../lib/http-client.js";
import { closedLoop, type Target } from "../lib/load.js";
import { round, roundSummary, summarize, type Summary } from "../lib/stats.js";

/**
 * The system as `npm start` runs it (`npm run bench -- --only as-started`): scripts/launch.ts's defaults
 * (one CPU worker of the stack's own offering all the machine's cores, the vm-autoscaler free to run
 * two more local workers, OVERFLOW=local, the combined scaling policy, PROFILE_ON_REGISTER's default),
 * the bundled digits models registered and profiled, then closed loops on digits-mlp-m (the model,
 * not a pinned variant: the dispatcher selects) over gRPC (`ModelInfer`, raw contents), HTTP with the
 * binary tensor extension and HTTP JSON, at each concurrency.
 *
 * Two configurations side by side, in alternating rounds: `one-host` (today's default: local launches
 * and local overflow within the host's cores, HOST_CORES = the machine's cores) and `oversubscribed`
 * (HOST_CORES=1024: what `npm start` did before, local launches and function containers on the same
 * cores). Per configuration: queries/s, latency quantiles, the host's CPU per query (every process but
 * this one, from /proc/stat, the load generator excluded), the vm-autoscaler's launches and the
 * queries overflowed to the local pool during the measurements. The load generator shares the cores.
 */

export interface AsStartedCell {
  qps: number;
  latencyMs: Summary;
  errors: number;
  firstError?: string;
  /** Host CPU µs per answered query, this process excluded. */
  hostCpuUsPerQuery: number;
  /** The variant that answered a query sent right after the window (the dispatcher's choice then). */
  variant?: string;
}

export interface AsStartedConfigFigure {
  hostCores: string;
  /** path → concurrency → one cell per round. */
  cells: Record<string, Record<string, AsStartedCell[]>>;
  launches: number;
  overflowed: number;
}

export interface AsStartedResult {
  model: string;
  concurrency: number[];
  durationS: number;
  rounds: number;
  configs: Record<string, AsStartedConfigFigure>;
  /** path → concurrency → one-host ÷ oversubscribed, medians over rounds: queries/s and p99. */
  oneHostVsOversubscribed: Record<string, Record<string, { qps: number | null; p99: number | null }>>;
}

const MODEL = "digits-mlp-m";
const PATHS = ["grpc", "http-bin", "http"] as const;
const CONFIGS: Record<string, string | undefined> = { "one-host": undefined, oversubscribed: "1024" };

/** The host's busy CPU time, ms, from /proc/stat (all CPUs: user, nice, system, irq, softirq, steal). */
function hostBusyMs(): number {
  const cpu = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = cpu;
  return (user + nice + system + irq + softirq + steal) * 10; // USER_HZ = 100
}

const image = (seed: number): number[] => Array.from({ length: 28 * 28 }, (_, i) => ((i * 7 + seed * 13) % 29) / 29);

function targets(stack: Stack): { targets: Record<(typeof PATHS)[number], Target>; variant: () => Promise<string | undefined>; close: () => void } {
  const http = new HttpClient(stack.httpUrl);
  const data = image(1);
  const json = Buffer.from(JSON.stringify({ inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], data }] }));
  const raw = Buffer.from(new Float32Array(data).buffer);
  const header = Buffer.from(JSON.stringify({ inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28], parameters: { binary_data_size: raw.length } }], parameters: { binary_data_output: true } }));
  const binary = Buffer.concat([header, raw]);
  const path = `/v2/models/${MODEL}/infer`;
  const Service = (grpc.loadPackageDefinition(protoLoader.loadSync(oipGrpcProtoPath, { keepCase: true, longs: Number, defaults: true, oneofs: true })).inference as grpc.GrpcObject).GRPCInferenceService as grpc.ServiceClientConstructor;
  const client = new Service(stack.grpcAddress, grpc.credentials.createInsecure()) as grpc.Client & Record<string, (r: unknown, cb: (err: grpc.ServiceError | null, res: unknown) => void) => void>;
  const grpcRequest = { model_name: MODEL, inputs: [{ name: "input", datatype: "FP32", shape: [1, 1, 28, 28] }], raw_input_contents: [raw] };
  const ok = (status: number, body: Buffer): void => {
    if (status !== 200) throw new Error(`HTTP ${status}: ${body.toString("utf8", 0, 300)}`);
  };
  return {
    targets: {
      grpc: () => new Promise((resolve, reject) => client.ModelInfer!(grpcRequest, (err, res) => (err ? reject(err) : resolve(res)))),
      "http-bin": async () => {
        const a = await http.postBinary(path, binary, header.length);
        ok(a.status, a.body);
      },
      http: async () => {
        const a = await http.post(path, json);
        ok(a.status, a.body);
      },
    },
    variant: async () => {
      const a = await http.post(path, json);
      return a.status === 200 ? (JSON.parse(a.body.toString("utf8")) as { served_by?: { variant?: string } }).served_by?.variant : undefined;
    },
    close: () => client.close(),
  };
}

async function measureConfig(name: string, hostCores: string | undefined, figure: AsStartedConfigFigure, opts: { concurrency: number[]; durationMs: number; warmupMs: number; log: (s: string) => void }): Promise<void> {
  opts.log(`   ${name}: starting the stack as npm start does${hostCores ? ` (HOST_CORES=${hostCores})` : ""}`);
  const stack = await startStack({ cpuWorkers: 1, maxWorkers: 3, env: { OVERFLOW: "local", SCALING_POLICY: "combined", ...(hostCores ? { HOST_CORES: hostCores } : {}) } });
  let nc: NatsConnection | undefined;
  let close = (): void => {};
  try {
    for (const model of await digitsModels()) {
      const r = await registerOverHttp(stack.httpUrl, model);
      if (r.status !== 201) throw new Error(`registering ${model.name}: ${r.status} ${JSON.stringify(r.body)}`);
    }
    for (const model of await digitsModels()) await waitForProfiles(stack.httpUrl, model.name, "cpu", 600_000);
    nc = await connect({ servers: stack.nats.url });
    let launches = 0;
    let overflowed = 0;
    let counting = false;
    nc.subscribe("decision.vm.*", { callback: (_e, m) => void (counting && (m.json<{ action: string }>().action === "launch" ? launches++ : 0)) });
    nc.subscribe("arrivals.>", {
      callback: (_e, m) => {
        const a = arrivalsReportSchema.safeParse(m.json());
        if (counting && a.success) overflowed += a.data.overflowed ?? 0;
      },
    });
    const t = targets(stack);
    close = t.close;
    // The first answers load the selected variant.
    for (const p of PATHS) for (let i = 0; i < 20; i++) await t.targets[p]().catch(() => undefined);
    counting = true;
    for (const p of PATHS) {
      for (const c of opts.concurrency) {
        let busy0 = 0;
        let self0 = process.cpuUsage();
        const r = await closedLoop(t.targets[p], {
          concurrency: c,
          warmupMs: opts.warmupMs,
          durationMs: opts.durationMs,
          onWindow: (edge) => {
            if (edge === "start") {
              busy0 = hostBusyMs();
              self0 = process.cpuUsage();
            } else {
              const self = process.cpuUsage(self0);
              busy0 = hostBusyMs() - busy0 - (self.user + self.system) / 1000;
            }
          },
        });
        const variant = await t.variant().catch(() => undefined);
        const cell: AsStartedCell = { qps: round(r.qps), latencyMs: roundSummary(summarize(r.latencies)), errors: r.errors, ...(r.firstError ? { firstError: r.firstError } : {}), hostCpuUsPerQuery: r.completed > 0 ? Math.round((busy0 * 1000) / r.completed) : 0, ...(variant ? { variant } : {}) };
        ((figure.cells[p] ??= {})[String(c)] ??= []).push(cell);
        opts.log(`   ${name} ${p} c${c}: ${cell.qps} q/s, p50 ${cell.latencyMs.p50} ms, p99 ${cell.latencyMs.p99} ms, ${cell.hostCpuUsPerQuery} µs CPU/query, ${r.errors} errors; then served by ${variant ?? "?"}`);
      }
    }
    counting = false;
    figure.launches += launches;
    figure.overflowed += overflowed;
    opts.log(`   ${name}: ${launches} launch(es), ${overflowed} queries overflowed to the local pool`);
  } finally {
    close();
    await nc?.close();
    await stack.stop();
  }
}

export async function runAsStarted(options: { quick: boolean; rounds?: number; log: (s: string) => void }): Promise<AsStartedResult> {
  const concurrency = [8, 32];
  const durationMs = options.quick ? 8000 : 20_000;
  const rounds = options.rounds ?? (options.quick ? 2 : 4);
  const configs: Record<string, AsStartedConfigFigure> = {};
  for (const [name, hostCores] of Object.entries(CONFIGS)) configs[name] = { hostCores: hostCores ?? "the machine's cores", cells: {}, launches: 0, overflowed: 0 };
  for (let round_ = 0; round_ < rounds; round_++) {
    // Alternating order: each configuration goes first in one round of two.
    const order = Object.entries(CONFIGS);
    if (round_ % 2 === 1) order.reverse();
    for (const [name, hostCores] of order) await measureConfig(name, hostCores, configs[name]!, { concurrency, durationMs, warmupMs: 2000, log: options.log });
  }
  const ratio = (a: number[], b: number[]): number | null => {
    const x = median(a);
    const y = median(b);
    return y > 0 && Number.isFinite(x) ? round(x / y) : null;
  };
  const oneHostVsOversubscribed: AsStartedResult["oneHostVsOversubscribed"] = {};
  for (const p of PATHS) {
    for (const c of concurrency) {
      const a = configs["one-host"]!.cells[p]?.[String(c)] ?? [];
      const b = configs.oversubscribed!.cells[p]?.[String(c)] ?? [];
      (oneHostVsOversubscribed[p] ??= {})[String(c)] = { qps: ratio(a.map((x) => x.qps), b.map((x) => x.qps)), p99: ratio(a.map((x) => x.latencyMs.p99), b.map((x) => x.latencyMs.p99)) };
    }
  }
  return { model: MODEL, concurrency, durationS: durationMs / 1000, rounds, configs, oneHostVsOversubscribed };
}
