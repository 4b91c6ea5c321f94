import { describe, expect, it } from "vitest";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

// The folder beside the repository and the machine's work root, spelt in parts so that this file does not name them itself.
const OUTSIDE_SHARED = ["..", "shared", ""].join("/");
const MACHINE_ROOT = ["", "work", ""].join("/");

/**
 * The Markdown documents: every relative link leads to a file or folder of the repository, the README
 * and the architecture page stay short, and no document carries work logs or paths from outside the
 * repository. No servers: it reads files only.
 */

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** The Markdown files git knows of: tracked, and new ones not ignored (so a new page is checked before its commit). */
function markdownFiles(): string[] {
  const listed = spawnSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "*.md"], { cwd: ROOT, encoding: "utf8" });
  if (listed.status !== 0) throw new Error(`git ls-files failed: ${listed.stderr || String(listed.error)}`);
  return [...new Set(listed.stdout.split("\0").filter((f) => f !== ""))].filter((f) => existsSync(join(ROOT, f))).sort();
}

const files = markdownFiles();
const read = (file: string): string => readFileSync(join(ROOT, file), "utf8");

/** Lines as `wc -l` counts them. */
function lineCount(text: string): number {
  if (text === "") return 0;
  const parts = text.split("\n").length;
  return text.endsWith("\n") ? parts - 1 : parts;
}

/**
 * The text with code left out (fenced blocks and inline code spans, which may show link syntax without
 * being links), lines kept in place so that line numbers still hold.
 */
function withoutCode(text: string): string[] {
  const out: string[] = [];
  let fence: string | undefined;
  for (const line of text.split("\n")) {
    const opening = /^\s{0,3}(`{3,}|~{3,})/.exec(line);
    if (fence !== undefined) {
      if (opening && opening[1]![0] === fence[0] && opening[1]!.length >= fence.length) fence = undefined;
      out.push("");
      continue;
    }
    if (opening) {
      fence = opening[1]!;
      out.push("");
      continue;
    }
    out.push(line.replace(/(`+)[\s\S]*?\1/g, ""));
  }
  return out;
}

/** Inline links and images `[text](target "title")`, and reference definitions `[ref]: target`. */
const INLINE_LINK = /!?\[(?:[^[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/g;
const REFERENCE_DEFINITION = /^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)/;

function linkTargets(text: string): Array<{ line: number; target: string }> {
  const found: Array<{ line: number; target: string }> = [];
  withoutCode(text).forEach((line, i) => {
    for (const m of line.matchAll(INLINE_LINK)) found.push({ line: i + 1, target: m[1]! });
    const def = REFERENCE_DEFINITION.exec(line);
    if (def) found.push({ line: i + 1, target: def[1]! });
  });
  return found.map(({ line, target }) => ({ line, target: target.replace(/^<|>$/g, "") }));
}

/** Where a relative link leads, or undefined for links that leave the file system (URLs, mail) or stay on the page. */
function linkedPath(file: string, target: string): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("//")) return undefined;
  const path = target.split("#")[0]!.split("?")[0]!;
  if (path === "") return undefined;
  let decoded = path;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    // Not percent-encoded: taken as written.
  }
  return decoded.startsWith("/") ? join(ROOT, decoded) : resolve(ROOT, dirname(file), decoded);
}

describe("Markdown documents", () => {
  it("are found", () => {
    expect(files).toContain("README.md");
    expect(files.length).toBeGreaterThan(1);
  });

  it("link only to files and folders inside the repository", () => {
    const broken: string[] = [];
    for (const file of files) {
      for (const { line, target } of linkTargets(read(file))) {
        const path = linkedPath(file, target);
        if (path === undefined) continue;
        const inside = path === ROOT || path.startsWith(ROOT + sep);
        if (!inside) broken.push(`${file}:${line}: ${target} leads outside the repository`);
        else if (!existsSync(path)) broken.push(`${file}:${line}: ${target} (${relative(ROOT, path)} does not exist)`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("keep README.md within 150 lines and docs/ARCHITECTURE.md within 400", () => {
    const limits: Record<string, number> = { "README.md": 150, "docs/ARCHITECTURE.md": 400 };
    const over = Object.entries(limits)
      .map(([file, limit]) => ({ file, limit, lines: lineCount(read(file)) }))
      .filter(({ lines, limit }) => lines > limit)
      .map(({ file, limit, lines }) => `${file}: ${lines} lines (at most ${limit})`);
    expect(over).toEqual([]);
  });

  it("carry no work logs and no paths from outside the repository", () => {
    const rules: Array<{ what: string; test: (line: string) => boolean }> = [
      { what: "a work session", test: (line) => /\b[Ss]ession [0-9]+|\([Ss]ession/.test(line) },
      { what: OUTSIDE_SHARED, test: (line) => line.includes(OUTSIDE_SHARED) },
      { what: MACHINE_ROOT, test: (line) => line.includes(MACHINE_ROOT) },
    ];
    const found: string[] = [];
    for (const file of files) {
      read(file)
        .split("\n")
        .forEach((line, i) => {
          for (const rule of rules) if (rule.test(line)) found.push(`${file}:${i + 1}: ${rule.what}: ${line.trim().slice(0, 120)}`);
        });
    }
    expect(found).toEqual([]);
  });
});

describe("the link checker", () => {
  it("sees links outside code only, and resolves them from the linking file", () => {
    const text = ["[a](docs/A.md#x) `[b](nowhere.md)` ![c](<img dir/c.png> \"t\")", "```", "[d](inside-fence.md)", "```", "[e]: ../up.md"].join("\n");
    expect(linkTargets(text)).toEqual([
      { line: 1, target: "docs/A.md#x" },
      { line: 1, target: "img dir/c.png" },
      { line: 5, target: "../up.md" },
    ]);
    expect(linkedPath("docs/X.md", "A.md#x")).toBe(join(ROOT, "docs", "A.md"));
    expect(linkedPath("docs/X.md", "#only-an-anchor")).toBeUndefined();
    expect(linkedPath("README.md", "https://example.com/a.md")).toBeUndefined();
    expect(linkedPath("README.md", "mailto:someone@example.com")).toBeUndefined();
    expect(lineCount("a\nb\n")).toBe(2);
    expect(lineCount("a\nb")).toBe(2);
  });
});
