// Prices and billing: instance prices, spot prices over time, the price of a variant instance.
export * from "./costs.js";
export * from "./variant-price.js";
export * from "./spot-prices.js";
