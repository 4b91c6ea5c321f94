// Load forecasts (MArk §4.2): predictors, the forecaster's plan, backtests.
export * from "./forecast.js";
export * from "./forecast-plan.js";
export * from "./predictors.js";
export * from "./forecast-backtest.js";
