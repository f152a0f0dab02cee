# Sourced by scripts/bootstrap.sh: the wasm-bindgen CLI that turns the Worker's wasm into JS glue.
# It must be exactly the `wasm-bindgen` version in Cargo.lock (the CLI refuses any other schema),
# and it comes from the crates registry: worker-build's own download of it fails on these machines.
# Installed into the git-ignored .tools/ (minutes cold, instant once the version matches).
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
  # At opt-level 1 (CARGO_PROFILE_RELEASE_OPT_LEVEL, which overrides the release profile): this
  # build is most of a cold CI run's bootstrap, and the CLI's output is the same
  # bytes as at opt-level 3 (checked on the Worker and the browser package; 0.8 s a run, not 0.65).
  CARGO_PROFILE_RELEASE_OPT_LEVEL=1 cargo install --root .tools --locked wasm-bindgen-cli --version "$wasm_bindgen_version" \
      --no-default-features --bin wasm-bindgen \
    || CARGO_PROFILE_RELEASE_OPT_LEVEL=1 cargo install --root .tools wasm-bindgen-cli --version "$wasm_bindgen_version" \
      --no-default-features --bin wasm-bindgen
fi
