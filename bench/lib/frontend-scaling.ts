import { median } from "@sloserve/policy";
import type { ServiceHandle, Stack } from "@sloserve/stack";
import { HttpClient } from "./http-client.js";
import { closedLoop } from "./load.js";
import { CpuMeter, monotonicUs } from "./proc.js";
import { round, roundSummary, summarize, type Summary } from "./stats.js";
import type { Targets } from "./targets.js";

/**
 * Throughput per added frontend process (`npm run bench -- --only serving --frontends 1,2`): the tiny
 * model's saturated HTTP throughput, JSON and the binary extension, through frontends of 1, 2, …
 * processes on the same stack: the stack's own frontend (one process) and, for every other count, a
 * frontend started beside it with FRONTEND_PROCESSES (services/frontend processes.ts: Node's cluster,
 * one port). Closed loop, in rotations (every count and path back to back, as the serving benchmark's
 * throughput); ratios to one process are taken within a rotation. The load generator, the rest of the
 * stack and every frontend process share the machine's cores: on 2 cores an added process can only
 * take CPU from the others, so a gain may be small or negative.
 */

export interface FrontendScalingFigure {
  model: string;
  processes: number[];
  rotations: number;
  concurrency: number;
  durationS: number;
  /** By path (http, http-bin), then by process count. */
  paths: Record<string, Record<string, { qps: number; qpsPerRotation: number[]; errors: number; firstError?: string; latencyMs: Summary; cpuUsPerQuery: Record<string, number> }>>;
  /** queries/s with N processes ÷ with 1, medians of the ratios within a rotation. */
  vsOne: Record<string, Record<string, number | null>>;
  /** (queries/s with N − with 1) ÷ (N − 1), from the medians: what each added process brought. */
  perAddedProcessQps: Record<string, Record<string, number | null>>;
}

export interface FrontendScalingDeps {
  stack: Stack;
  /** Process counts to measure; 1 (the stack's own frontend) is always among them. */
  processes: number[];
  model: string;
  /** The benchmark's targets, sending to the given frontend. */
  targets: (client: HttpClient) => Targets;
  /** The stack's processes, whose CPU time is counted (the frontends' own are added). */
  systemPids: Record<string, number>;
  plan: { warmupMs: number; durationMs: number; concurrency: number };
  rotations: number;
  /** HTTP clients to close at the end of the benchmark (the ones made here are added). */
  clients: HttpClient[];
  windows: Array<{ phase: string; fromUs: number; toUs: number }>;
  log: (line: string) => void;
}

const PATHS = ["http", "http-bin"] as const;

