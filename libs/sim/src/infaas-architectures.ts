/**
 * INFaaS Table 6's 22 model architectures (papers/infaas.txt §6: 8 families, 22 architectures, 175
 * variants; the paper does not list the architectures one by one, only the families and their variant
 * counts), as simulator variant profiles for the §6.1 experiment (scenarios/infaas-e2e.ts).
 *
 * The simulator had ResNet50 alone from the INFaaS paper (hardware.ts), so the other 21 are ours:
 * - **Which**: the well-known members of each family in Table 6 (MobileNet 2, AlexNet 1, DenseNet 3,
 *   ResNet 5, VGG 4, Inception 4, NASNet 2, GNMT 1 = 22), among them §6.1's four popular models
 *   (DenseNet121, ResNet50, VGG16, InceptionV3).
 * - **Profiles**: anchored on ResNet50's (hardware.ts `infaasResnet50Variants`: CPU 200 ms, Inferentia
 *   20 ms at 100 QPS, TensorRT batch 1 3.3 ms, batch 8 10 ms) and scaled by each architecture's
 *   published compute (GFLOPs, multiply-adds at 224×224, 299×299 or 331×331 input) with a fixed
 *   overhead: CPU 8 + 192·g ms, Inferentia 2 + 18·g ms, GPU batch 1 1 + 2.3·g ms, batch 8 2.5 + 7.5·g
 *   ms, g = GFLOPs / ResNet50's 4.11. GNMT (not a CNN) has its own assumed figures and no Inferentia
 *   variant. Accuracy is each model's published ImageNet top-1 (GNMT: BLEU / 100), which §6.1 does not
 *   use (each query names its architecture).
 * - **Variants**: four per CNN (TensorFlow CPU batch 1; Neuron Inferentia batch 1; TensorRT GPU batch 1
 *   and batch 8), three for GNMT: 87 variants, not the paper's 175 (its other frameworks and batch
 *   sizes are dominated variants the selection would not pick).
 * - **Footprint**: 0.25 GB + 6 bytes per parameter (fp32 weights and a runtime's copy), +0.25 GB for a
 *   batch-8 GPU engine's activations. It sets a GPU variant's GPU memory (accelerator-share.ts
 *   `variantResources`: GPU variants share a V100 by memory) and every variant's price for selection,
 *   §6.2's normalised cost per GB-second (hardware.ts `INFAAS_COST_PER_GB_S`).
 * - **Load latency**: ResNet50's (CPU 2 s, Inferentia 3 s, GPU 5 s) × (0.5 + 0.5 × parameters / ResNet50's),
 *   within INFaaS's 0.59-11 s range.
 * - **Resources**: a CPU variant takes 2 vCPUs (four per m5.2xlarge worker; Table 2's A took 4), an
 *   Inferentia one a NeuronCore and a slot, a GPU one its GPU memory and one of the worker's slots.
 */
import { variantResources, type HardwareKind, type VariantProfile } from "@sloserve/policy";
import { INFAAS_COST_PER_GB_S } from "./hardware.js";

export interface Architecture {
  name: string;
  family: string;
  task: "classification" | "translation";
  /** Multiply-adds per image, billions (GNMT: none, see `fixed`). */
  gflops: number;
  /** Parameters, millions. */
  paramsM: number;
  /** ImageNet top-1 (GNMT: BLEU / 100). */
  accuracy: number;
  /** Profiles given outright, not scaled from GFLOPs (GNMT). */
  fixed?: { cpuMs: number; gpuB1Ms: number; gpuB8Ms: number };
}

/** Table 6's families, 22 architectures (see the module comment for how they were picked). */
export const INFAAS_ARCHITECTURES: readonly Architecture[] = [
  { name: "mobilenet-v1", family: "MobileNet", task: "classification", gflops: 0.57, paramsM: 4.2, accuracy: 0.706 },
  { name: "mobilenet-v2", family: "MobileNet", task: "classification", gflops: 0.3, paramsM: 3.5, accuracy: 0.719 },
  { name: "alexnet", family: "AlexNet", task: "classification", gflops: 0.71, paramsM: 61.1, accuracy: 0.565 },
  { name: "densenet121", family: "DenseNet", task: "classification", gflops: 2.87, paramsM: 8.0, accuracy: 0.744 },
  { name: "densenet169", family: "DenseNet", task: "classification", gflops: 3.4, paramsM: 14.1, accuracy: 0.756 },
  { name: "densenet201", family: "DenseNet", task: "classification", gflops: 4.34, paramsM: 20.0, accuracy: 0.769 },
  { name: "resnet18", family: "ResNet", task: "classification", gflops: 1.82, paramsM: 11.7, accuracy: 0.698 },
  { name: "resnet34", family: "ResNet", task: "classification", gflops: 3.67, paramsM: 21.8, accuracy: 0.733 },
  { name: "resnet50", family: "ResNet", task: "classification", gflops: 4.11, paramsM: 25.6, accuracy: 0.761 },
  { name: "resnet101", family: "ResNet", task: "classification", gflops: 7.83, paramsM: 44.5, accuracy: 0.774 },
  { name: "resnet152", family: "ResNet", task: "classification", gflops: 11.56, paramsM: 60.2, accuracy: 0.783 },
  { name: "vgg11", family: "VGG", task: "classification", gflops: 7.61, paramsM: 132.9, accuracy: 0.69 },
  { name: "vgg13", family: "VGG", task: "classification", gflops: 11.31, paramsM: 133.0, accuracy: 0.699 },
  { name: "vgg16", family: "VGG", task: "classification", gflops: 15.47, paramsM: 138.4, accuracy: 0.716 },
  { name: "vgg19", family: "VGG", task: "classification", gflops: 19.63, paramsM: 143.7, accuracy: 0.724 },
  { name: "googlenet", family: "Inception", task: "classification", gflops: 1.5, paramsM: 6.6, accuracy: 0.698 },
  { name: "inception-v3", family: "Inception", task: "classification", gflops: 5.71, paramsM: 23.8, accuracy: 0.773 },
  { name: "inception-v4", family: "Inception", task: "classification", gflops: 12.3, paramsM: 42.7, accuracy: 0.802 },
  { name: "inception-resnet-v2", family: "Inception", task: "classification", gflops: 13.2, paramsM: 55.8, accuracy: 0.804 },
  { name: "nasnet-mobile", family: "NasNet", task: "classification", gflops: 0.56, paramsM: 5.3, accuracy: 0.74 },
  { name: "nasnet-large", family: "NasNet", task: "classification", gflops: 23.8, paramsM: 88.9, accuracy: 0.825 },
  { name: "gnmt", family: "GNMT", task: "translation", gflops: 0, paramsM: 160, accuracy: 0.243, fixed: { cpuMs: 300, gpuB1Ms: 30, gpuB8Ms: 60 } },
];

