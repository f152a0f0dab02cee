# Sourced by scripts/bootstrap.sh: the wasm-bindgen CLI that turns the Worker's wasm into JS glue.
# It must be exactly the `wasm-bindgen` version in Cargo.lock (the CLI refuses any other schema),
# and it comes from the crates registry: worker-build's own download of it fails on these machines.
# Installed into the git-ignored .tools/ (about 6 minutes cold, instant once the version matches).
# shellcheck source=../lib/wasm.sh
source scripts/lib/wasm.sh
wasm_bindgen_version=$(locked_wasm_bindgen_version)
if [ "$(.tools/bin/wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $wasm_bindgen_version" ]; then
  log "installing wasm-bindgen-cli $wasm_bindgen_version into .tools/ (takes a few minutes)"
  # --locked first; its lockfile pins webpki-roots 1.0.11, which the registry we reach may not
  # serve (then a fresh resolution, which picks the newest compatible release, is used instead).
  # Only the `wasm-bindgen` binary, without the test runner's TLS stack (rustls and ring, built
  # from C): its output is byte for byte the full install's, and the install takes about a fifth
  # less (512 s against 645 s here, one run each on a loaded machine).
  cargo install --root .tools --locked wasm-bindgen-cli --version "$wasm_bindgen_version" \
      --no-default-features --bin wasm-bindgen \
    || cargo install --root .tools wasm-bindgen-cli --version "$wasm_bindgen_version" \
      --no-default-features --bin wasm-bindgen
fi
