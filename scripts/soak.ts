/**
 * `npm run soak`: the real local stack under a steady load for a long time, to see whether latency or
 * memory drift. It starts the stack (nats-server, redis-server, every service), registers a small MLP,
 * measures capacity (closed loop: CONCURRENCY clients sending back to back for CAPACITY_S seconds),
 * then sends an open-loop load at SOAK_LOAD (0.7) × that capacity for SOAK_MINUTES (10), and prints one
 * line per minute: queries answered and failed, p50 and p99 latency, and each service's resident memory.
 * Every query is counted as answered, clearly failed or hung (test/faults.ts).
 *
 *   npm run soak                                  # 10 minutes at 70 %
 *   SOAK_MINUTES=3 SOAK_LOAD=0.5 npm run soak     # shorter, lighter
 *   SOAK_OUT=reports/soak.json npm run soak       # also write the per-minute rows as JSON
 */
import { writeFileSync } from "node:fs";
import { startStack, registerOverHttp, tempDir } from "@sloserve/stack";
import { quantile } from "@sloserve/policy";
import { Tally, openLoop, query, stackRss } from "../test/faults.js";
import { smallModel, smallQuery } from "../test/fault-load.js";

const env = process.env;
const MINUTES = Number(env["SOAK_MINUTES"] ?? 10);
const LOAD = Number(env["SOAK_LOAD"] ?? 0.7);
const CAPACITY_S = Number(env["CAPACITY_S"] ?? 20);
const CONCURRENCY = Number(env["CONCURRENCY"] ?? 16);
const WORKERS = Number(env["SOAK_WORKERS"] ?? 1);
const DEADLINE_MS = 10_000;

const stack = await startStack({ cpuWorkers: WORKERS, workerThreads: 1, env: { VARIANT_HARDWARE: "cpu", VARIANT_BATCH_SIZES: "8", VARIANT_CPU_THREADS: "1", PROFILE_ON_REGISTER: "false" } });
const stop = async (): Promise<void> => {
  await stack.stop();
};
process.on("SIGINT", () => void stop().then(() => process.exit(130)));
try {
  const model = smallModel(tempDir("soak"), "soak", "soak-mlp");
  const registered = await registerOverHttp(stack.httpUrl, model);
  if (registered.status !== 201) throw new Error(`registration failed: ${JSON.stringify(registered.body)}`);
  const url = `${stack.httpUrl}/v2/models/${model.name}/infer`;
  const send = (i: number) => query(url, smallQuery(i) as Record<string, unknown>, DEADLINE_MS);
  await send(0); // the first query loads the variant

  // Capacity: CONCURRENCY clients back to back.
  let answered = 0;
  const capacityEnd = Date.now() + CAPACITY_S * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async (_, c) => {
      for (let i = c; Date.now() < capacityEnd; i += CONCURRENCY) if ((await send(i)).kind === "answered") answered++;
    }),
  );
  const capacity = answered / CAPACITY_S;
  const rate = capacity * LOAD;
  console.log(JSON.stringify({ event: "capacity", queriesPerS: Math.round(capacity * 10) / 10, concurrency: CONCURRENCY, soakRate: Math.round(rate * 10) / 10, minutes: MINUTES, workers: WORKERS }));

  // The soak: open loop at `rate`, one row per minute.
  const rows: Array<Record<string, unknown>> = [];
  let minute = new Tally();
  const total = new Tally();
  let minuteStart = Date.now();
  const mb = (r: Record<string, number>) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, Math.round(v / 1048576)]));
  const report = async (): Promise<void> => {
    const done = minute;
    minute = new Tally();
    await done.settle();
    const row = {
      minute: rows.length + 1,
      sent: done.sent,
      answered: done.answered,
      failed: done.failed,
      hung: done.hung,
      p50Ms: done.latencies.length ? Math.round(quantile(done.latencies, 0.5)) : null,
      p99Ms: done.latencies.length ? Math.round(quantile(done.latencies, 0.99)) : null,
      rssMb: mb(stackRss(stack)),
    };
    rows.push(row);
    console.log(JSON.stringify(row));
  };
  const reports: Array<Promise<void>> = [];
  await openLoop(
    rate,
    (i) => {
      const p = send(i);
      minute.track(p);
      total.track(p);
    },
    (_sent, elapsed) => elapsed >= MINUTES * 60_000,
    () => {
      if (Date.now() - minuteStart >= 60_000) {
        minuteStart = Date.now();
        reports.push(report());
      }
    },
  );
  reports.push(report());
  await Promise.all(reports);
  await total.settle();
  const summary = { event: "soak", capacity, rate, ...total.summary(), p99Ms: Math.round(quantile(total.latencies, 0.99)) };
  console.log(JSON.stringify(summary));
  if (env["SOAK_OUT"]) writeFileSync(env["SOAK_OUT"], JSON.stringify({ summary, minutes: rows }, null, 2));
} finally {
  await stop();
}
