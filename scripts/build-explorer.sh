#!/usr/bin/env bash
# Builds the explorer page's one generated asset: kya-core's browser package. Runs
# scripts/build-core-wasm.sh (into core/pkg/), then copies the ES module and its wasm into
# edge-api/public/pkg/ (git-ignored), where wrangler serves them with the page ([assets] in
# wrangler.toml). Called by scripts/build-worker.sh. Honours CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/build-core-wasm.sh
mkdir -p edge-api/public/pkg
cp core/pkg/kya_core.js core/pkg/kya_core_bg.wasm edge-api/public/pkg/
echo "build-explorer: edge-api/public/pkg/ is up to date" >&2
