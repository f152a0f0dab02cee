# Shared steps of the wasm builds (scripts/build-worker.sh, scripts/build-core-wasm.sh); sourced.

# The wasm-bindgen crate's version in Cargo.lock: the CLI must be exactly this version.
locked_wasm_bindgen_version() {
  awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock
}

# Installs the pinned wasm-bindgen CLI and binaryen (scripts/bootstrap.sh) if either is missing
# or the CLI's version differs from the wasm-bindgen crate in Cargo.lock (they must match).
ensure_wasm_tools() {
  local version
  version=$(locked_wasm_bindgen_version)
  if [ "$(.tools/bin/wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $version" ] \
    || [ ! -x node_modules/.bin/wasm-opt ]; then
    bash scripts/bootstrap.sh
  fi
}

# bindgen_and_optimise COMPILED OUT_DIR OUT_NAME [wasm-bindgen flags...]: wasm-bindgen's
# `--target web` glue for COMPILED into OUT_DIR, then binaryen's wasm-opt -Oz on the wasm.
# Skipped when COMPILED has not changed since the last run (wasm-opt takes up to ~20 s).
# WASM_KEEP_NAMES=1 keeps the functions' names (a CPU profile then names them; a larger wasm).
bindgen_and_optimise() {
  local compiled=$1 out=$2 name=$3
  shift 3
  local stamp="$out/.compiled.sha256" digest keep_names=()
  digest="$(sha256sum "$compiled" | cut -d' ' -f1) names=${WASM_KEEP_NAMES:-0}"
  if [ "$(cat "$stamp" 2>/dev/null)" = "$digest" ] && [ -f "$out/${name}_bg.wasm" ]; then
    return 0
  fi
  if [ "${WASM_KEEP_NAMES:-0}" = 1 ]; then
    keep_names=(-g)
  fi
  mkdir -p "$out"
  .tools/bin/wasm-bindgen --target web --out-dir "$out" --out-name "$name" "$@" "$compiled"
  node_modules/.bin/wasm-opt -Oz "${keep_names[@]}" --enable-bulk-memory --enable-nontrapping-float-to-int \
    --enable-sign-ext --enable-mutable-globals --enable-reference-types --enable-multivalue \
    "$out/${name}_bg.wasm" -o "$out/${name}_bg.wasm"
  printf '%s\n' "$digest" > "$stamp"
}
