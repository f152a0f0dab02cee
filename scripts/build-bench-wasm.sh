#!/usr/bin/env bash
# Builds kya-bench's cases (bench/) to wasm exactly as scripts/build-worker.sh builds the Worker:
# `release`'s settings, wasm-bindgen's `--target web` glue, binaryen's wasm-opt -O1. Into
# <target>/bench-wasm/, for `cargo bench -p kya-bench --bench wasm_factor`, which runs it in Node
# (bench/js/measure.mjs). Honours CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=lib/wasm.sh
source scripts/lib/wasm.sh
ensure_wasm_tools

target_dir=${CARGO_TARGET_DIR:-target}
shipped_cargo 3 16 build --locked --target wasm32-unknown-unknown -p kya-bench
bindgen_and_optimise -O1 "$(shipped_wasm kya_bench)" "$target_dir/bench-wasm" kya_bench \
  --no-typescript
# The glue is an ES module: say so, or Node parses it twice.
printf '{ "type": "module" }\n' > "$target_dir/bench-wasm/package.json"
echo "build-bench-wasm: $target_dir/bench-wasm/ is up to date" >&2
