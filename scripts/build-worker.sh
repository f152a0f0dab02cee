#!/usr/bin/env bash
# Builds the edge API Worker into edge-api/build/ (git-ignored): the crate to wasm32, then
# wasm-bindgen's JS glue (`--target web`, instantiated synchronously by edge-api/js/entry.mjs,
# which wrangler bundles), then binaryen's wasm-opt -O1. No worker-build: it would download wasm-bindgen and wasm-opt from
# outside the package registries, which fails on these machines (see TOOLCHAIN.md).
# Then the explorer page's wasm package (scripts/build-explorer.sh, into edge-api/public/pkg/),
# built while wasm-opt works on the Worker.
# Honours CARGO_TARGET_DIR. Takes a few seconds when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=lib/wasm.sh
source scripts/lib/wasm.sh
ensure_wasm_tools

# `release`'s opt-level and codegen units (scripts/lib/wasm.sh says why on `dev`).
shipped_cargo 3 16 build --locked --target wasm32-unknown-unknown -p kya-edge-api
# wasm-opt at -O1 cuts the Worker's upload as Cloudflare counts it (gzip) by more than -Oz does:
# 977,521 bytes gzipped against -Oz's 1,009,967 (2,868,432 raw against 2,721,287), in 26 s of
# CPU against 120 s (npm's binaryen 132 is compiled to wasm and runs on one thread; -Os took
# 102 s, -O2 78 s). It runs beside the explorer's build, whose last step (the size-first profile's
# LTO, one codegen unit) uses one core too.
bindgen_and_optimise -O1 "$(shipped_wasm kya_edge_api)" edge-api/build kya_edge_api \
  --no-typescript &
worker_glue=$!
explorer=0
bash scripts/build-explorer.sh || explorer=$?
wait "$worker_glue"
echo "build-worker: edge-api/build/ is up to date" >&2
exit "$explorer"
