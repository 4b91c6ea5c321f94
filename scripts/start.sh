#!/usr/bin/env bash
# npm start: install what is missing, then start the whole system (see scripts/launch.ts).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/ensure-deps.sh
exec node --import tsx scripts/launch.ts "$@"
