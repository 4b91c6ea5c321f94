import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";

/** The real `sloserve` bin (what `npx sloserve` runs), in a child process. */
export const BIN = fileURLToPath(new URL("../bin/sloserve.js", import.meta.url));

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `sloserve <args>` with `env` added to this process's environment; resolves with its exit code and output. */
export function sloserve(args: readonly string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, maxBuffer: 64 * 1024 * 1024, timeout: 120_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/** No stack trace in what a user sees. */
export const STACK_LINE = /^\s+at .+[:(]\d+/m;
