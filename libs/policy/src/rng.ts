/**
 * Seeded pseudo-random numbers for decision code and the simulator.
 *
 * Pure code never calls `Math.random`: a caller creates an {@link Rng} from a seed and passes it in, so
 * every simulation and every randomised policy is reproducible. The generator is sfc32 (Chris Doty-
 * Humphrey's "small fast counting" generator, 128-bit state; passes PractRand to 2^42+ bytes), seeded
 * through splitmix32 so that nearby seeds give unrelated streams.
 *
 * Distributions: uniform, exponential, normal (Box-Muller), gamma (Marsaglia & Tsang 2000, with the
 * `U^(1/k)` boost for shape k < 1) and Poisson (Knuth's product method for small means, a normal
 * approximation with continuity correction above 500).
 */
export interface Rng {
  /** Uniform in [0, 1). */
  next(): number;
}

function splitmix32(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
}

/** sfc32 generator seeded from one 32-bit integer (any finite number; it is truncated). */
export class Sfc32 implements Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number) {
    const sm = splitmix32(Math.trunc(seed));
    this.a = sm();
    this.b = sm();
    this.c = sm();
    this.d = 1;
    for (let i = 0; i < 12; i++) this.next();
  }

  next(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return (t >>> 0) / 4294967296;
  }
}

export function createRng(seed: number): Rng {
  return new Sfc32(seed);
}

/** A child generator derived from a parent and a label, so independent streams stay independent. */
export function forkRng(parent: Rng, label: number): Rng {
  return new Sfc32(Math.floor(parent.next() * 4294967296) ^ Math.imul(label + 1, 0x27d4eb2d));
}

/** Uniform in (0, 1]: safe for logarithms. */
function open01(rng: Rng): number {
  return 1 - rng.next();
}

/** Exponential with the given rate (mean 1/rate). */
export function sampleExponential(rng: Rng, rate: number): number {
  return -Math.log(open01(rng)) / rate;
}

/** Standard normal (Box-Muller, one of the pair). */
export function sampleNormal(rng: Rng): number {
  const u = open01(rng);
  const v = rng.next();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}

/**
 * Gamma(shape k, scale θ): mean kθ, variance kθ². Marsaglia & Tsang's squeeze method; for k < 1,
 * Gamma(k) = Gamma(k + 1) · U^(1/k).
 */
export function sampleGamma(rng: Rng, shape: number, scale: number): number {
  if (shape <= 0 || !Number.isFinite(shape)) throw new RangeError(`gamma shape must be > 0, got ${shape}`);
  if (shape === 1) return -Math.log(open01(rng)) * scale; // exponential
  if (shape < 1) {
    const g = sampleGamma(rng, shape + 1, 1);
    return g * Math.pow(open01(rng), 1 / shape) * scale;
  }
  const d = shape - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    let x: number;
    let v: number;
    do {
      x = sampleNormal(rng);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const u = open01(rng);
    if (u < 1 - 0.0331 * x * x * x * x) return d * v * scale;
    if (Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v * scale;
  }
}

/** Poisson with the given mean. */
export function samplePoisson(rng: Rng, mean: number): number {
  if (mean <= 0) return 0;
  if (mean > 500) return Math.max(0, Math.round(mean + Math.sqrt(mean) * sampleNormal(rng)));
  const limit = Math.exp(-mean);
  let k = 0;
  let p = rng.next();
  while (p > limit) {
    k++;
    p *= rng.next();
  }
  return k;
}
