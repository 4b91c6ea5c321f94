import { describe, expect, it } from "vitest";
import {
  footprintOf,
  footprintPricePerSecond,
  GPU_MEMORY_BYTES,
  heldResources,
  instanceOffer,
  instancesThatFit,
  instanceShare,
  pricePerSecond,
  variantPricePerSecond,
  variantResources,
  workerFreeResources,
  type VariantFootprint,
} from "../../src/index.js";

const GiB = 1024 ** 3;
const V100 = GPU_MEMORY_BYTES["p3.2xlarge"] as number; // 16 GiB
const gpu = (acceleratorMemoryBytes: number): VariantFootprint => ({ hardware: "gpu", threads: 1, memoryBytes: 1e8, acceleratorMemoryBytes });

describe("accelerator-share", () => {
  const resources: Array<{ name: string; f: VariantFootprint; want: Record<string, number> }> = [
    { name: "a CPU variant takes its threads and memory", f: { hardware: "cpu", threads: 2, memoryBytes: 5e7 }, want: { threads: 2, memoryBytes: 5e7 } },
    { name: "a GPU variant takes its device memory and a slot, no GPU whole", f: gpu(4 * GiB), want: { threads: 1, acceleratorMemoryBytes: 4 * GiB, memoryBytes: 1e8 } },
    { name: "a GPU variant without a device figure: its host memory stands for it", f: { hardware: "gpu", threads: 1, memoryBytes: 3e8 }, want: { threads: 1, acceleratorMemoryBytes: 3e8, memoryBytes: 3e8 } },
    { name: "an Inferentia variant takes its NeuronCores and a slot", f: { hardware: "inferentia", threads: 1, memoryBytes: 1e8, neuronCores: 4 }, want: { threads: 1, accelerators: 4, memoryBytes: 1e8 } },
    { name: "an Inferentia variant takes one NeuronCore by default", f: { hardware: "inferentia", threads: 1, memoryBytes: 1e8 }, want: { threads: 1, accelerators: 1, memoryBytes: 1e8 } },
  ];
  for (const c of resources) it(`accelerator-share - resources: ${c.name}`, () => expect(variantResources(c.f)).toEqual(c.want));

  const shares: Array<{ name: string; f: VariantFootprint; type: string; want: number }> = [
    // c5.xlarge: 4 vCPUs.
    { name: "CPU: threads / vCPUs", f: { hardware: "cpu", threads: 2, memoryBytes: 0 }, type: "c5.xlarge", want: 2 / 4 },
    { name: "CPU: no more than the instance", f: { hardware: "cpu", threads: 8, memoryBytes: 0 }, type: "c5.xlarge", want: 1 },
    // 4 GiB of a 16 GiB V100.
    { name: "GPU: device memory / GPU memory", f: gpu(4 * GiB), type: "p3.2xlarge", want: 0.25 },
    // 3 GiB of a 12 GiB K80 half.
    { name: "GPU: per type", f: gpu(3 * GiB), type: "p2.xlarge", want: 0.25 },
    { name: "GPU: no more than the GPU", f: gpu(40 * GiB), type: "p3.2xlarge", want: 1 },
    { name: "GPU: a whole GPU when the footprint is unknown", f: { hardware: "gpu", threads: 1, memoryBytes: 0 }, type: "p3.2xlarge", want: 1 },
    // inf1.xlarge: one chip, 4 NeuronCores.
    { name: "Inferentia: NeuronCores / the chip's", f: { hardware: "inferentia", threads: 1, memoryBytes: 0, neuronCores: 2 }, type: "inf1.xlarge", want: 0.5 },
    { name: "Inferentia: one NeuronCore by default", f: { hardware: "inferentia", threads: 1, memoryBytes: 0 }, type: "inf1.xlarge", want: 0.25 },
  ];
  for (const c of shares) it(`accelerator-share - share: ${c.name}`, () => expect(instanceShare(c.f, c.type)).toBeCloseTo(c.want, 12));

  it("accelerator-share - price: the type's price × the share; two GPU variants split one GPU", () => {
    const perS = pricePerSecond("p3.2xlarge"); // $3.06/h
    // 6 GiB + 10 GiB = the whole V100: their prices add up to the GPU's.
    const a = footprintPricePerSecond(gpu(6 * GiB));
    const b = footprintPricePerSecond(gpu(10 * GiB));
    expect(a).toBeCloseTo((perS * 6) / 16, 15);
    expect(b).toBeCloseTo((perS * 10) / 16, 15);
    expect(a + b).toBeCloseTo(perS, 15);
    // Spot: the same share of the spot price.
    expect(footprintPricePerSecond(gpu(4 * GiB), undefined, "spot")).toBeCloseTo(pricePerSecond("p3.2xlarge", "spot") / 4, 15);
    // Without a footprint the old prices stay: a vCPU share, a whole GPU, one NeuronCore.
    expect(variantPricePerSecond("cpu", 2)).toBe((pricePerSecond("c5.xlarge") * 2) / 4);
    expect(variantPricePerSecond("gpu", 1)).toBe(perS);
    expect(variantPricePerSecond("inferentia", 1)).toBe(pricePerSecond("inf1.xlarge") / 4);
  });

  it("accelerator-share - a registered variant's footprint: profile memory, device memory when measured, NeuronCores from its settings", () => {
    const profile = { memoryBytes: 2e8 };
    expect(footprintOf({ hardware: "gpu", threads: 1, profile })).toEqual({ hardware: "gpu", threads: 1, memoryBytes: 2e8, acceleratorMemoryBytes: 2e8, neuronCores: 1 });
    expect(footprintOf({ hardware: "gpu", threads: 1, profile: { memoryBytes: 2e8, acceleratorMemoryBytes: 9e8 } }).acceleratorMemoryBytes).toBe(9e8);
    expect(footprintOf({ hardware: "inferentia", threads: 1, profile: null, settings: { neuronCores: 4 } })).toEqual({ hardware: "inferentia", threads: 1, memoryBytes: 0, acceleratorMemoryBytes: 0, neuronCores: 4 });
  });

  const free: Array<{ name: string; w: Parameters<typeof workerFreeResources>[0]; want: Record<string, number> }> = [
    {
      name: "a CPU worker: threads and memory",
      w: { hardware: "cpu", threads: 4, threadsUsed: 1, memoryBytes: 8e9, memoryUsedBytes: 1e9 },
      want: { threads: 3, memoryBytes: 7e9, accelerators: 0 },
    },
    {
      name: "a worker that accounts no memory has no limit on it",
      w: { hardware: "cpu", threads: 4, threadsUsed: 4, memoryBytes: 0, memoryUsedBytes: 0 },
      want: { threads: 0, memoryBytes: Infinity, accelerators: 0 },
    },
    {
      // 2 GPUs × 16e9 − 11e9 held.
      name: "a GPU worker: its GPUs' memory less what its instances take",
      w: { hardware: "gpu", threads: 4, threadsUsed: 2, memoryBytes: 8e9, memoryUsedBytes: 2e8, accelerators: 2, acceleratorsUsed: 0, acceleratorMemoryBytes: 16e9, acceleratorMemoryUsedBytes: 11e9 },
      want: { threads: 2, memoryBytes: 7.8e9, accelerators: 2, acceleratorMemoryBytes: 21e9 },
    },
    {
      name: "a GPU worker that does not say its GPU memory: the default type's",
      w: { hardware: "gpu", threads: 4, threadsUsed: 0, memoryBytes: 0, memoryUsedBytes: 0, accelerators: 1 },
      want: { threads: 4, memoryBytes: Infinity, accelerators: 1, acceleratorMemoryBytes: V100 },
    },
    {
      name: "an Inferentia worker: NeuronCores",
      w: { hardware: "inferentia", threads: 4, threadsUsed: 2, memoryBytes: 0, memoryUsedBytes: 0, accelerators: 4, acceleratorsUsed: 3 },
      want: { threads: 2, memoryBytes: Infinity, accelerators: 1 },
    },
    {
      // (the simulator's mixed worker, libs/sim worker-report.ts: 4 accelerators × 0.5e9 − 1e9 held)
      name: "a worker of another kind that says its accelerators' memory: counted as a GPU worker's",
      w: { hardware: "worker", threads: 10, threadsUsed: 5, memoryBytes: 0, memoryUsedBytes: 0, accelerators: 4, acceleratorsUsed: 1, acceleratorMemoryBytes: 0.5e9, acceleratorMemoryUsedBytes: 1e9 },
      want: { threads: 5, memoryBytes: Infinity, accelerators: 3, acceleratorMemoryBytes: 1e9 },
    },
  ];
  for (const c of free) it(`accelerator-share - free: ${c.name}`, () => expect(workerFreeResources(c.w)).toEqual(c.want));

  it("accelerator-share - what instances hold, and two GPU variants that fit one GPU together", () => {
    const a = gpu(6e9);
    const b = gpu(5e9);
    const nc2: VariantFootprint = { hardware: "inferentia", threads: 1, memoryBytes: 1e8, neuronCores: 2 };
    expect(heldResources([{ footprint: a, count: 1 }, { footprint: b, count: 2 }, { footprint: { hardware: "cpu", threads: 2, memoryBytes: 1e8 }, count: 1 }])).toEqual({
      threads: 1 + 2 + 2, // every instance takes its threads (a GPU variant one slot)
      memoryBytes: 4e8,
      accelerators: 0,
      acceleratorMemoryBytes: 16e9,
    });
    expect(heldResources([{ footprint: nc2, count: 2 }]).accelerators).toBe(4);
    // One 16e9 GPU running a (6e9): b (5e9) fits beside it, twice; a third b does not.
    const w = { hardware: "gpu", threads: 4, threadsUsed: 1, memoryBytes: 0, memoryUsedBytes: 0, accelerators: 1, acceleratorMemoryBytes: 16e9, acceleratorMemoryUsedBytes: 6e9 };
    expect(instancesThatFit({ resources: variantResources(b) }, workerFreeResources(w))).toBe(2);
    // Had each held a GPU whole, none would fit.
    expect(instancesThatFit({ resources: { accelerators: 1 } }, { accelerators: 0 })).toBe(0);
  });

  const offers: Array<{ kind: "cpu" | "gpu" | "inferentia"; type: string; want: Record<string, number> }> = [
    { kind: "cpu", type: "c5.xlarge", want: { threads: 4, memoryBytes: 8e9 } },
    { kind: "gpu", type: "p3.2xlarge", want: { threads: 4, accelerators: 1, acceleratorMemoryBytes: 16 * GiB, memoryBytes: 8e9 } },
    { kind: "gpu", type: "g4dn.xlarge", want: { threads: 4, accelerators: 1, acceleratorMemoryBytes: 16 * GiB, memoryBytes: 8e9 } },
    { kind: "inferentia", type: "inf1.xlarge", want: { threads: 4, accelerators: 4, memoryBytes: 8e9 } },
  ];
  for (const c of offers) it(`accelerator-share - a new ${c.type} worker offers ${Object.keys(c.want).join(", ")}`, () => expect(instanceOffer(c.kind, c.type, 4, 8e9)).toEqual(c.want));
});
