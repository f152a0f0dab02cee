# Shared steps of the wasm builds (scripts/build-worker.sh, scripts/build-core-wasm.sh); sourced.

# The wasm-bindgen CLI is the workspace's own front to its library (tools/wasm-bindgen/: built
# with the tests' dependencies, at the wasm-bindgen crate's version by construction); binaryen's
# wasm-opt comes from npm (scripts/bootstrap.sh). Builds the one (seconds once built) and
# installs the other if it is missing. $wasm_bindgen is the CLI's path.
# `--workspace --bin`, not `-p`: cargo unifies the dependencies' features over the packages a
# command selects, so `-p kya-wasm-bindgen` alone wanted about 25 of them (serde, syn, clap,
# walrus...) with other features than the workspace's test build had compiled, and compiled them
# again: 31 s and 57 s of CPU right after that test build, with scripts/test.sh's first part of
# the tests waiting on cargo's lock meanwhile. Over the workspace, only the CLI's own crate is
# left to build (1.7 s).
wasm_bindgen="${CARGO_TARGET_DIR:-target}/debug/kya-wasm-bindgen"
ensure_wasm_tools() {
  if [ ! -x node_modules/.bin/wasm-opt ]; then
    bash scripts/bootstrap.sh
  fi
  cargo build --locked --quiet --workspace --bin kya-wasm-bindgen
}

# shipped_cargo OPT_LEVEL CODEGEN_UNITS COMMAND ARGS...: `cargo COMMAND ARGS` (build, rustc) for a
# shipped wasm32 build (the Worker, the browser package, the benches' wasm): the crates for wasm32
# at OPT_LEVEL in CODEGEN_UNITS units, with `release`'s other settings (no debug info, assertions
# or overflow checks, no incremental caches), and rustc itself even when the caller lints the
# workspace through clippy-driver (scripts/test.sh exports it as RUSTC_WORKSPACE_WRAPPER):
# clippy-driver lowers MIR optimisation, and what ships is optimised as released.
# On cargo's `dev` profile, not `release`: cargo keeps each profile's build-time crates (syn,
# serde_derive, wasm-bindgen's and `worker`'s macros, the proc-macros' own dependencies, every
# build script) in a folder named after the profile, `target/debug/` for `dev`, so a `release`
# build compiled them all again beside the tests' build. On `dev`, with the build-time crates
# left at `dev`'s settings (`build-override`: opt-level 0, assertions and overflow checks on;
# Cargo.toml's `[profile.dev.package."*"]` turns both off for the dependencies among them, in
# this build and the tests' alike), their hashes are the tests' build's and cargo reuses them
# (docs/testing.md, "Stop 59's runs"). Those settings reach only what runs at build time:
# nothing of them ships.
shipped_cargo() {
  local opt_level=$1 codegen_units=$2 command=$3
  shift 3
  env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS cargo "$command" \
    --config "profile.dev.opt-level=$opt_level" \
    --config "profile.dev.codegen-units=$codegen_units" \
    --config 'profile.dev.debug=false' \
    --config 'profile.dev.debug-assertions=false' \
    --config 'profile.dev.overflow-checks=false' \
    --config 'profile.dev.incremental=false' \
    --config 'profile.dev.build-override.opt-level=0' \
    --config 'profile.dev.build-override.debug-assertions=true' \
    --config 'profile.dev.build-override.overflow-checks=true' \
    "$@"
}

# Where shipped_cargo leaves the wasm32 crate named $1 (kya_edge_api): `dev`'s folder.
shipped_wasm() {
  printf '%s/wasm32-unknown-unknown/debug/%s.wasm' "${CARGO_TARGET_DIR:-target}" "$1"
}

# bindgen_and_optimise LEVEL COMPILED OUT_DIR OUT_NAME [wasm-bindgen flags...]: wasm-bindgen's
# `--target web` glue for COMPILED into OUT_DIR, then binaryen's wasm-opt at LEVEL (-O1, -Oz)
# on the wasm. Skipped when COMPILED and LEVEL have not changed since the last run.
# WASM_KEEP_NAMES=1 keeps the functions' names (a CPU profile then names them; a larger wasm).
bindgen_and_optimise() {
  local level=$1 compiled=$2 out=$3 name=$4
  shift 4
  local stamp="$out/.compiled.sha256" digest keep_names=()
  digest="$(sha256sum "$compiled" | cut -d' ' -f1) opt=$level names=${WASM_KEEP_NAMES:-0}"
  if [ "$(cat "$stamp" 2>/dev/null)" = "$digest" ] && [ -f "$out/${name}_bg.wasm" ]; then
    return 0
  fi
  if [ "${WASM_KEEP_NAMES:-0}" = 1 ]; then
    keep_names=(-g)
  fi
  mkdir -p "$out"
  "$wasm_bindgen" --target web --out-dir "$out" --out-name "$name" "$@" "$compiled"
  node_modules/.bin/wasm-opt "$level" "${keep_names[@]}" --enable-bulk-memory --enable-nontrapping-float-to-int \
    --enable-sign-ext --enable-mutable-globals --enable-reference-types --enable-multivalue \
    "$out/${name}_bg.wasm" -o "$out/${name}_bg.wasm"
  printf '%s\n' "$digest" > "$stamp"
}
