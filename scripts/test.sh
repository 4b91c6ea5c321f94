#!/usr/bin/env bash
# npm test: install what is missing, then type-check, lint, and run every test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/ensure-deps.sh
echo "== type check"
npx tsc -b
echo "== lint"
npx eslint .
echo "== model zoo (trained once, then cached in .cache/zoo)"
npx tsx libs/zoo/src/cli.ts
echo "== tests"
npx vitest run "$@"
