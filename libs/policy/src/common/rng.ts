/**
 * Seeded pseudo-random numbers: the one random-number module of the project (decision code, the
 * simulator and the zoo's training all draw from here).
 *
 * Pure code never calls `Math.random`: a caller creates an {@link Rng} from a seed and passes it in, so
 * every simulation, every randomised policy and every trained model is reproducible. All arithmetic is
 * 32-bit integer (`Math.imul`, `>>>`), so a seed gives the same stream on every platform. Seeds are
 * expanded through splitmix32, so nearby seeds give unrelated streams.
 *
 * Generators:
 * - {@link Sfc32} ({@link createRng}), the default: Chris Doty-Humphrey's "small fast counting"
 *   generator, 128-bit state, passes PractRand to 2^42+ bytes.
 * - {@link Xoshiro128ss}: xoshiro128** (Blackman & Vigna, "Scrambled linear pseudorandom number
 *   generators", 2018), 128-bit state. The zoo (`@sloserve/zoo`) trains with it; its stream is kept
 *   bit for bit because the cached digits models' weights, and the accuracies in docs/MODELS.md,
 *   follow from it. New code uses {@link createRng}.
 *
 * Distributions: uniform, integer ({@link sampleInt}), exponential, normal (Box-Muller: one value per
 * call with {@link sampleNormal}, or both values of each pair with {@link pairedNormals}), gamma
 * (Marsaglia & Tsang 2000, with the `U^(1/k)` boost for shape k < 1) and Poisson (Knuth's product
 * method for small means, a normal approximation with continuity correction above 500). Also a
 * Fisher-Yates {@link shuffleInPlace} and {@link deriveSeed} (per-purpose seeds from a label).
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
  /**
   * The state a, b, c, d as 32-bit integers. Typed: number fields would hold them as doubles (boxed,
   * converted at every operation), or, declared without a value, as a fresh heap number per store;
   * `next` runs per simulated arrival. (The seeding stores splitmix32's unsigned outputs here as
   * signed integers: every operation below works modulo 2^32, so the stream is the same.)
   */
  private readonly s = new Int32Array(4);

  constructor(seed: number) {
    const sm = splitmix32(Math.trunc(seed));
    const s = this.s;
    s[0] = sm();
    s[1] = sm();
    s[2] = sm();
    s[3] = 1;
    for (let i = 0; i < 12; i++) this.next();
  }

  next(): number {
    const s = this.s;
    const a = s[0] as number;
    const b = s[1] as number;
    const c = s[2] as number;
    const d = s[3] as number;
    const t = (((a + b) | 0) + d) | 0;
    s[3] = (d + 1) | 0;
    s[0] = b ^ (b >>> 9);
    s[1] = (c + (c << 3)) | 0;
    s[2] = (((c << 21) | (c >>> 11)) + t) | 0;
    return (t >>> 0) / 4294967296;
  }
}

/** The default generator ({@link Sfc32}) for a seed. */
export function createRng(seed: number): Rng {
  return new Sfc32(seed);
}

/**
 * xoshiro128** seeded from one 32-bit integer (any finite number; it is truncated) through four
 * splitmix32 outputs. Only the zoo uses it (see the module comment); {@link createRng} is the default.
 */
export class Xoshiro128ss implements Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number) {
    const sm = splitmix32(Math.trunc(seed));
    this.a = sm();
    this.b = sm();
    this.c = sm();
    this.d = sm();
    if ((this.a | this.b | this.c | this.d) === 0) this.a = 1; // the all-zero state is a fixed point
  }

  /** A uniformly distributed unsigned 32-bit integer. */
  nextUint32(): number {
    const result = Math.imul(rotl(Math.imul(this.b, 5), 7), 9) >>> 0;
    const t = this.b << 9;
    this.c ^= this.a;
    this.d ^= this.b;
    this.b ^= this.c;
    this.a ^= this.d;
    this.c ^= t;
    this.d = rotl(this.d, 11);
    return result;
  }

  next(): number {
    return this.nextUint32() / 4294967296;
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

/** A child generator derived from a parent and a label, so independent streams stay independent. */
export function forkRng(parent: Rng, label: number): Rng {
  return new Sfc32(Math.floor(parent.next() * 4294967296) ^ Math.imul(label + 1, 0x27d4eb2d));
}

/**
 * Derives a per-purpose seed from a base seed and a label (FNV-1a over the label, mixed with the seed,
 * then one splitmix32 step), so that e.g. each zoo model's stream does not depend on the order in which
 * the models are trained. Returns a signed 32-bit integer.
 */
export function deriveSeed(seed: number, label: string): number {
  let h = 0x811c9dc5 ^ (seed | 0);
  for (let i = 0; i < label.length; i++) {
    h ^= label.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return splitmix32(h)() | 0;
}

/** Uniform integer in [0, n): ⌊next()·n⌋. */
export function sampleInt(rng: Rng, n: number): number {
  return Math.floor(rng.next() * n);
}

/** Fisher-Yates shuffle of `items` in place, driven by `rng` (one {@link sampleInt} per position). */
export function shuffleInPlace(items: { length: number; [i: number]: number }, rng: Rng): void {
  for (let i = items.length - 1; i > 0; i--) {
    const j = sampleInt(rng, i + 1);
    const tmp = items[i]!;
    items[i] = items[j]!;
    items[j] = tmp;
  }
}

/**
 * Standard normal samples by Box-Muller using both values of each pair: a call that finds no cached
 * value draws u (redrawn while 0) and v, returns r·cos(2πv) and keeps r·sin(2πv) for the next call
 * (r = √(−2 ln u)). Half the uniforms of {@link sampleNormal}, but stateful: the returned function holds
 * the spare, so use one per stream. The zoo's weight initialisation draws from it.
 */
export function pairedNormals(rng: Rng): () => number {
  let spare: number | null = null;
  return () => {
    if (spare !== null) {
      const value = spare;
      spare = null;
      return value;
    }
    let u = 0;
    while (u === 0) u = rng.next();
    const v = rng.next();
    const radius = Math.sqrt(-2 * Math.log(u));
    spare = radius * Math.sin(2 * Math.PI * v);
    return radius * Math.cos(2 * Math.PI * v);
  };
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
