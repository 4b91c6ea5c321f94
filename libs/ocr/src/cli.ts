/**
 * `npm run ocr:accuracy [-- --seed N] [--count N] [--unclip-ratio R] [--errors]`: renders a set of
 * images of known text (`synthetic.ts`), reads them with the whole pipeline in this process
 * (`runOcrLocally`, the bundled PaddleOCR models) and prints the character accuracy, overall and by
 * size, background, format, direction and number of lines. The numbers in libs/ocr/README.md come
 * from here (seed 1, 200 images); the tests use another seed.
 */
import { parseArgs } from "node:util";
import { characterAccuracy } from "./accuracy.js";
import { loadOcrRunners, runOcrLocally } from "./local.js";
import { syntheticSet, type TextImage } from "./synthetic.js";

const USAGE = "usage: npm run ocr:accuracy -- [--seed N] [--count N] [--unclip-ratio R] [--errors]";

interface Row {
  image: TextImage;
  actual: string;
}

function group(rows: readonly Row[], key: (r: Row) => string): Array<[string, Row[]]> {
  const groups = new Map<string, Row[]>();
  for (const r of rows) {
    const k = key(r);
    groups.set(k, [...(groups.get(k) ?? []), r]);
  }
  return [...groups.entries()].sort(([a], [b]) => a.localeCompare(b, "en", { numeric: true }));
}

const accuracyOf = (rows: readonly Row[]): number => characterAccuracy(rows.map((r) => ({ expected: r.image.expected, actual: r.actual })));

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { seed: { type: "string", default: "1" }, count: { type: "string", default: "200" }, "unclip-ratio": { type: "string" }, errors: { type: "boolean", default: false }, help: { type: "boolean", default: false } },
  });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const seed = Number(values.seed);
  const count = Number(values.count);
  const unclipRatio = values["unclip-ratio"] === undefined ? undefined : Number(values["unclip-ratio"]);
  if (!Number.isInteger(seed) || !Number.isInteger(count) || count < 1 || (unclipRatio !== undefined && !(unclipRatio > 0))) throw new Error(USAGE);

  const set = await syntheticSet(seed, count);
  const runners = await loadOcrRunners();
  const rows: Row[] = [];
  const started = performance.now();
  try {
    for (const image of set) {
      const result = await runOcrLocally(image.bytes, runners, { contentType: image.contentType, ...(unclipRatio !== undefined ? { det: { unclipRatio } } : {}) });
      rows.push({ image, actual: result.text });
    }
  } finally {
    await runners.release();
  }
  const elapsedMs = performance.now() - started;

  const chars = rows.reduce((s, r) => s + [...r.image.expected].length, 0);
  const exact = rows.filter((r) => r.actual === r.image.expected).length;
  const noSpaces = characterAccuracy(rows.map((r) => ({ expected: r.image.expected.replace(/ /g, ""), actual: r.actual.replace(/ /g, "") })));
  console.log(`${count} images (seed ${seed}), ${chars} characters${unclipRatio !== undefined ? `, unclip ratio ${unclipRatio}` : ""}`);
  console.log(`character accuracy ${accuracyOf(rows).toFixed(4)}; ignoring spaces ${noSpaces.toFixed(4)}; images read exactly ${exact}/${count}; ${(elapsedMs / count).toFixed(0)} ms an image`);
  const breakdowns: Array<[string, (r: Row) => string]> = [
    ["font size (px)", (r) => String(r.image.spec.sizePx)],
    ["background", (r) => r.image.spec.background],
    ["format", (r) => r.image.spec.format],
    ["direction", (r) => (r.image.spec.rotate180 ? "180°" : "upright")],
    ["lines", (r) => String(r.image.spec.lines.length)],
    ["font", (r) => r.image.spec.font],
  ];
  for (const [name, key] of breakdowns) {
    console.log(`\n${name}`);
    for (const [k, g] of group(rows, key)) console.log(`  ${k.padEnd(22)} ${String(g.length).padStart(4)} images  accuracy ${accuracyOf(g).toFixed(4)}`);
  }
  if (values.errors) {
    console.log("\nimages not read exactly");
    for (const r of rows.filter((x) => x.actual !== x.image.expected)) {
      const s = r.image.spec;
      console.log(`  ${JSON.stringify(r.image.expected)} → ${JSON.stringify(r.actual)}  (${s.font} ${s.sizePx}px, ${s.background}, ${s.format}${s.rotate180 ? ", 180°" : ""})`);
    }
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exitCode = 1;
});
