/**
 * Setup file of `npm run test:unit` (vitest.unit.config.ts): the unit run starts no process. A test
 * that reaches child_process anyway (through a package's code, which test-files.ts does not read)
 * fails here, saying what to do, instead of making the unit run slow without anyone noticing.
 */
import { vi } from "vitest";

vi.mock("node:child_process", async (importOriginal) => (await import("./child-process-guard.js")).guardedChildProcess(await importOriginal()));
vi.mock("child_process", async (importOriginal) => (await import("./child-process-guard.js")).guardedChildProcess(await importOriginal()));
