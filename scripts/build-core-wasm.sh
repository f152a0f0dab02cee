#!/usr/bin/env bash
# Builds the browser package of kya-core into core/pkg/ (git-ignored): the crate with feature
# `browser` for wasm32 (size-first profile `wasm-release`), wasm-bindgen's ES module glue and
# TypeScript types (`--target web`: browsers fetch the wasm; Node passes its bytes to `init`),
# wasm-opt -Oz from npm's binaryen, and a package.json. Honours CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=lib/wasm.sh
source scripts/lib/wasm.sh
ensure_wasm_tools

target_dir=${CARGO_TARGET_DIR:-target}
cargo build --locked --profile wasm-release --target wasm32-unknown-unknown -p kya-core --features browser
out=core/pkg
bindgen_and_optimise "$target_dir/wasm32-unknown-unknown/wasm-release/kya_core.wasm" "$out" kya_core

version=$(awk -F'"' '/^version = / { print $2; exit }' Cargo.toml)
cat > "$out/package.json" <<JSON
{
  "name": "kya-core",
  "version": "$version",
  "description": "KYA agent registry logic for web apps: compliance, KYA decisions, registry decoding, EIP-712 forward requests (wasm)",
  "license": "MIT",
  "type": "module",
  "main": "kya_core.js",
  "types": "kya_core.d.ts",
  "files": ["kya_core.js", "kya_core_bg.wasm", "kya_core.d.ts", "kya_core_bg.wasm.d.ts"],
  "sideEffects": ["./snippets/*"]
}
JSON
echo "build-core-wasm: $out/ is up to date ($(wc -c < "$out/kya_core_bg.wasm") bytes of wasm)" >&2
