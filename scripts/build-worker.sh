#!/usr/bin/env bash
# Builds the edge API Worker into edge-api/build/ (git-ignored): the crate to wasm32, then
# wasm-bindgen's JS glue (`--target web`, instantiated synchronously by edge-api/js/entry.mjs,
# which wrangler bundles). No worker-build: it would download wasm-bindgen and wasm-opt from
# outside the package registries, which fails on these machines (see TOOLCHAIN.md).
# Then the explorer page's wasm package (scripts/build-explorer.sh, into edge-api/public/pkg/).
# Honours CARGO_TARGET_DIR. Takes a few seconds when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."

wasm_bindgen_version=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
if [ "$(.tools/bin/wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $wasm_bindgen_version" ]; then
  bash scripts/bootstrap.sh
fi

target_dir=${CARGO_TARGET_DIR:-target}
cargo build --locked --release --target wasm32-unknown-unknown -p kya-edge-api
mkdir -p edge-api/build
.tools/bin/wasm-bindgen --target web --no-typescript --out-dir edge-api/build \
  "$target_dir/wasm32-unknown-unknown/release/kya_edge_api.wasm"
echo "build-worker: edge-api/build/ is up to date" >&2
bash scripts/build-explorer.sh
