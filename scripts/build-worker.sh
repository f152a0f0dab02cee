#!/usr/bin/env bash
# Builds the edge API Worker into edge-api/build/ (git-ignored): the crate to wasm32, then
# wasm-bindgen's JS glue (`--target web`, instantiated synchronously by edge-api/js/entry.mjs,
# which wrangler bundles), then binaryen's wasm-opt -O1. No worker-build: it would download
# wasm-bindgen and wasm-opt from outside the package registries, which fails on these machines
# (see TOOLCHAIN.md). And the explorer page's wasm package (scripts/build-explorer.sh, into
# edge-api/public/pkg/), in the order below.
# Honours CARGO_TARGET_DIR. Takes a few seconds when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=lib/wasm.sh
source scripts/lib/wasm.sh

# In the order that leaves a core idle the least: the browser package's compile first (its last
# step, the package's LTO, runs on one core), then the Worker's compile (every core) beside the
# package's glue and wasm-opt (one core; no cargo, which would wait on the Worker's for cargo's
# lock), then the Worker's glue and wasm-opt (one core, the only step left alone at the end).
# The Worker first left the package's LTO and wasm-opt, about 50 s on one core, at the end
# (scripts/test.sh's first part of the tests is done by then).
#
# The package's compile starts with ensure_wasm_tools (scripts/lib/wasm.sh), which the steps
# below need too: one cargo call for the wasm-bindgen CLI, not two.
bash scripts/build-core-wasm.sh --compile-only
explorer=0
bash scripts/build-explorer.sh --package-only &
explorer_job=$!
# `release`'s opt-level and codegen units (scripts/lib/wasm.sh says why on `dev`).
shipped_cargo 3 16 build --locked --target wasm32-unknown-unknown -p kya-edge-api
# wasm-opt at -O1 cuts the Worker's upload as Cloudflare counts it (gzip) by more than -Oz does:
# 977,521 bytes gzipped against -Oz's 1,009,967 (2,868,432 raw against 2,721,287), in 26 s of
# CPU against 120 s (npm's binaryen 132 is compiled to wasm and runs on one thread; -Os took
# 102 s, -O2 78 s).
bindgen_and_optimise -O1 "$(shipped_wasm kya_edge_api)" edge-api/build kya_edge_api --no-typescript
wait "$explorer_job" || explorer=$?
echo "build-worker: edge-api/build/ is up to date" >&2
exit "$explorer"
