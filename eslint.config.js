// Lint: keeps the pure decision code in libs/ free of I/O and clocks (see docs/ARCHITECTURE.md),
// and forbids deep imports into another package's src/.
import tseslint from "typescript-eslint";

const ioModules = [
  "node:fs", "fs", "node:fs/promises", "fs/promises", "node:net", "net", "node:http", "http",
  "node:https", "https", "node:child_process", "child_process", "node:dgram", "dgram",
  "node:worker_threads", "worker_threads", "node:os", "os",
  "ioredis", "onnxruntime-node", "@grpc/grpc-js", "fastify", "pino", "opossum",
  "@aws-sdk/client-ec2", "@aws-sdk/client-lambda",
];
const ioPatterns = ["@nats-io/*", "@sloserve/bus", "@sloserve/store", "@sloserve/runtime", "@sloserve/stack"];

export default tseslint.config(
  { ignores: ["**/node_modules/**", "**/dist-types/**", ".run/**", ".cache/**", "reports/**", "bench/results/**", ".scratch/**"] },
  {
    files: ["**/*.ts"],
    // Type-aware: the rules below need the type checker (each package's tsconfig, found per file).
    languageOptions: { parser: tseslint.parser, parserOptions: { projectService: { allowDefaultProject: ["vitest.config.ts", "vitest.unit.config.ts"] }, tsconfigRootDir: import.meta.dirname } },
    plugins: { "@typescript-eslint": tseslint.plugin },
    rules: {
      // A promise nobody awaits or handles loses its error: await it, return it, or `void` it on purpose
      // with its own .catch that logs.
      "@typescript-eslint/no-floating-promises": "error",
      // An async function where a callback must return void (event handlers, setInterval) drops its
      // rejection.
      "@typescript-eslint/no-misused-promises": "error",
      "no-restricted-imports": ["error", {
        patterns: [{ group: ["@sloserve/*/src/*", "../../libs/*", "../../../libs/*"], message: "import the package's public entry (@sloserve/<name>), not its files" }],
      }],
    },
  },
  {
    // Decision code: pure. No network, no Redis, no onnxruntime, no file system, no clock.
    files: ["libs/contracts/src/**/*.ts", "libs/policy/src/**/*.ts", "libs/sim/src/**/*.ts"],
    ignores: ["libs/sim/src/cli.ts", "libs/sim/src/backtest-cli.ts", "libs/sim/src/render/**"],
    rules: {
      "no-restricted-imports": ["error", {
        paths: ioModules.map((name) => ({ name, message: "decision code in libs/ is pure: pass data and time in" })),
        patterns: [{ group: ioPatterns, message: "decision code in libs/ is pure: pass data and time in" }],
      }],
      "no-restricted-properties": ["error",
        { object: "Date", property: "now", message: "take time as an argument" },
        { object: "performance", property: "now", message: "take time as an argument" },
        { object: "Math", property: "random", message: "take a seeded RNG as an argument" },
      ],
      "no-restricted-globals": ["error", "setTimeout", "setInterval", "fetch", "process"],
    },
  },
);
