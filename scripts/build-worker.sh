#!/usr/bin/env bash
# Builds the edge API Worker into edge-api/build/ (git-ignored): the crate to wasm32, then
# wasm-bindgen's JS glue (`--target web`, instantiated synchronously by edge-api/js/entry.mjs,
# which wrangler bundles), then binaryen's wasm-opt -Oz. No worker-build: it would download wasm-bindgen and wasm-opt from
# outside the package registries, which fails on these machines (see TOOLCHAIN.md).
# Then the explorer page's wasm package (scripts/build-explorer.sh, into edge-api/public/pkg/).
# Honours CARGO_TARGET_DIR. Takes a few seconds when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."

wasm_bindgen_version=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
if [ "$(.tools/bin/wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $wasm_bindgen_version" ] \
  || [ ! -x node_modules/.bin/wasm-opt ]; then
  bash scripts/bootstrap.sh
fi

target_dir=${CARGO_TARGET_DIR:-target}
cargo build --locked --release --target wasm32-unknown-unknown -p kya-edge-api
mkdir -p edge-api/build
compiled="$target_dir/wasm32-unknown-unknown/release/kya_edge_api.wasm"
# wasm-bindgen's glue and binaryen's wasm-opt (from npm) only when the compiled module changed:
# wasm-opt takes ~20 s and cuts the upload by about a quarter.
stamp=edge-api/build/.compiled.sha256
if [ "$(cat "$stamp" 2>/dev/null)" != "$(sha256sum "$compiled" | cut -d' ' -f1)" ] \
  || [ ! -f edge-api/build/kya_edge_api_bg.wasm ]; then
  .tools/bin/wasm-bindgen --target web --no-typescript --out-dir edge-api/build "$compiled"
  node_modules/.bin/wasm-opt -Oz --enable-bulk-memory --enable-nontrapping-float-to-int \
    --enable-sign-ext --enable-mutable-globals --enable-reference-types --enable-multivalue \
    edge-api/build/kya_edge_api_bg.wasm -o edge-api/build/kya_edge_api_bg.wasm
  sha256sum "$compiled" | cut -d' ' -f1 > "$stamp"
fi
echo "build-worker: edge-api/build/ is up to date" >&2
bash scripts/build-explorer.sh
