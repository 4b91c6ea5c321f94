/**
 * Neural-network layers with hand-written forward and backward passes on Float32Array batches.
 *
 * Activations are row-major with the batch first and NCHW inside a sample, exactly the layout ONNX
 * uses, so `Flatten` is free and exported graphs compute the same numbers. Each layer keeps the
 * buffers its backward pass needs from the last forward pass; returned arrays are views of internal
 * buffers that the next call overwrites.
 *
 * - {@link Dense}: y = x·Wᵀ + b with W stored [out, in] (ONNX `Gemm` with transB = 1).
 * - {@link Conv2d}: cross-correlation with zero padding, as im2col + GEMM per sample (ONNX `Conv`).
 * - {@link MaxPool2d}: max over k×k windows, floor mode, no padding (ONNX `MaxPool`).
 * - {@link AvgPool2d}: mean over k×k windows, floor mode, no padding (ONNX `AveragePool`).
 * - {@link Relu}, {@link Flatten}.
 */
import { gemmAB, gemmABt, gemmAtB } from "./gemm.js";

/** A trainable tensor with its gradient (same shape, accumulated by backward). */
export interface Param {
  readonly name: string;
  readonly shape: readonly number[];
  readonly data: Float32Array;
  readonly grad: Float32Array;
}

/** What every layer does. Shapes are per sample (without the batch dimension). */
export interface Layer {
  readonly kind: "dense" | "conv" | "maxpool" | "avgpool" | "relu" | "flatten";
  readonly name: string;
  readonly inShape: readonly number[];
  readonly outShape: readonly number[];
  readonly params: readonly Param[];
  /** Computes the output for `batch` samples and keeps what backward needs. */
  forward(x: Float32Array, batch: number): Float32Array;
  /** Adds parameter gradients; returns the input gradient when `needInputGrad`, else null. */
  backward(dy: Float32Array, batch: number, needInputGrad: boolean): Float32Array | null;
}

const size = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

/** A growable scratch buffer: returns a view of exactly `length` elements. */
class Scratch {
  private data = new Float32Array(0);
  view(length: number): Float32Array {
    if (this.data.length < length) this.data = new Float32Array(length);
    return this.data.subarray(0, length);
  }
}

function param(name: string, shape: number[], init: (i: number) => number): Param {
  const n = size(shape);
  const data = new Float32Array(n);
  for (let i = 0; i < n; i++) data[i] = init(i);
  return { name, shape, data, grad: new Float32Array(n) };
}

/** Fully connected layer, W [out, in] initialised N(0, gain/in) (He for gain 2), b = 0. */
export class Dense implements Layer {
  readonly kind = "dense";
  readonly inShape: readonly number[];
  readonly outShape: readonly number[];
  readonly params: readonly Param[];
  readonly weight: Param;
  readonly bias: Param;
  private input: Float32Array = new Float32Array(0);
  private readonly out = new Scratch();
  private readonly dx = new Scratch();

  constructor(readonly name: string, inFeatures: number, readonly units: number, normal: () => number, gain = 2) {
    this.inShape = [inFeatures];
    this.outShape = [units];
    const std = Math.sqrt(gain / inFeatures);
    this.weight = param(`${name}.weight`, [units, inFeatures], () => normal() * std);
    this.bias = param(`${name}.bias`, [units], () => 0);
    this.params = [this.weight, this.bias];
  }

  forward(x: Float32Array, batch: number): Float32Array {
    const I = this.inShape[0]!;
    const O = this.units;
    this.input = x;
    const y = this.out.view(batch * O);
    gemmABt(batch, O, I, x, 0, this.weight.data, 0, y, 0, false);
    const b = this.bias.data;
    for (let n = 0; n < batch; n++) for (let o = 0; o < O; o++) y[n * O + o] = y[n * O + o]! + b[o]!;
    return y;
  }

  backward(dy: Float32Array, batch: number, needInputGrad: boolean): Float32Array | null {
    const I = this.inShape[0]!;
    const O = this.units;
    gemmAtB(O, I, batch, dy, 0, this.input, 0, this.weight.grad, 0);
    const db = this.bias.grad;
    for (let n = 0; n < batch; n++) for (let o = 0; o < O; o++) db[o] = db[o]! + dy[n * O + o]!;
    if (!needInputGrad) return null;
    const dx = this.dx.view(batch * I).fill(0);
    gemmAB(batch, I, O, dy, 0, this.weight.data, 0, dx, 0);
    return dx;
  }
}