export async function measureFrontendScaling(deps: FrontendScalingDeps): Promise<FrontendScalingFigure> {
  const { stack, plan, log } = deps;
  const counts = [...new Set([1, ...deps.processes])].sort((a, b) => a - b);
  const started: ServiceHandle[] = [];
  try {
    const frontends = new Map<number, { client: HttpClient; pids: Record<string, number> }>();
    const own = stack.services.find((s) => s.name === "frontend");
    if (!own) throw new Error("the stack has no frontend");
    frontends.set(1, { client: new HttpClient(stack.httpUrl), pids: { frontend: own.process.pid as number } });
    for (const n of counts.filter((c) => c > 1)) {
      const t0 = Date.now();
      const handle = await stack.startService("frontend", { HTTP_PORT: "0", HTTP_HOST: "127.0.0.1", GRPC_PORT: "0", FRONTEND_PROCESSES: String(n) });
      started.push(handle);
      const workers = (handle.info.workerPids as number[] | undefined) ?? [];
      if (workers.length !== n) throw new Error(`a frontend with FRONTEND_PROCESSES=${n} reported ${workers.length} processes: ${JSON.stringify(handle.info)}`);
      const pids: Record<string, number> = { [`frontend×${n} primary`]: handle.process.pid as number };
      workers.forEach((pid, i) => (pids[`frontend×${n} process ${i + 1}`] = pid));
      frontends.set(n, { client: new HttpClient(`http://127.0.0.1:${String(handle.info.port)}`), pids });
      log(`  frontends: ${n} processes on port ${String(handle.info.port)} up in ${((Date.now() - t0) / 1000).toFixed(1)} s (pids ${workers.join(", ")})`);
    }
    for (const f of frontends.values()) deps.clients.push(f.client);

    const key = (n: number): string => String(n);
    const acc: Record<string, Record<string, { qps: number[]; completed: number; errors: number; firstError?: string; latencies: number[]; cpu: Record<string, number> }>> = {};
    const ratio: Record<string, Record<string, number[]>> = {};
    for (const path of PATHS) {
      acc[path] = Object.fromEntries(counts.map((n) => [key(n), { qps: [], completed: 0, errors: 0, latencies: [], cpu: {} }]));
      ratio[path] = Object.fromEntries(counts.map((n) => [key(n), []]));
    }
    for (let rot = 0; rot < deps.rotations; rot++) {
      log(`  frontends: rotation ${rot + 1}/${deps.rotations}: ${counts.join(", ")} processes × ${PATHS.join(", ")} (${plan.concurrency} clients, ${plan.durationMs / 1000} s each)`);
      const thisRot: Record<string, Record<string, number>> = { http: {}, "http-bin": {} };
      for (const n of counts) {
        const f = frontends.get(n) as { client: HttpClient; pids: Record<string, number> };
        const t = deps.targets(f.client);
        for (const path of PATHS) {
          const meter = new CpuMeter({ ...deps.systemPids, ...f.pids });
          let fromUs = 0;
          const r = await closedLoop(path === "http" ? t.http : t.httpBinary, {
            ...plan,
            warmupMs: rot === 0 ? plan.warmupMs : Math.min(plan.warmupMs, 1_000),
            onWindow: (edge) => {
              if (edge === "start") {
                meter.mark();
                fromUs = monotonicUs();
              } else {
                deps.windows.push({ phase: `small:frontends-${n}-${path}`, fromUs, toUs: monotonicUs() });
              }
            },
          });
          const cpu = meter.delta();
          const a = acc[path]![key(n)]!;
          a.qps.push(r.qps);
          a.completed += r.completed;
          a.errors += r.errors;
          if (r.firstError) a.firstError ??= r.firstError;
          a.latencies.push(...r.latencies);
          for (const [proc, ms] of Object.entries(cpu)) a.cpu[proc] = (a.cpu[proc] ?? 0) + ms;
          thisRot[path]![key(n)] = r.qps;
          if (r.errors > 0) log(`    ${n} processes, ${path}: ${r.errors} errors, first: ${r.firstError}`);
        }
      }
      for (const path of PATHS) for (const n of counts) ratio[path]![key(n)]!.push(thisRot[path]![key(n)]! / thisRot[path]![key(1)]!);
      log(`    ${PATHS.map((path) => `${path}: ${counts.map((n) => `${n} → ${round(thisRot[path]![key(n)]!)}/s`).join(", ")}`).join("; ")}`);
    }

    const figure: FrontendScalingFigure = { model: deps.model, processes: counts, rotations: deps.rotations, concurrency: plan.concurrency, durationS: plan.durationMs / 1000, paths: {}, vsOne: {}, perAddedProcessQps: {} };
    for (const path of PATHS) {
      const byCount: FrontendScalingFigure["paths"][string] = {};
      for (const n of counts) {
        const a = acc[path]![key(n)]!;
        const perQuery: Record<string, number> = {};
        for (const [proc, ms] of Object.entries(a.cpu)) if (ms > 0 && a.completed > 0) perQuery[proc] = round((ms * 1000) / a.completed);
        byCount[key(n)] = { qps: round(median(a.qps)), qpsPerRotation: a.qps.map((x) => round(x)), errors: a.errors, ...(a.firstError ? { firstError: a.firstError } : {}), latencyMs: roundSummary(summarize(a.latencies)), cpuUsPerQuery: perQuery };
      }
      figure.paths[path] = byCount;
      const one = byCount[key(1)]!.qps;
      figure.vsOne[path] = Object.fromEntries(counts.filter((n) => n > 1).map((n) => [key(n), round(median(ratio[path]![key(n)]!))]));
      figure.perAddedProcessQps[path] = Object.fromEntries(counts.filter((n) => n > 1).map((n) => [key(n), round((byCount[key(n)]!.qps - one) / (n - 1))]));
    }
    return figure;
  } finally {
    for (const s of started) await s.stop();
  }
}
