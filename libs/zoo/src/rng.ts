/**
 * Seeded pseudo-random numbers for deterministic training (never `Math.random`).
 *
 * The generator is xoshiro128** (Blackman & Vigna, "Scrambled linear pseudorandom number generators",
 * 2018), a 128-bit-state generator with good statistical quality, seeded through splitmix32 so that
 * nearby seeds give unrelated streams. All arithmetic is 32-bit integer (`Math.imul`, `>>>`), so a seed
 * gives the same stream on every platform.
 */
export interface Rng {
  /** A uniformly distributed unsigned 32-bit integer. */
  nextUint32(): number;
  /** A uniform float in [0, 1). */
  next(): number;
  /** A uniform integer in [0, n). */
  int(n: number): number;
  /** A standard normal sample (Box–Muller, the second value of each pair is kept for the next call). */
  normal(): number;
}

/** splitmix32: a 32-bit mixing step, used to expand a seed into the xoshiro state. */
function splitmix32(state: { s: number }): number {
  state.s = (state.s + 0x9e3779b9) | 0;
  let z = state.s;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}

/** Creates an xoshiro128** generator from a 32-bit seed. */
export function createRng(seed: number): Rng {
  const mix = { s: seed | 0 };
  let a = splitmix32(mix);
  let b = splitmix32(mix);
  let c = splitmix32(mix);
  let d = splitmix32(mix);
  if ((a | b | c | d) === 0) a = 1; // the all-zero state is a fixed point
  let spare: number | null = null;

  const nextUint32 = (): number => {
    const result = Math.imul(rotl(Math.imul(b, 5), 7), 9) >>> 0;
    const t = b << 9;
    c ^= a;
    d ^= b;
    b ^= c;
    a ^= d;
    c ^= t;
    d = rotl(d, 11);
    return result;
  };
  const next = (): number => nextUint32() / 4294967296;
  return {
    nextUint32,
    next,
    int: (n) => Math.floor(next() * n),
    normal: () => {
      if (spare !== null) {
        const value = spare;
        spare = null;
        return value;
      }
      let u = 0;
      while (u === 0) u = next();
      const v = next();
      const radius = Math.sqrt(-2 * Math.log(u));
      spare = radius * Math.sin(2 * Math.PI * v);
      return radius * Math.cos(2 * Math.PI * v);
    },
  };
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

/** Fisher–Yates shuffle of `items` in place, driven by `rng`. */
export function shuffleInPlace(items: Uint32Array, rng: Rng): void {
  for (let i = items.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    const tmp = items[i]!;
    items[i] = items[j]!;
    items[j] = tmp;
  }
}

/**
 * Derives a per-purpose seed from a base seed and a label (FNV-1a over the label, mixed with the
 * seed), so that e.g. each model's stream does not depend on the order in which models are trained.
 */
export function deriveSeed(seed: number, label: string): number {
  let h = 0x811c9dc5 ^ (seed | 0);
  for (let i = 0; i < label.length; i++) {
    h ^= label.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return splitmix32({ s: h }) | 0;
}