/** Options of a 2-D convolution. */
export interface ConvOptions {
  readonly filters: number;
  readonly kernel: number;
  /** Zero padding on every side. @default 0 */
  readonly pad?: number;
  /** @default 1 */
  readonly stride?: number;
}

/**
 * 2-D convolution (cross-correlation, as in ONNX `Conv`), W [M, C, k, k], b [M].
 *
 * The whole batch is unfolded into one column matrix col [C·k·k, batch·OH·OW] (im2col), so each pass
 * is a single large GEMM with long inner loops: out = W·col + b (then transposed to NCHW); backward
 * dW += dOut·colᵀ and dcol = Wᵀ·dOut, folded back into dx (col2im).
 */
export class Conv2d implements Layer {
  readonly kind = "conv";
  readonly inShape: readonly number[];
  readonly outShape: readonly number[];
  readonly params: readonly Param[];
  readonly weight: Param;
  readonly bias: Param;
  readonly kernel: number;
  readonly pad: number;
  readonly stride: number;
  private readonly cols = new Scratch();
  private readonly mOut = new Scratch();
  private readonly out = new Scratch();
  private readonly dcol = new Scratch();
  private readonly dx = new Scratch();

  constructor(readonly name: string, inShape: readonly number[], options: ConvOptions, normal: () => number) {
    const [C, H, W] = inShape as [number, number, number];
    this.kernel = options.kernel;
    this.pad = options.pad ?? 0;
    this.stride = options.stride ?? 1;
    const OH = Math.floor((H + 2 * this.pad - this.kernel) / this.stride) + 1;
    const OW = Math.floor((W + 2 * this.pad - this.kernel) / this.stride) + 1;
    if (OH < 1 || OW < 1) throw new Error(`${name}: kernel ${this.kernel} does not fit input ${H}x${W}`);
    this.inShape = [C, H, W];
    this.outShape = [options.filters, OH, OW];
    const fanIn = C * this.kernel * this.kernel;
    const std = Math.sqrt(2 / fanIn);
    this.weight = param(`${name}.weight`, [options.filters, C, this.kernel, this.kernel], () => normal() * std);
    this.bias = param(`${name}.bias`, [options.filters], () => 0);
    this.params = [this.weight, this.bias];
  }

  forward(x: Float32Array, batch: number): Float32Array {
    const [M, OH, OW] = this.outShape as [number, number, number];
    const K = this.inShape[0]! * this.kernel * this.kernel;
    const P = OH * OW;
    const BP = batch * P;
    const inSize = size(this.inShape);
    const cols = this.cols.view(K * BP);
    for (let n = 0; n < batch; n++) this.im2col(x, n * inSize, cols, n * P, BP);
    // z[M, batch·P] = W·col + b, then y[n, m, p] = z[m, n·P + p].
    const z = this.mOut.view(M * BP);
    const b = this.bias.data;
    for (let m = 0; m < M; m++) z.fill(b[m]!, m * BP, (m + 1) * BP);
    gemmAB(M, BP, K, this.weight.data, 0, cols, 0, z, 0);
    const y = this.out.view(batch * M * P);
    for (let n = 0; n < batch; n++) {
      for (let m = 0; m < M; m++) y.set(z.subarray(m * BP + n * P, m * BP + (n + 1) * P), (n * M + m) * P);
    }
    return y;
  }

  backward(dy: Float32Array, batch: number, needInputGrad: boolean): Float32Array | null {
    const [M, OH, OW] = this.outShape as [number, number, number];
    const K = this.inShape[0]! * this.kernel * this.kernel;
    const P = OH * OW;
    const BP = batch * P;
    const cols = this.cols.view(K * BP);
    // dz[m, n·P + p] = dy[n, m, p]: the output gradient in the column layout.
    const dz = this.mOut.view(M * BP);
    for (let n = 0; n < batch; n++) {
      for (let m = 0; m < M; m++) dz.set(dy.subarray((n * M + m) * P, (n * M + m + 1) * P), m * BP + n * P);
    }
    gemmABt(M, K, BP, dz, 0, cols, 0, this.weight.grad, 0, true);
    const db = this.bias.grad;
    for (let m = 0; m < M; m++) {
      let s = 0;
      for (let i = m * BP; i < (m + 1) * BP; i++) s += dz[i]!;
      db[m] = db[m]! + s;
    }
    if (!needInputGrad) return null;
    const inSize = size(this.inShape);
    const dcol = this.dcol.view(K * BP).fill(0);
    gemmAtB(K, BP, M, this.weight.data, 0, dz, 0, dcol, 0);
    const dx = this.dx.view(batch * inSize).fill(0);
    for (let n = 0; n < batch; n++) this.col2im(dcol, n * P, BP, dx, n * inSize);
    return dx;
  }

