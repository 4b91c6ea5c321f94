// Seeded random numbers, quantiles, tick-path object copies.
export * from "./rng.js";
export * from "./quantile.js";
export * from "./arrivals.js";
