import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { startStack, digitsModels, ocrModels, registerOverHttp, waitForProfiles, REPO_ROOT } from "@sloserve/stack";

/**
 * Regenerates docs/MODELS.md: every bundled model and its CPU variants with their measured profile
 * (accuracy, load latency, latency at batch 1/8/32, peak throughput, memory), on this machine.
 * Usage: npm run models:table
 */
interface Variant { name: string; hardware: string; batch_size: number; quantization: string; threads: number; accuracy: number | null; load_latency_ms: number | null; latency_ms: Record<string, number> | null; peak_qps: number | null; memory_bytes: number | null; profiled: boolean }
interface Model { name: string; app: string; task: string; variants: Variant[] }

const say = (s: string): void => void process.stdout.write(s);
const stack = await startStack({ cpuWorkers: 1, workerThreads: 2 });
try {
  const models = [...(await digitsModels()), ...ocrModels()];
  for (const m of models) {
    const r = await registerOverHttp(stack.httpUrl, m);
    if (r.status !== 201) throw new Error(`registering ${m.name}: ${r.status} ${JSON.stringify(r.body)}`);
  }
  for (const m of models) {
    await waitForProfiles(stack.httpUrl, m.name, "cpu", 20 * 60_000, (done, total) => {
      const width = 30;
      const filled = Math.round((done / Math.max(1, total)) * width);
      say(`\r${m.name.padEnd(16)} [${"#".repeat(filled)}${".".repeat(width - filled)}] ${done}/${total} CPU variants profiled`);
    });
    say("\n");
  }
  const apps = [...new Set(models.map((m) => m.app))];
  const listed: Model[] = [];
  for (const app of apps) listed.push(...((await (await fetch(`${stack.httpUrl}/v1/apps/${app}/models`)).json()) as { models: Model[] }).models);
  const f = (x: number | null | undefined, digits = 2): string => (x === null || x === undefined ? "–" : x.toFixed(digits));
  const lines = [
    "# Bundled models and their variants",
    "",
    `Measured on this project's development machine (2 cores, shared) by \`npm run models:table\` on ${new Date().toISOString().slice(0, 10)}; every figure comes from the profiler (median of repeated runs). Latencies are of one batch on the CPU execution provider; memory is the worker's RSS growth while the variant's largest batch ran (approximate: the first model a worker loads also pays for onnxruntime's own start-up). Accuracy is top-1 on the model's validation set (digits: 1 500 held-out MNIST digits); the OCR models ship without one. Variants whose max batch took over 2 s at a smaller size are not kept. GPU and Inferentia variants exist for every model and stay unprofiled until a worker of that kind takes their profiling job.`,
    "",
    "| model | variant | accuracy | load ms | b1 ms | b8 ms | b32 ms | peak QPS | memory MB |",
    "|---|---|---|---|---|---|---|---|---|",
  ];
  for (const m of listed) {
    for (const v of m.variants.filter((x) => x.hardware === "cpu" && x.profiled)) {
      lines.push(`| ${m.name} | ${v.name.slice(m.name.length + 2)} | ${f(v.accuracy, 4)} | ${f(v.load_latency_ms, 0)} | ${f(v.latency_ms?.["1"])} | ${f(v.latency_ms?.["8"])} | ${f(v.latency_ms?.["32"])} | ${f(v.peak_qps, 0)} | ${v.memory_bytes === null ? "–" : (v.memory_bytes / 1048576).toFixed(0)} |`);
    }
    const other = m.variants.filter((x) => x.hardware !== "cpu");
    if (other.length) lines.push(`| ${m.name} | ${other.length} gpu/inferentia variants | – | – | – | – | – | – | unprofiled: no worker of that kind |`);
  }
  writeFileSync(join(REPO_ROOT, "docs", "MODELS.md"), lines.join("\n") + "\n");
  say(`wrote docs/MODELS.md (${listed.length} models)\n`);
} finally {
  await stack.stop();
}