  /**
   * Unfolds one sample into columns colOff .. colOff+OH·OW of a column matrix with row length `stride`:
   * col[(c·k + i)·k + j, colOff + oy·OW + ox] = x[c, oy·s + i − pad, ox·s + j − pad] (0 outside).
   */
  private im2col(x: Float32Array, xOff: number, col: Float32Array, colOff: number, rowLength: number): void {
    const [C, H, W] = this.inShape as [number, number, number];
    const [, OH, OW] = this.outShape as [number, number, number];
    const { kernel: k, pad, stride } = this;
    let row = 0;
    for (let c = 0; c < C; c++) {
      for (let i = 0; i < k; i++) {
        for (let j = 0; j < k; j++, row++) {
          let r = row * rowLength + colOff;
          for (let oy = 0; oy < OH; oy++) {
            const iy = oy * stride + i - pad;
            const rowOk = iy >= 0 && iy < H;
            const base = xOff + (c * H + iy) * W;
            for (let ox = 0; ox < OW; ox++) {
              const ix = ox * stride + j - pad;
              col[r++] = rowOk && ix >= 0 && ix < W ? x[base + ix]! : 0;
            }
          }
        }
      }
    }
  }

  /** Folds one sample's columns of a column gradient back onto its input gradient (adjoint of im2col). */
  private col2im(col: Float32Array, colOff: number, rowLength: number, dx: Float32Array, dxOff: number): void {
    const [C, H, W] = this.inShape as [number, number, number];
    const [, OH, OW] = this.outShape as [number, number, number];
    const { kernel: k, pad, stride } = this;
    let row = 0;
    for (let c = 0; c < C; c++) {
      for (let i = 0; i < k; i++) {
        for (let j = 0; j < k; j++, row++) {
          let r = row * rowLength + colOff;
          for (let oy = 0; oy < OH; oy++) {
            const iy = oy * stride + i - pad;
            if (iy < 0 || iy >= H) {
              r += OW;
              continue;
            }
            const base = dxOff + (c * H + iy) * W;
            for (let ox = 0; ox < OW; ox++, r++) {
              const ix = ox * stride + j - pad;
              if (ix >= 0 && ix < W) dx[base + ix] = dx[base + ix]! + col[r]!;
            }
          }
        }
      }
    }
  }
}

/** Max pooling over `size`×`size` windows with stride `stride` (floor mode, no padding). */
export class MaxPool2d implements Layer {
  readonly kind = "maxpool";
  readonly inShape: readonly number[];
  readonly outShape: readonly number[];
  readonly params: readonly Param[] = [];
  private argmax = new Int32Array(0);
  private readonly out = new Scratch();
  private readonly dx = new Scratch();

  constructor(readonly name: string, inShape: readonly number[], readonly size: number, readonly stride: number = size) {
    const [C, H, W] = inShape as [number, number, number];
    this.inShape = [C, H, W];
    this.outShape = [C, Math.floor((H - size) / stride) + 1, Math.floor((W - size) / stride) + 1];
  }

  forward(x: Float32Array, batch: number): Float32Array {
    const [C, H, W] = this.inShape as [number, number, number];
    const [, OH, OW] = this.outShape as [number, number, number];
    const outSize = C * OH * OW;
    const y = this.out.view(batch * outSize);
    if (this.argmax.length < batch * outSize) this.argmax = new Int32Array(batch * outSize);
    const argmax = this.argmax;
    let o = 0;
    for (let plane = 0; plane < batch * C; plane++) {
      const base = plane * H * W;
      for (let oy = 0; oy < OH; oy++) {
        for (let ox = 0; ox < OW; ox++, o++) {
          let best = -Infinity;
          let bestAt = -1;
          for (let i = 0; i < this.size; i++) {
            const row = base + (oy * this.stride + i) * W + ox * this.stride;
            for (let j = 0; j < this.size; j++) {
              const v = x[row + j]!;
              if (v > best) {
                best = v;
                bestAt = row + j;
              }
            }
          }
          y[o] = best;
          argmax[o] = bestAt;
        }
      }
    }
    return y;
  }

