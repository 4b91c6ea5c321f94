import { describe, expect, it } from "vitest";
import { loadDigits, subset } from "../src/data.js";
import { exportNetwork } from "../src/export.js";
import { AvgPool2d, Conv2d, Dense, MaxPool2d, Relu, type Layer } from "../src/layers.js";
import { Network, accuracy, type LayerSpec } from "../src/network.js";
import { Xoshiro128ss, pairedNormals, type Rng } from "@sloserve/policy";
import { softmaxCrossEntropy, trainNetwork } from "../src/training.js";

/** Mean cross-entropy of `network` on a batch, in float64 on top of float32 activations. */
function loss(network: Network, x: Float32Array, labels: Uint8Array, n: number): number {
  const logits = network.forward(x, n);
  return softmaxCrossEntropy(logits, labels, n, network.outFeatures, new Float32Array(n * network.outFeatures));
}

describe("zoo - training", () => {
  // Each layer is checked on its own with a linear probe loss L = Σ r·y (r random), so the analytic
  // gradients are dL/dy = r; inputs are chosen away from ReLU's kink and max-pool ties, where finite
  // differences are not defined. Changing one entry changes few outputs, so float32 rounding stays
  // far below the tolerance.
  const layerCases: { name: string; make: (rng: Rng) => Layer; input: (rng: Rng, n: number) => number }[] = [
    { name: "dense", make: (rng) => new Dense("d", 20, 7, pairedNormals(rng)), input: (rng) => rng.next() - 0.5 },
    { name: "conv pad 1", make: (rng) => new Conv2d("c", [2, 7, 7], { filters: 3, kernel: 3, pad: 1 }, pairedNormals(rng)), input: (rng) => rng.next() },
    { name: "conv stride 2", make: (rng) => new Conv2d("c", [2, 7, 7], { filters: 3, kernel: 3, stride: 2 }, pairedNormals(rng)), input: (rng) => rng.next() },
    { name: "relu", make: () => new Relu("r", [30]), input: (rng) => (rng.next() < 0.5 ? -1 : 1) * (0.05 + rng.next()) },
    // Distinct values 0.01 apart: no window has a near-tie.
    { name: "maxpool", make: () => new MaxPool2d("m", [2, 6, 6], 2), input: (_rng, i) => ((i * 37) % 144) * 0.01 },
    { name: "avgpool", make: () => new AvgPool2d("a", [2, 6, 6], 3), input: (rng) => rng.next() },
  ];
  for (const c of layerCases) {
    it(`zoo - ${c.name} backward matches finite differences`, () => {
      const rng = new Xoshiro128ss(11);
      const layer = c.make(rng);
      const batch = 2;
      const inSize = layer.inShape.reduce((a, b) => a * b, 1);
      const outSize = layer.outShape.reduce((a, b) => a * b, 1);
      const x = new Float32Array(batch * inSize).map((_, i) => c.input(rng, i));
      const r = new Float32Array(batch * outSize).map(() => rng.next() - 0.5);
      const probe = (): number => {
        const y = layer.forward(x, batch);
        let s = 0;
        for (let i = 0; i < y.length; i++) s += r[i]! * y[i]!;
        return s;
      };
      for (const p of layer.params) p.grad.fill(0);
      layer.forward(x, batch);
      const dx = Float32Array.from(layer.backward(r, batch, true)!);
      const eps = 1e-3;
      const numeric = (values: Float32Array, i: number): number => {
        const original = values[i]!;
        values[i] = original + eps;
        const up = probe();
        values[i] = original - eps;
        const down = probe();
        values[i] = original;
        return (up - down) / (2 * eps);
      };
      for (let i = 0; i < x.length; i++) expect(Math.abs(numeric(x, i) - dx[i]!), `dx[${i}]`).toBeLessThan(1e-3);
      for (const p of layer.params) {
        for (let i = 0; i < p.data.length; i++) expect(Math.abs(numeric(p.data, i) - p.grad[i]!), `${p.name}[${i}]`).toBeLessThan(1e-3);
      }
    });
  }

  it("zoo - network backward chains layers and the softmax cross-entropy gradient", () => {
    // Smooth layers only (no kinks), so finite differences of the real loss are exact enough.
    const layers: LayerSpec[] = [
      { type: "conv", filters: 3, kernel: 3, pad: 1 }, { type: "avgpool", size: 2 },
      { type: "conv", filters: 4, kernel: 3, stride: 2 }, { type: "flatten" }, { type: "dense", units: 10 },
    ];
    const rng = new Xoshiro128ss(3);
    const network = new Network(layers, [1, 12, 12], rng);
    const n = 4;
    const x = new Float32Array(n * 144).map(() => rng.next());
    const labels = Uint8Array.from([1, 7, 3, 9]);
    network.zeroGrad();
    const dLogits = new Float32Array(n * 10);
    softmaxCrossEntropy(network.forward(x, n), labels, n, 10, dLogits);
    network.backward(dLogits, n);
    const eps = 1e-3;
    for (const p of network.params) {
      for (let k = 0; k < 8; k++) {
        const i = (k * 7919) % p.data.length;
        const original = p.data[i]!;
        p.data[i] = original + eps;
        const up = loss(network, x, labels, n);
        p.data[i] = original - eps;
        const down = loss(network, x, labels, n);
        p.data[i] = original;
        const numeric = (up - down) / (2 * eps);
        expect(Math.abs(numeric - p.grad[i]!), `${p.name}[${i}]: ${numeric} vs ${p.grad[i]}`).toBeLessThan(1e-3 + 0.01 * Math.abs(numeric));
      }
    }
  });

  it("zoo - training is bit-for-bit deterministic for a seed", () => {
    const { train } = loadDigits();
    const small = subset(train, Array.from({ length: 640 }, (_, i) => i));
    const layers: LayerSpec[] = [{ type: "conv", filters: 2, kernel: 3 }, { type: "relu" }, { type: "maxpool", size: 2 }, { type: "flatten" }, { type: "dense", units: 10 }];
    const config = { epochs: 1, batchSize: 32, learningRate: 0.01, augmentShift: 1 };
    const a = exportNetwork(trainNetwork(layers, [1, 28, 28], small, config, 5).network, "a");
    const b = exportNetwork(trainNetwork(layers, [1, 28, 28], small, config, 5).network, "a");
    const c = exportNetwork(trainNetwork(layers, [1, 28, 28], small, config, 6).network, "a");
    expect(Buffer.from(a).equals(Buffer.from(b))).toBe(true);
    expect(Buffer.from(a).equals(Buffer.from(c))).toBe(false);
  });

  it("zoo - a small MLP learns the digits", () => {
    const { train, test } = loadDigits();
    const layers: LayerSpec[] = [{ type: "flatten" }, { type: "dense", units: 16 }, { type: "relu" }, { type: "dense", units: 10 }];
    const losses: number[] = [];
    const { network, steps } = trainNetwork(layers, [1, 28, 28], train, { epochs: 2, batchSize: 64, learningRate: 0.005, trainSubset: 2000 }, 1, (p) => losses.push(p.loss));
    expect(steps).toBe(2 * Math.ceil(2000 / 64));
    expect(losses[1]!).toBeLessThan(losses[0]!);
    // Far above chance (10%): a 784-16-10 MLP on 2 000 digits reaches the high 80s.
    expect(accuracy(network.predictProba(test.inputs, test.count), test.labels, 10)).toBeGreaterThan(0.8);
  });
});
