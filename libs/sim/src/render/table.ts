/** Plain-text and Markdown tables for scenario results. */

type Row = Record<string, string | number>;

function cell(v: string | number | undefined): string {
  if (v === undefined) return "";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : String(Math.round(v * 10_000) / 10_000);
  return v;
}

function columns(rows: Row[]): string[] {
  const cols: string[] = [];
  for (const r of rows) for (const k of Object.keys(r)) if (!cols.includes(k)) cols.push(k);
  return cols;
}

/** Aligned text table for the terminal. */
export function textTable(rows: Row[]): string {
  if (rows.length === 0) return "(no rows)";
  const cols = columns(rows);
  const cells = rows.map((r) => cols.map((c) => cell(r[c])));
  const widths = cols.map((c, i) => Math.max(c.length, ...cells.map((row) => (row[i] ?? "").length)));
  const line = (vals: string[]): string => vals.map((v, i) => v.padEnd(widths[i] ?? 0)).join("  ").trimEnd();
  return [line(cols), widths.map((w) => "-".repeat(w)).join("  "), ...cells.map(line)].join("\n");
}

function md(v: string): string {
  return v.replace(/\|/g, "\\|").replace(/\n/g, "<br>");
}

/** GitHub Markdown table. */
export function markdownTable(rows: Row[]): string {
  if (rows.length === 0) return "";
  const cols = columns(rows);
  return [
    `| ${cols.map(md).join(" | ")} |`,
    `| ${cols.map(() => "---").join(" | ")} |`,
    ...rows.map((r) => `| ${cols.map((c) => md(cell(r[c]))).join(" | ")} |`),
  ].join("\n");
}
