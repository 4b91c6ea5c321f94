import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DIGIT_SHAPE, loadDigits } from "../src/data.js";
import { networkFromOnnx } from "../src/export.js";
import { accuracy } from "../src/network.js";
import type { ZooProgress } from "../src/types.js";
import { readValidationSet } from "../src/validation-set.js";
import { DEFAULT_CACHE_DIR, buildZoo, checkZooCache, ensureZoo, readManifest } from "../src/zoo.js";
import { maxAbsDiff, ortProbabilities } from "./ort-helpers.js";

const splits = loadDigits();
const dirs: string[] = [];
async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "zoo-test-"));
  dirs.push(dir);
  return dir;
}
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

// The two fastest models (well under a second together) stand in for the whole family.
const SMALL = ["digits-tiny", "digits-logreg"];

describe("zoo - build and cache", () => {
  it("zoo - buildZoo writes models, validation sets and a manifest; ensureZoo reuses them", async () => {
    const cacheDir = await tempDir();
    const events: ZooProgress[] = [];
    const manifest = await buildZoo({ cacheDir, seed: 3, models: SMALL, onProgress: (e) => events.push(e) });
    expect(manifest.models.map((m) => m.name)).toEqual(SMALL);
    expect(manifest.dataset).toMatchObject({ name: "mnist", train: 7000, validation: 1500, test: 1500, features: 784, classes: 10 });
    expect(events.filter((e) => e.type === "done").length).toBe(2);
    expect(events.filter((e) => e.type === "epoch").length).toBe(3 + 5); // tiny 3 epochs, logreg 5

    for (const entry of manifest.models) {
      expect(entry).toMatchObject({
        task: "image-classification",
        dataset: "mnist",
        inputs: [{ name: "input", dtype: "float32", shape: ["N", 1, 28, 28] }],
        outputs: [{ name: "probabilities", dtype: "float32", shape: ["N", 10] }],
        files: { onnx: `${entry.name}.onnx`, validation: `${entry.name}.validation.bin` },
      });
      const onnx = await readFile(join(cacheDir, entry.files.onnx));
      expect(onnx.length).toBe(entry.onnxBytes);
      // The accuracy in the manifest is what onnxruntime measures on the test split.
      const probabilities = await ortProbabilities(onnx, splits.test.inputs, splits.test.count);
      expect(accuracy(probabilities, splits.test.labels, 10)).toBe(entry.testAccuracy);
      const validation = await readValidationSet(join(cacheDir, entry.files.validation));
      expect(validation.count).toBe(1500);
      expect(Array.from(validation.labels)).toEqual(Array.from(splits.validation.labels));
    }
    // tiny: 49·10 + 10 = 500 parameters; logreg: 784·10 + 10 = 7 850.
    expect(manifest.models.map((m) => m.params)).toEqual([500, 7850]);
    expect(await readManifest(cacheDir)).toEqual(manifest);

    const again: ZooProgress[] = [];
    const cached = await ensureZoo({ cacheDir, seed: 3, models: SMALL, onProgress: (e) => again.push(e) });
    expect(cached).toEqual(manifest);
    expect(again.map((e) => e.type)).toEqual(["cached"]);
  });

  it("zoo - a stale or damaged cache is rebuilt, with the reason", async () => {
    const cacheDir = await tempDir();
    const first = await buildZoo({ cacheDir, seed: 3, models: ["digits-tiny"] });
    expect(await checkZooCache({ cacheDir, seed: 3, models: ["digits-tiny"] })).toBeNull();
    expect(await checkZooCache({ cacheDir, seed: 4, models: ["digits-tiny"] })).toMatch(/^content hash [0-9a-f]{16} .* differs from [0-9a-f]{16} /);

    await writeFile(join(cacheDir, "digits-tiny.onnx"), Uint8Array.from([1, 2, 3]));
    const events: ZooProgress[] = [];
    const rebuilt = await ensureZoo({ cacheDir, seed: 3, models: ["digits-tiny"], onProgress: (e) => events.push(e) });
    expect(events[0]).toEqual({ type: "stale", reason: "digits-tiny.onnx does not match its sha256 in the manifest" });
    // Same seed, same model: the rebuilt file is byte-identical.
    expect(rebuilt.models[0]!.onnxSha256).toBe(first.models[0]!.onnxSha256);
    expect(await checkZooCache(cacheDir)).toMatch(/^content hash/); // the default selection is the whole family
    await expect(buildZoo({ cacheDir, models: ["digits-xl"] })).rejects.toThrow("unknown zoo model(s): digits-xl; known: digits-tiny,");
  });
});

// The full family is trained by `npm run zoo` (about two minutes); when its cache is present and valid,
// every cached model is checked here without retraining.
const fullCacheProblem = await checkZooCache();

describe("zoo - the cached digits family", () => {
  it("zoo - every cached model matches its TypeScript forward pass and manifest in onnxruntime", async () => {
    expect(fullCacheProblem, `the digits family cache: ${fullCacheProblem}; build it with \`npm run zoo\` (npm test does)`).toBeNull();
    const manifest = (await readManifest(DEFAULT_CACHE_DIR))!;
    expect(manifest.models.length).toBeGreaterThanOrEqual(5);
    for (const entry of manifest.models) {
      const onnx = await readFile(join(DEFAULT_CACHE_DIR, entry.files.onnx));
      const network = networkFromOnnx(onnx, entry.architecture, DIGIT_SHAPE);
      expect(network.paramCount).toBe(entry.params);
      // The whole test split through both: every probability within 1e-4, identical argmax accuracy.
      const ortOut = await ortProbabilities(onnx, splits.test.inputs, splits.test.count);
      const tsOut = network.predictProba(splits.test.inputs, splits.test.count);
      expect(maxAbsDiff(ortOut, tsOut), entry.name).toBeLessThan(1e-4);
      const tsAccuracy = accuracy(tsOut, splits.test.labels, 10);
      expect(accuracy(ortOut, splits.test.labels, 10), entry.name).toBe(tsAccuracy);
      expect(tsAccuracy, entry.name).toBe(entry.testAccuracy);
    }
    const accuracies = manifest.models.map((m) => m.testAccuracy);
    expect(Math.max(...accuracies)).toBeGreaterThanOrEqual(0.97);
    expect(Math.max(...accuracies) - Math.min(...accuracies)).toBeGreaterThanOrEqual(0.08);
  });
});
