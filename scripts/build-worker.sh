#!/usr/bin/env bash
# Builds the edge API Worker into edge-api/build/ (git-ignored): the crate to wasm32, then
# wasm-bindgen's JS glue (`--target web`, instantiated synchronously by edge-api/js/entry.mjs,
# which wrangler bundles), then binaryen's wasm-opt -Oz. No worker-build: it would download wasm-bindgen and wasm-opt from
# outside the package registries, which fails on these machines (see TOOLCHAIN.md).
# Then the explorer page's wasm package (scripts/build-explorer.sh, into edge-api/public/pkg/),
# built while wasm-opt works on the Worker.
# Honours CARGO_TARGET_DIR. Takes a few seconds when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=lib/wasm.sh
source scripts/lib/wasm.sh
ensure_wasm_tools

target_dir=${CARGO_TARGET_DIR:-target}
release_build --locked --release --target wasm32-unknown-unknown -p kya-edge-api
# wasm-opt cuts the Worker's upload by about a quarter. It is binaryen compiled to wasm, one
# thread, and takes about 100 s of CPU on the Worker after a change: it runs beside the explorer's
# build, whose last step (the size-first profile's LTO, one codegen unit) uses one core too.
bindgen_and_optimise "$target_dir/wasm32-unknown-unknown/release/kya_edge_api.wasm" edge-api/build kya_edge_api \
  --no-typescript &
worker_glue=$!
explorer=0
bash scripts/build-explorer.sh || explorer=$?
wait "$worker_glue"
echo "build-worker: edge-api/build/ is up to date" >&2
exit "$explorer"
