#!/usr/bin/env bash
# Builds the browser package of kya-core into core/pkg/ (git-ignored): the crate with feature
# `browser` for wasm32 (crate `kya-core-wasm`, size first), wasm-bindgen's ES module glue and
# TypeScript types, generated from the Rust types by tsify (`--target web`: browsers fetch the
# wasm), wasm-opt -Oz from npm's binaryen, then the npm package around them: core/npm/'s Node
# entry (loads the wasm at import) and README, and a package.json. `npm pack core/pkg` makes the
# installable tarball (tests/js/package-install.test.mjs). Honours CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=lib/wasm.sh
source scripts/lib/wasm.sh
# shellcheck source=lib/files.sh
source scripts/lib/files.sh

# `--compile-only`: the cargo steps alone. `--package-only`: the rest, after a `--compile-only`
# run, with no cargo at all: scripts/build-worker.sh runs the two apart, the second beside the
# Worker's compile, where any cargo of its own would wait on the Worker's for cargo's lock.
mode=${1:-}

compile() {
  # Size first: opt-level "z" in one codegen unit (shipped_cargo, scripts/lib/wasm.sh: the
  # `dev` profile with `release`'s other settings, where the Worker is built too), aborting on
  # panic. These settings change every wasm32 crate's hash, so the package's and the Worker's
  # builds of them sit side by side and neither rebuilds the other; the build-time crates (syn,
  # serde_derive, alloy's `sol!`, wasm-bindgen's macros), compiled for the host at `dev`'s
  # settings whatever these say, are the ones the tests' and the Worker's builds compiled. Not
  # `lto` in the profile: cargo counts it in the build-time crates' hash too, and compiled all of
  # them again (about 60 s of CPU). Link-time optimisation is asked of rustc instead: every wasm32
  # crate keeps its LLVM bitcode (a target flag, which build-time crates do not get) and the
  # package's own crate, the only one `cargo rustc` passes arguments to, is linked with
  # `-C lto=fat`, which is what the profile's `lto = true` does.
  # Ed25519's field arithmetic stays at opt-level 3: at "z" a pass's check in Node took 430 µs,
  # against the 250 µs target (docs/bench/passes.md). The crates Cargo.toml optimises in the
  # tests' builds (`[profile.dev.package.NAME]`: secp256k1's, Keccak, SHA-256's...; read from it,
  # so that one added there is not missed here) are set back to "z": at 3 they made the package
  # 44,008 bytes larger. A package's setting outranks `build-override`, so the build-time crates
  # that use them (alloy's `sol!`) are compiled once more for this build.
  local -a size_first=()
  local crate
  for crate in $(sed -n 's/^\[profile\.dev\.package\.\([a-z0-9_-]*\)\]$/\1/p' Cargo.toml); do
    size_first+=(--config "profile.dev.package.$crate.opt-level=\"z\"")
  done
  size_first+=(
    --config 'profile.dev.panic="abort"'
    --config 'profile.dev.package.curve25519-dalek.opt-level=3'
    --config 'target.wasm32-unknown-unknown.rustflags=["-Cembed-bitcode=yes"]'
  )
  # Without RUSTFLAGS: cargo would put them in place of the target's flags, and the crates
  # compiled without bitcode could not be linked with LTO.
  (
    unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS
    shipped_cargo '"z"' 1 rustc --locked "${size_first[@]}" --target wasm32-unknown-unknown \
      -p kya-core-wasm -- -C lto=fat
  )
}
if [ "$mode" != --package-only ]; then
  ensure_wasm_tools
  compile
fi
if [ "$mode" = --compile-only ]; then
  exit 0
fi
out=core/pkg
bindgen_and_optimise -Oz "$(shipped_wasm kya_core_wasm)" "$out" kya_core
# wasm-bindgen declares `[Symbol.dispose](): void` on every exported class (KeyCache,
# NonceMemory), which only TypeScript's `esnext.disposable` lib types: a consumer on an ES2022
# lib with `skipLibCheck: false` failed to compile against the package. The declaration goes;
# the JavaScript still wires `Symbol.dispose` to `free` wherever the runtime has it. Edited only
# when present, so an up-to-date build rewrites nothing.
if grep -q '\[Symbol\.dispose\]' "$out/kya_core.d.ts"; then
  sed -i '/^ *\[Symbol\.dispose\](): void;$/d' "$out/kya_core.d.ts"
fi

for file in node.js changes.js changes.d.ts README.md; do
  install_if_changed "core/npm/$file" "$out/$file"
done

version=$(awk -F'"' '/^version = / { print $2; exit }' Cargo.toml)
# `exports`: Node gets the entry that instantiates the wasm at import; browsers and bundlers the
# plain module (call `init` once), `kya-core/changes` the change feed's iterator (plain JS, no
# wasm), and `kya-core/wasm` names the wasm file for a bundler to copy.
write_if_changed "$out/package.json" <<JSON
{
  "name": "kya-core",
  "version": "$version",
  "description": "KYA agent registry logic for web apps and Node: compliance and badges, KYA decisions, registry decoding, EIP-712 forward requests (wasm)",
  "license": "MIT",
  "type": "module",
  "main": "./node.js",
  "module": "./kya_core.js",
  "types": "./kya_core.d.ts",
  "exports": {
    ".": {
      "types": "./kya_core.d.ts",
      "node": "./node.js",
      "default": "./kya_core.js"
    },
    "./changes": {
      "types": "./changes.d.ts",
      "default": "./changes.js"
    },
    "./wasm": "./kya_core_bg.wasm",
    "./package.json": "./package.json"
  },
  "files": ["kya_core.js", "kya_core_bg.wasm", "kya_core.d.ts", "kya_core_bg.wasm.d.ts", "node.js", "changes.js", "changes.d.ts", "README.md"],
  "sideEffects": ["./node.js"]
}
JSON
echo "build-core-wasm: $out/ is up to date ($(wc -c < "$out/kya_core_bg.wasm") bytes of wasm)" >&2
