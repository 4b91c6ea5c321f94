#!/usr/bin/env node
// `sloserve`: the command-line client of the frontend's HTTP API (libs/cli/src/main.ts).
// The repository runs its TypeScript without a build step: tsx compiles it as it is imported.
import { register } from "tsx/esm/api";

register();
await import("../src/main.ts");
