#!/usr/bin/env bash
# Builds the explorer page's generated assets: kya-core's browser package, and the API
# reference's Swagger UI (docs.html; from the npm package swagger-ui-dist into
# edge-api/public/vendor/swagger-ui/, git-ignored). Runs
# scripts/build-core-wasm.sh (into core/pkg/), then copies the ES module and its wasm into
# edge-api/public/pkg/ (git-ignored), where wrangler serves them with the page ([assets] in
# wrangler.toml). Called by scripts/build-worker.sh. Honours CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/build-core-wasm.sh
mkdir -p edge-api/public/pkg
cp core/pkg/kya_core.js core/pkg/kya_core_bg.wasm edge-api/public/pkg/
mkdir -p edge-api/public/vendor/swagger-ui
cp node_modules/swagger-ui-dist/swagger-ui-bundle.js node_modules/swagger-ui-dist/swagger-ui.css \
  node_modules/swagger-ui-dist/LICENSE edge-api/public/vendor/swagger-ui/
echo "build-explorer: edge-api/public/pkg/ is up to date" >&2
