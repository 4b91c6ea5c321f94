import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { renderSvg } from "../src/render/svg.js";
import { readme } from "../src/render/readme.js";
import { markdownTable, textTable } from "../src/render/table.js";
import type { ScenarioResult } from "../src/scenario.js";

describe("render", () => {
  it("render - a line chart becomes an SVG with its title", async () => {
    const svg = await renderSvg({ id: "t", title: "Goodput", xLabel: "s", yLabel: "QPS", kind: "line", series: [{ name: "a", points: [[0, 1], [1, 2]] }] });
    expect(svg.startsWith("<svg")).toBe(true);
    expect(svg).toContain("Goodput");
  });

  it("render - tables", () => {
    expect(textTable([{ a: 1, b: "x" }, { a: 22.5, b: "y" }])).toBe("a     b\n----  -\n1     x\n22.5  y");
    expect(markdownTable([{ a: "p|q" }])).toBe("| a |\n| --- |\n| p\\|q |");
  });

  it("render - README puts the paper's figure and ours side by side", () => {
    const r: ScenarioResult = {
      scenario: "x",
      paper: "paper says 3×",
      systems: [{ name: "s", cost_dollars: 1.5, slo_attainment: 0.99, p99_ms: 120 }],
      table: [{ k: 1 }],
      charts: [{ id: "x-c", title: "C", xLabel: "", yLabel: "", kind: "bar", series: [] }],
      notes: ["we differ because"],
    };
    const md = readme([r]);
    expect(md).toContain("| [x](#x) | paper says 3× | s: cost 1.500, SLO 99%, p99 120 ms | we differ because |");
    expect(md).toContain("![C](x-c.svg)");
  });

  it("render - README lists every libs/policy module with the services and simulator systems that call it", () => {
    const md = readme([]);
    const section = md.slice(md.indexOf("## What the services and the simulator share"));
    expect(section.length).toBeGreaterThan(100);
    // (libs/policy/src has a folder per concern)
    const modules = (readdirSync(fileURLToPath(new URL("../../policy/src/", import.meta.url)), { recursive: true }) as string[]).filter((f) => f.endsWith(".ts") && !f.endsWith("index.ts"));
    expect(modules.length).toBeGreaterThan(20);
    for (const m of modules) expect(section, `${m} is missing from render/shared-modules.ts`).toContain(`(../libs/policy/src/${m})`);
  });

  it("render - the page's generated blocks are replaced, the hand-written rest is kept", () => {
    const page = "# Measured results\n\nintro\n\n<!-- sim:shared:begin -->\nold\n<!-- sim:shared:end -->\n\nmiddle\n\n<!-- sim:scenarios:begin -->\nold\n<!-- sim:scenarios:end -->\n\n## Live replay\n\nkept\n";
    const out = readme([], page);
    expect(out).toContain("intro");
    expect(out).toContain("middle");
    expect(out).toContain("## Live replay\n\nkept\n");
    expect(out).not.toContain("\nold\n");
    expect(out).toContain("## What the services and the simulator share");
    expect(readme([], out)).toBe(out);
  });
});
