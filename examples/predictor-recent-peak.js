// A user predictor for the forecaster (MArk §4.2 lets users plug in their own workload predictor).
//
// Use it with the forecaster service:        FORECASTER=module:examples/predictor-recent-peak.js
// for one app only:                           FORECASTER_BY_APP=digits=module:/abs/path/predictor-recent-peak.js
// in the simulator's MArk systems:            npm run sim -- mark-twitter --predictor module:examples/predictor-recent-peak.js
// in a backtest:                              npm run forecast:backtest -- --trace FILE --predictor module:examples/predictor-recent-peak.js
//
// The interface (libs/policy/src/forecast.ts `Forecaster`): the module's default export (or an export
// named `forecaster`) is an object
//
//   { name: string, forecast(history: number[], horizon: number): number[] }
//
// - `history`: one value per prediction unit (a minute), oldest first: the unit's maximum arrival rate
//   over 5 s windows, in queries per second; NaN marks a unit with no data. It is the whole history the
//   forecaster keeps (a week of minutes by default), so a predictor may stay stateless.
// - the result: the maximum rate of each of the next `horizon` units (60), finite numbers (negative ones
//   are taken as 0). The registry checks the length and the values on every call; a predictor that
//   throws leaves its app without a forecast for that unit (logged), and the autoscalers fall back on
//   their reactive rules.
//
// This one is deliberately conservative: it forecasts the peak of the last 15 minutes, or of the same
// 15 minutes one day earlier if that was higher, plus 10% — fewer under-provisioned minutes than a
// point forecast, at the price of more capacity (compare them with the backtest).

const WINDOW = 15;
const DAY = 1440;
const HEADROOM = 1.1;

function peak(history, from, to) {
  let max = -Infinity;
  for (let i = Math.max(0, from); i < Math.min(history.length, to); i++) {
    const v = history[i];
    if (!Number.isNaN(v) && v > max) max = v;
  }
  return max;
}

export default {
  name: "recent-peak(15 min, +10%)",
  forecast(history, horizon) {
    const n = history.length;
    const out = [];
    for (let h = 1; h <= horizon; h++) {
      const recent = peak(history, n - WINDOW, n);
      // the same window a day before the step being forecast
      const lastDay = peak(history, n + h - DAY - WINDOW, n + h - DAY + 1);
      const p = Math.max(recent, lastDay);
      out.push(Number.isFinite(p) ? HEADROOM * p : 0);
    }
    return out;
  },
};
