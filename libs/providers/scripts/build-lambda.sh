#!/usr/bin/env bash
# Builds the Lambda function of the overflow path (libs/providers/src/lambda-handler.ts) as a zip for
# the nodejs20.x runtime on x86_64: index.mjs (the handler bundled with esbuild, which tsx brings) and
# node_modules holding onnxruntime-node (its Linux x64 binaries only, ~46 MB) and onnxruntime-common.
# Models are not in the zip: they go in a layer (models/<object> → /opt/models/<object>, MODELS_DIR).
#
#   bash libs/providers/scripts/build-lambda.sh [out-dir]    # default: .cache/lambda
#
# Deploying: docs/ARCHITECTURE.md, "Serverless overflow: function providers".
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
out="$(mkdir -p "${1:-$root/.cache/lambda}" && cd "${1:-$root/.cache/lambda}" && pwd)"
stage="$out/function"
rm -rf "$stage" "$out/function.zip"
mkdir -p "$stage/node_modules/onnxruntime-node/bin/napi-v6/linux"

"$root/node_modules/.bin/esbuild" "$root/libs/providers/src/lambda-handler.ts" --bundle --platform=node --target=node20 \
  --format=esm --external:onnxruntime-node --outfile="$stage/index.mjs" --log-level=warning

ort="$root/node_modules/onnxruntime-node"
cp -r "$ort/package.json" "$ort/dist" "$stage/node_modules/onnxruntime-node/"
cp -r "$ort/bin/napi-v6/linux/x64" "$stage/node_modules/onnxruntime-node/bin/napi-v6/linux/"
cp -r "$root/node_modules/onnxruntime-common" "$stage/node_modules/"

(cd "$stage" && zip -qr "$out/function.zip" .)
echo "$out/function.zip ($(du -h "$out/function.zip" | cut -f1)); handler: index.handler"
