#!/usr/bin/env bash
# Builds the explorer page's generated assets: kya-core's browser package, and the API
# reference's Swagger UI (docs.html; from the npm package swagger-ui-dist into
# edge-api/public/vendor/swagger-ui/, git-ignored). Runs
# scripts/build-core-wasm.sh (into core/pkg/), then copies the ES module and its wasm into
# edge-api/public/pkg/ (git-ignored), where wrangler serves them with the page ([assets] in
# wrangler.toml). Called by scripts/build-worker.sh. Honours CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=lib/files.sh
source scripts/lib/files.sh

# Its modes (--compile-only, --package-only) pass through: scripts/build-worker.sh runs them apart.
bash scripts/build-core-wasm.sh "$@"
mkdir -p edge-api/public/pkg
for file in kya_core.js kya_core_bg.wasm; do
  install_if_changed "core/pkg/$file" "edge-api/public/pkg/$file"
done
mkdir -p edge-api/public/vendor/swagger-ui
for file in swagger-ui-bundle.js swagger-ui.css LICENSE; do
  install_if_changed "node_modules/swagger-ui-dist/$file" "edge-api/public/vendor/swagger-ui/$file"
done
echo "build-explorer: edge-api/public/pkg/ is up to date" >&2
