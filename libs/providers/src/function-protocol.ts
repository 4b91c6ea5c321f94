/**
 * Messages between the local function pool (local-functions.ts) and one of its containers
 * (function-runtime.ts), over the child process's IPC channel with `serialization: "advanced"` (so
 * Uint8Arrays cross as they are). One invocation at a time per container; ids match replies to requests.
 */
import type { FunctionFailure, HandlerOutput } from "./function-handler.js";

export type ToContainer =
  /** Runs a query. The budget is relative (ms left until the deadline) because the pool's clock may be a test's. */
  | { type: "invoke"; id: number; invocation: { variant: string; object: string; payload: Uint8Array; requestId?: string; budgetMs: number } }
  /** Pre-warms: marks the container used and loads `object` if given. */
  | { type: "warm"; id: number; object?: string };

export type FromContainer =
  /** The runtime is up (modules imported, model repository reachable); `initMs` since its process started. */
  | { type: "ready"; initMs: number }
  | { type: "reply"; id: number; ok: true; output: HandlerOutput }
  | { type: "reply"; id: number; ok: true; warmed: { coldStart: boolean; loadMs: number } }
  | { type: "reply"; id: number; ok: false; failure: FunctionFailure };
