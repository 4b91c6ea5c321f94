import type * as ChildProcess from "node:child_process";

/** The functions of node:child_process that start a process. */
export const PROCESS_FUNCTIONS = ["spawn", "spawnSync", "exec", "execSync", "execFile", "execFileSync", "fork"] as const;

/**
 * node:child_process with every function that starts a process replaced by one that throws, saying
 * that the test is an integration test: what the unit run (unit-setup.ts) gives its tests.
 */
export function guardedChildProcess(real: typeof ChildProcess): typeof ChildProcess {
  const refuse = (name: string) => (...args: unknown[]): never => {
    const command = typeof args[0] === "string" ? ` (${args[0]})` : "";
    throw new Error(
      `child_process.${name}${command} in npm run test:unit, which runs only the tests that start no process: ` +
        `this test file is an integration test. Put "// @integration" on its first line (libs/testing/src/test-files.ts); npm test runs it.`,
    );
  };
  const blocked = Object.fromEntries(PROCESS_FUNCTIONS.map((name) => [name, refuse(name)]));
  return { ...real, ...blocked, default: { ...real, ...blocked } } as typeof ChildProcess;
}
