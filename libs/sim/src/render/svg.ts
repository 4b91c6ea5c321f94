/**
 * Charts → SVG, headless, with Vega-Lite (compiled to Vega, rendered by a Vega View with no DOM).
 * A {@link Chart} from a scenario becomes a line chart (one line per series) or a grouped bar chart
 * (x = category index, one bar per series).
 */
import * as vega from "vega";
import { compile, type TopLevelSpec } from "vega-lite";
import type { Chart } from "../scenario.js";

export function chartSpec(chart: Chart): TopLevelSpec {
  const values = chart.series.flatMap((s) => s.points.filter(([, y]) => Number.isFinite(y)).map(([x, y]) => ({ series: s.name, x, y })));
  const color = { field: "series", type: "nominal", title: null, legend: { orient: "bottom", columns: 3 } } as const;
  if (chart.kind === "bar") {
    return {
      $schema: "https://vega.github.io/schema/vega-lite/v6.json",
      title: { text: chart.title, fontSize: 12 },
      width: 560,
      height: 300,
      data: { values },
      mark: "bar",
      encoding: {
        x: { field: "x", type: "ordinal", title: chart.xLabel },
        xOffset: { field: "series", type: "nominal" },
        y: { field: "y", type: "quantitative", title: chart.yLabel },
        color,
        tooltip: [{ field: "series" }, { field: "y", type: "quantitative", format: ".3~g" }],
      },
    } as TopLevelSpec;
  }
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title: { text: chart.title, fontSize: 12 },
    width: 640,
    height: 300,
    data: { values },
    mark: { type: "line", strokeWidth: 1.5 },
    encoding: {
      x: { field: "x", type: "quantitative", title: chart.xLabel },
      y: { field: "y", type: "quantitative", title: chart.yLabel },
      color,
    },
  } as TopLevelSpec;
}

/** Render a chart to an SVG string. */
export async function renderSvg(chart: Chart): Promise<string> {
  const vgSpec = compile(chartSpec(chart)).spec;
  const view = new vega.View(vega.parse(vgSpec), { renderer: "none" });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
