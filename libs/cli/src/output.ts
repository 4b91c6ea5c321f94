import { readFileSync } from "node:fs";
import { textTable } from "@sloserve/sim/table";
import { CliError, exitCodes } from "./client.js";

export type Row = Record<string, string | number>;

/** Where commands write: tables for people, or the JSON value for programs (`--json`). */
export interface Out {
  json: boolean;
  /** Prints `value` as JSON, or calls `text` to print it for people. */
  emit(value: unknown, text: () => string): void;
}

export function makeOut(json: boolean, write: (s: string) => void = (s) => process.stdout.write(s)): Out {
  return {
    json,
    emit(value, text) {
      write(`${json ? JSON.stringify(value, null, 2) : text()}\n`);
    },
  };
}

/** A titled table; "(none)" when there are no rows. */
export function section(title: string, rows: Row[]): string {
  return `${title}\n${rows.length ? textTable(rows) : "(none)"}`;
}

export { textTable };

/** `HH:MM:SS` of a time in ms (local time), for tables. */
export function clockTime(ms: number): string {
  return new Date(ms).toTimeString().slice(0, 8);
}

export function megabytes(bytes: number | null | undefined): string {
  return bytes == null ? "-" : (bytes / 1048576).toFixed(1);
}

export function fixed(x: number | null | undefined, digits = 1): string {
  return x == null ? "-" : x.toFixed(digits);
}

/** A file's bytes, or a CliError naming the file and why it cannot be read. */
export function readLocalFile(path: string, what: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    const code = (err as { code?: string }).code;
    const why = code === "ENOENT" ? "no such file" : code === "EISDIR" ? "it is a directory" : code === "EACCES" ? "permission denied" : (err as Error).message;
    throw new CliError(`cannot read the ${what} ${path}: ${why}`, exitCodes.usage);
  }
}

/** A JSON file, or a CliError naming the file and where its JSON is broken. */
export function readJsonFile(path: string, what: string): unknown {
  const text = readLocalFile(path, what).toString("utf8");
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new CliError(`the ${what} ${path} is not valid JSON: ${(err as Error).message}`, exitCodes.usage);
  }
}