/** §6.1's popular architectures (50 ms SLO, 80% of the load), most popular first as the paper lists them. */
export const INFAAS_POPULAR = ["densenet121", "resnet50", "vgg16", "inception-v3"] as const;

const RESNET50_GFLOPS = 4.11;
const RESNET50_PARAMS_M = 25.6;
const GB = 1e9;
/** ResNet50's load latencies (hardware.ts), scaled per architecture. */
const LOAD_MS: Readonly<Record<HardwareKind, number>> = { cpu: 2000, inferentia: 3000, gpu: 5000 };
/** Threads of a CPU variant (vCPUs). */
export const CPU_VARIANT_THREADS = 2;

const r2 = (x: number): number => Math.round(x * 100) / 100;

function footprintGb(a: Architecture, extraGb = 0): number {
  return 0.25 + (a.paramsM * 6) / 1000 + extraGb;
}

function loadMs(a: Architecture, hw: HardwareKind): number {
  return Math.round(Math.min(11_000, Math.max(590, LOAD_MS[hw] * (0.5 + (0.5 * a.paramsM) / RESNET50_PARAMS_M))));
}

/** Batch-1 and batch-8 latencies of an architecture on each hardware (ms). */
export function architectureLatencies(a: Architecture): { cpu: number; inferentia: number | null; gpuB1: number; gpuB8: number } {
  if (a.fixed) return { cpu: a.fixed.cpuMs, inferentia: null, gpuB1: a.fixed.gpuB1Ms, gpuB8: a.fixed.gpuB8Ms };
  const g = a.gflops / RESNET50_GFLOPS;
  return { cpu: r2(8 + 192 * g), inferentia: r2(2 + 18 * g), gpuB1: r2(1 + 2.3 * g), gpuB8: r2(2.5 + 7.5 * g) };
}

/** The variants of one architecture (app = model = its name: §6.1's queries name their architecture). */
export function architectureVariants(a: Architecture): VariantProfile[] {
  const lat = architectureLatencies(a);
  const base = { model: a.name, app: a.name, accuracy: a.accuracy, profiled: true };
  const price = (hw: HardwareKind, gb: number): number => (INFAAS_COST_PER_GB_S[hw] ?? 0) * gb;
  const out: VariantProfile[] = [];
  const cpuGb = footprintGb(a);
  out.push({
    ...base, name: `${a.name}-tf-cpu-b1`, hardware: "cpu", batchSize: 1, latencyMs: { 1: lat.cpu }, peakQps: r2(1000 / lat.cpu), loadLatencyMs: loadMs(a, "cpu"),
    pricePerS: price("cpu", cpuGb), resources: variantResources({ hardware: "cpu", threads: CPU_VARIANT_THREADS, memoryBytes: cpuGb * GB }), concurrency: 1,
  });
  if (lat.inferentia !== null) {
    // Two batches in flight per NeuronCore (Table 2's B: 20 ms, 100 QPS).
    out.push({
      ...base, name: `${a.name}-neuron-inf-b1`, hardware: "inferentia", batchSize: 1, latencyMs: { 1: lat.inferentia }, peakQps: r2(2000 / lat.inferentia), loadLatencyMs: loadMs(a, "inferentia"),
      pricePerS: price("inferentia", cpuGb), resources: variantResources({ hardware: "inferentia", threads: 1, memoryBytes: cpuGb * GB, neuronCores: 1 }),
    });
  }
  const gpu = (batch: number, latencyMs: Record<number, number>, peakQps: number, gb: number): VariantProfile => ({
    ...base, name: `${a.name}-trt-gpu-b${batch}`, hardware: "gpu", batchSize: batch, latencyMs, peakQps: r2(peakQps), loadLatencyMs: loadMs(a, "gpu"),
    pricePerS: price("gpu", gb), resources: variantResources({ hardware: "gpu", threads: 1, memoryBytes: gb * GB, acceleratorMemoryBytes: gb * GB }),
  });
  out.push(gpu(1, { 1: lat.gpuB1 }, 1000 / lat.gpuB1, footprintGb(a)));
  const at = (b: number): number => r2(lat.gpuB1 + ((lat.gpuB8 - lat.gpuB1) * (b - 1)) / 7);
  out.push(gpu(8, { 1: lat.gpuB1, 2: at(2), 4: at(4), 8: lat.gpuB8 }, 8000 / lat.gpuB8, footprintGb(a, 0.25)));
  return out;
}

/** Every variant of the 22 architectures. */
export function infaasE2eVariants(): VariantProfile[] {
  return INFAAS_ARCHITECTURES.flatMap(architectureVariants);
}
