/**
 * Trace files → per-second arrival rates (pure: the CLI reads the file, this parses its text).
 * Formats (those in /work/shared/traces/): a one-column per-second CSV with a header (`tweets`, then
 * one count per line), or a per-minute CSV whose first two columns are `minute,count` (further columns
 * ignored); a minute's count is spread evenly over its 60 seconds.
 */
export function parseTrace(text: string): number[] {
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== "");
  const header = (lines[0] ?? "").split(",").map((h) => h.trim().toLowerCase());
  const perMinute = header[0] === "minute";
  const body = /^[\d.]+$/.test(header[0] ?? "") ? lines : lines.slice(1);
  const offset = lines.length - body.length + 1;
  const out: number[] = [];
  body.forEach((line, i) => {
    const cols = line.split(",");
    const v = Number(perMinute ? cols[1] : cols[0]);
    if (!Number.isFinite(v) || v < 0) throw new Error(`trace line ${i + offset}: "${line}" is not a count`);
    if (perMinute) for (let s = 0; s < 60; s++) out.push(v / 60);
    else out.push(v);
  });
  return out;
}
