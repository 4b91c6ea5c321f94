/**
 * `npm run zoo [-- --force] [--seed N] [--cache-dir DIR] [--models a,b]`: trains the digits zoo (or
 * reuses a valid cache) and prints one line per model: parameters, test accuracy, training time.
 */
import { parseArgs } from "node:util";
import type { ZooManifest, ZooProgress } from "./types.js";
import { DEFAULT_CACHE_DIR, DEFAULT_ZOO_SEED, buildZoo, ensureZoo } from "./zoo.js";

const USAGE = "usage: npm run zoo -- [--force] [--seed N] [--cache-dir DIR] [--models name,name]";

function progressLine(event: ZooProgress): string | null {
  switch (event.type) {
    case "data":
      return `data: mnist ${event.train} train / ${event.validation} validation / ${event.test} test`;
    case "stale":
      return `cache: rebuilding (${event.reason})`;
    case "cached":
      return `cache: up to date (${event.manifest.contentHash})`;
    case "start":
      return `[${event.index + 1}/${event.total}] ${event.model}: training`;
    case "epoch":
      return `  ${event.model} epoch ${event.epoch}/${event.epochs} loss ${event.loss.toFixed(4)} (${(event.elapsedMs / 1000).toFixed(1)} s)`;
    case "done":
      return `  ${event.model}: test accuracy ${(event.entry.testAccuracy * 100).toFixed(2)}% in ${(event.entry.trainTimeMs / 1000).toFixed(1)} s`;
  }
}

/** Formats the manifest as a fixed-width table. */
export function formatTable(manifest: ZooManifest): string {
  const header = ["model", "params", "test acc", "val acc", "train time", "onnx bytes"];
  const rows = manifest.models.map((m) => [
    m.name,
    String(m.params),
    `${(m.testAccuracy * 100).toFixed(2)}%`,
    `${(m.validationAccuracy * 100).toFixed(2)}%`,
    `${(m.trainTimeMs / 1000).toFixed(1)} s`,
    String(m.onnxBytes),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]): string => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  const total = manifest.models.reduce((s, m) => s + m.trainTimeMs, 0);
  return [line(header), ...rows.map(line), `total training time ${(total / 1000).toFixed(1)} s, seed ${manifest.seed}, ${manifest.contentHash}`].join("\n");
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      force: { type: "boolean", default: false },
      seed: { type: "string" },
      "cache-dir": { type: "string" },
      models: { type: "string" },
      help: { type: "boolean", default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const seed = values.seed === undefined ? DEFAULT_ZOO_SEED : Number(values.seed);
  if (!Number.isInteger(seed)) throw new Error(`--seed must be an integer, got ${values.seed}`);
  const options = {
    cacheDir: values["cache-dir"] ?? DEFAULT_CACHE_DIR,
    seed,
    models: values.models?.split(",").map((s) => s.trim()).filter(Boolean),
    onProgress: (event: ZooProgress) => {
      const line = progressLine(event);
      if (line) console.log(line);
    },
  };
  const manifest = values.force ? await buildZoo(options) : await ensureZoo(options);
  console.log(`\n${options.cacheDir}`);
  console.log(formatTable(manifest));
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  console.error(USAGE);
  process.exitCode = 1;
});