  backward(dy: Float32Array, batch: number, needInputGrad: boolean): Float32Array | null {
    if (!needInputGrad) return null;
    const dx = this.dx.view(batch * size(this.inShape)).fill(0);
    const n = batch * size(this.outShape);
    for (let o = 0; o < n; o++) {
      const at = this.argmax[o]!;
      dx[at] = dx[at]! + dy[o]!;
    }
    return dx;
  }
}

/** Average pooling over `size`×`size` windows with stride `stride` (floor mode, no padding). */
export class AvgPool2d implements Layer {
  readonly kind = "avgpool";
  readonly inShape: readonly number[];
  readonly outShape: readonly number[];
  readonly params: readonly Param[] = [];
  private readonly out = new Scratch();
  private readonly dx = new Scratch();

  constructor(readonly name: string, inShape: readonly number[], readonly size: number, readonly stride: number = size) {
    const [C, H, W] = inShape as [number, number, number];
    this.inShape = [C, H, W];
    this.outShape = [C, Math.floor((H - size) / stride) + 1, Math.floor((W - size) / stride) + 1];
  }

  forward(x: Float32Array, batch: number): Float32Array {
    const [C, H, W] = this.inShape as [number, number, number];
    const [, OH, OW] = this.outShape as [number, number, number];
    const y = this.out.view(batch * C * OH * OW);
    const area = this.size * this.size;
    let o = 0;
    for (let plane = 0; plane < batch * C; plane++) {
      const base = plane * H * W;
      for (let oy = 0; oy < OH; oy++) {
        for (let ox = 0; ox < OW; ox++, o++) {
          let sum = 0;
          for (let i = 0; i < this.size; i++) {
            const row = base + (oy * this.stride + i) * W + ox * this.stride;
            for (let j = 0; j < this.size; j++) sum += x[row + j]!;
          }
          y[o] = sum / area;
        }
      }
    }
    return y;
  }

  backward(dy: Float32Array, batch: number, needInputGrad: boolean): Float32Array | null {
    if (!needInputGrad) return null;
    const [C, H, W] = this.inShape as [number, number, number];
    const [, OH, OW] = this.outShape as [number, number, number];
    const dx = this.dx.view(batch * C * H * W).fill(0);
    const area = this.size * this.size;
    let o = 0;
    for (let plane = 0; plane < batch * C; plane++) {
      const base = plane * H * W;
      for (let oy = 0; oy < OH; oy++) {
        for (let ox = 0; ox < OW; ox++, o++) {
          const g = dy[o]! / area;
          for (let i = 0; i < this.size; i++) {
            const row = base + (oy * this.stride + i) * W + ox * this.stride;
            for (let j = 0; j < this.size; j++) dx[row + j] = dx[row + j]! + g;
          }
        }
      }
    }
    return dx;
  }
}

/** Rectified linear unit, max(0, x). */
export class Relu implements Layer {
  readonly kind = "relu";
  readonly outShape: readonly number[];
  readonly params: readonly Param[] = [];
  private readonly out = new Scratch();
  private readonly dx = new Scratch();

  constructor(readonly name: string, readonly inShape: readonly number[]) {
    this.outShape = inShape;
  }

  forward(x: Float32Array, batch: number): Float32Array {
    const y = this.out.view(batch * size(this.inShape));
    for (let i = 0; i < y.length; i++) {
      const v = x[i]!;
      y[i] = v > 0 ? v : 0;
    }
    return y;
  }

  backward(dy: Float32Array, batch: number, needInputGrad: boolean): Float32Array | null {
    if (!needInputGrad) return null;
    const y = this.out.view(batch * size(this.inShape));
    const dx = this.dx.view(y.length);
    for (let i = 0; i < dx.length; i++) dx[i] = y[i]! > 0 ? dy[i]! : 0;
    return dx;
  }
}

/** Flattens [C, H, W] to [C·H·W] (a no-op on NCHW data, ONNX `Flatten` with axis 1). */
export class Flatten implements Layer {
  readonly kind = "flatten";
  readonly outShape: readonly number[];
  readonly params: readonly Param[] = [];

  constructor(readonly name: string, readonly inShape: readonly number[]) {
    this.outShape = [size(inShape)];
  }

  forward(x: Float32Array): Float32Array {
    return x;
  }

  backward(dy: Float32Array, _batch: number, needInputGrad: boolean): Float32Array | null {
    return needInputGrad ? dy : null;
  }
}
