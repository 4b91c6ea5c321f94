import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

/**
 * Which test files are integration tests: those that start processes (nats-server, redis-server, the
 * services, worker or function processes, a browser). `npm run test:unit` (vitest.unit.config.ts) runs
 * every other test file; `npm test` runs them all.
 *
 * The rule reads the files, so that a new test is classified without anyone listing it: a test file is
 * an integration test when it, or a helper module it imports by a relative path (./support.js,
 * ./faults.js, ./harness.js, ...; not a package's src/), names one of {@link PROCESS_STARTERS}, or
 * carries the marker `// @integration` in its first lines (for a way of starting a process the rule
 * does not know). The unit run also refuses child_process at run time (unit-setup.ts): a test that
 * starts a process some other way fails there, saying so, rather than slowing the unit run silently.
 */
export const PROCESS_STARTERS: ReadonlyArray<{ pattern: RegExp; what: string }> = [
  { pattern: /\bstart(?:Nats|NatsCluster|Redis|Stack|Service|Script)\b/, what: "a process starter of @sloserve/stack" },
  { pattern: /\bLocal(?:WorkerProvider|FunctionPool)\b/, what: "worker or function processes (@sloserve/providers)" },
  { pattern: /["'](?:node:)?child_process["']/, what: "child_process" },
  { pattern: /["']playwright(?:-core)?["']/, what: "a browser (playwright)" },
];

/** The marker for an integration test the rule would not recognise, in a file's first 5 lines. */
export const INTEGRATION_MARKER = "// @integration";

/** The folders vitest.config.ts takes test files from (its `include`). */
export const TEST_ROOTS = ["libs/*/test", "services/*/test", "test", "bench/test"];

/** Every `*.test.ts` under the test roots (one `*` level, as vitest.config.ts's globs), relative to `root`, sorted. */
export function testFiles(root: string, roots: readonly string[] = TEST_ROOTS): string[] {
  const out: string[] = [];
  for (const pattern of roots) {
    const [head, star, ...rest] = pattern.split("/");
    const dirs = star === "*" ? listDirs(join(root, head!)).map((d) => join(head!, d, ...rest)) : [pattern];
    for (const dir of dirs) walk(root, dir, out);
  }
  return [...new Set(out)].sort();
}

/** Why `file` (relative to `root`) is an integration test, or undefined when it is not. */
export function integrationReason(root: string, file: string): string | undefined {
  const first = readFileSync(join(root, file), "utf8").split("\n", 5);
  if (first.some((l) => l.trim().startsWith(INTEGRATION_MARKER))) return `marked ${INTEGRATION_MARKER}`;
  const seen = new Set<string>();
  const queue = [resolve(root, file)];
  while (queue.length > 0) {
    const path = queue.shift()!;
    if (seen.has(path)) continue;
    seen.add(path);
    const text = readFileSync(path, "utf8");
    for (const { pattern, what } of PROCESS_STARTERS) {
      if (pattern.test(text)) return path === resolve(root, file) ? `uses ${what}` : `uses ${what} (through ${relative(root, path)})`;
    }
    for (const spec of relativeImports(text)) {
      const target = resolveTs(dirname(path), spec);
      // A test's own helpers only: a package's src/ is what the test exercises, and code there that
      // starts a process is refused at run time in the unit run (unit-setup.ts).
      if (target && !/[\\/](?:node_modules|src)[\\/]/.test(relative(root, target))) queue.push(target);
    }
  }
  return undefined;
}

/** The integration test files among `files` (relative to `root`), each with why. */
export function integrationTestFiles(root: string, files: readonly string[] = testFiles(root)): Map<string, string> {
  const out = new Map<string, string>();
  for (const file of files) {
    const reason = integrationReason(root, file);
    if (reason) out.set(file, reason);
  }
  return out;
}

function listDirs(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory() && e.name !== "node_modules").map((e) => e.name).sort();
}

function walk(root: string, dir: string, out: string[]): void {
  const abs = join(root, dir);
  if (!existsSync(abs) || !statSync(abs).isDirectory()) return;
  for (const e of readdirSync(abs, { withFileTypes: true })) {
    if (e.isDirectory()) {
      if (e.name !== "node_modules" && e.name !== "dist-types") walk(root, join(dir, e.name), out);
    } else if (e.name.endsWith(".test.ts")) out.push(join(dir, e.name));
  }
}

/** Relative module specifiers in static imports, re-exports and dynamic imports. */
function relativeImports(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)["'](\.{1,2}\/[^"']+)["']/gm)) out.push(m[1]!);
  return out;
}

/** A relative specifier as written in ESM TypeScript (`./x.js`) → the .ts file, if there is one. */
function resolveTs(fromDir: string, spec: string): string | undefined {
  const base = resolve(fromDir, spec);
  const candidates = [base.replace(/\.js$/, ".ts"), base.replace(/\.mjs$/, ".mts"), base, `${base}.ts`, join(base, "index.ts")];
  return candidates.find((c) => c.endsWith("ts") && existsSync(c) && statSync(c).isFile());
}
