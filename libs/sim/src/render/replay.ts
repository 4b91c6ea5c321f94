/**
 * The live replay's chart (scripts/replay.ts → DIR/replay.svg): load and forecast, workers up, queries
 * sent to functions and SLO misses over the replay, live beside sim, one panel per figure, x in trace
 * minutes. Vega-Lite compiled to Vega and rendered headless, as svg.ts does.
 */
import * as vega from "vega";
import { compile, type TopLevelSpec } from "vega-lite";
import type { ReplaySeriesRow } from "../scenarios/replay.js";

type Side = "live" | "sim";
const PANELS = [
  { key: "load", panel: "1. queries/s (load, forecast)", label: "load" },
  { key: "forecast", panel: "1. queries/s (load, forecast)", label: "forecast" },
  { key: "workers", panel: "2. workers up", label: "workers" },
  { key: "overflow", panel: "3. to functions, queries/s", label: "overflow" },
  { key: "misses", panel: "4. SLO misses (late or failed)/s", label: "misses" },
] as const;

/** Per panel and series, points averaged over `binS` seconds (a day at 144× is 600 s: 10 s bins keep it readable). */
export function replayChartSpec(rows: readonly ReplaySeriesRow[], title: string, speedup: number, binS = 5): TopLevelSpec {
  const startMinute = rows[0]?.trace_minute ?? 0;
  const values: Array<{ panel: string; series: string; x: number; y: number }> = [];
  for (const p of PANELS) {
    for (const side of ["live", "sim"] as Side[]) {
      if (!rows.some((r) => r[side])) continue;
      for (let i = 0; i < rows.length; i += binS) {
        const chunk = rows.slice(i, i + binS);
        const ys = chunk.map((r) => r[side]?.[p.key]).filter((y): y is number => typeof y === "number" && Number.isFinite(y));
        if (ys.length === 0) continue;
        const y = p.key === "workers" ? Math.max(...ys) : ys.reduce((a, b) => a + b, 0) / ys.length;
        values.push({ panel: p.panel, series: `${side} ${p.label}`, x: startMinute + Math.round((((chunk[0]?.t_s ?? 0) * speedup) / 60) * 10) / 10, y });
      }
    }
  }
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title: { text: title, fontSize: 12 },
    data: { values },
    facet: { row: { field: "panel", type: "nominal", title: null, header: { labelAngle: 0, labelAlign: "left", labelAnchor: "start", labelOrient: "top" } } },
    spec: {
      width: 720,
      height: 130,
      mark: { type: "line", strokeWidth: 1.2, interpolate: "step-after" },
      encoding: {
        x: { field: "x", type: "quantitative", title: "trace minute", scale: { nice: false, zero: false } },
        y: { field: "y", type: "quantitative", title: null },
        color: {
          field: "series",
          type: "nominal",
          title: null,
          scale: {
            domain: ["live load", "sim load", "live forecast", "sim forecast", "live workers", "sim workers", "live overflow", "sim overflow", "live misses", "sim misses"],
            range: ["#1f77b4", "#ff7f0e", "#9ecae1", "#fdd0a2", "#1f77b4", "#ff7f0e", "#1f77b4", "#ff7f0e", "#1f77b4", "#ff7f0e"],
          },
          legend: { orient: "bottom", columns: 5 },
        },
        strokeDash: { condition: { test: "indexof(datum.series, 'forecast') >= 0", value: [4, 2] }, value: [1, 0] },
      },
    },
    resolve: { scale: { y: "independent" } },
  } as TopLevelSpec;
}

export async function renderReplaySvg(rows: readonly ReplaySeriesRow[], title: string, speedup: number, binS = 5): Promise<string> {
  const view = new vega.View(vega.parse(compile(replayChartSpec(rows, title, speedup, binS)).spec), { renderer: "none" });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
