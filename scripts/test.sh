#!/usr/bin/env bash
# Runs every test of the project, installing what it needs first (scripts/bootstrap.sh).
# This is the README's test command and exactly what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
# No test reads its input, and what CI hands a run as its input is not ours: a run there failed
# when the `rustc -` of a cargo that one test started (scripts/build-worker.sh) compiled, as its
# source, the words Chromium's launcher prints in another test. How they reached it is not
# known; the one input both had in common was the run's. From here on, every process of the run
# inherits an empty input, and no descriptor opened while it was closed can take its number.
exec </dev/null

step() { printf '\n==> %s\n' "$*" >&2; }
# Waits for the background job $1, prints its log $2, and stops the run if it failed, saying
# that $3 failed.
await_job() {
  local status=0
  wait "$1" || status=$?
  cat "$2" >&2
  if [ "$status" -ne 0 ]; then
    echo "$3 failed (exit $status): its words (the compiler's, clippy's) are above" >&2
    exit "$status"
  fi
}

# Clippy lints every crate of the workspace while cargo compiles its tests, rather than in a
# `cargo clippy` run of its own: clippy-driver is rustc with the lints added (what `cargo clippy`
# puts in RUSTC_WORKSPACE_WRAPPER, with its arguments in CLIPPY_ARGS), so one compilation of the
# workspace both lints it and builds it, where a separate `cargo clippy` type-checked the
# workspace and every dependency once more (about 200 s of a cold run). The same lints and
# targets as `cargo clippy --workspace --all-targets -- -D warnings`, and the browser package's
# bindings too (kya-tests turns on kya-core's `browser` feature; their wasm32 build is the
# package's own, in build-worker.sh), where a `cargo clippy` of its own for wasm32 type-checked
# kya-core's dependencies once more (about 50 s). Exported, so the test run and the scripts the
# tests call build with the same compiler and reuse these artifacts; the shipped builds for
# wasm32 (scripts/lib/wasm.sh's shipped_cargo) leave it out: clippy-driver also lowers MIR
# optimisation, which the shipped Worker and package keep. They reuse this build's build-time
# crates (proc-macros, build scripts) instead.
# The workspace compiles (minutes of CPU) while the bootstrap waits on the network (npm, apt,
# pip): it needs only the toolchain, the bootstrap's first step, and, in the relayer's build
# script, the npm packages (it embeds Swagger UI from one). That script waits on
# node_modules/.kya-npm-install.lock (relayer-daemon/build.rs), held here from before the build
# starts until the bootstrap has the packages in place (it unlocks the descriptor named in
# KYA_NPM_LOCK_FD): build scripts run seconds into a build, the install takes 15 to 30.
bash scripts/bootstrap.sh --toolchain
mkdir -p node_modules
exec {npm_lock}>node_modules/.kya-npm-install.lock
flock "$npm_lock"
# No incremental compilation: every crate here is compiled once, from nothing, and writing the
# incremental caches of the workspace's crates only costs time. A developer's own `cargo test`
# keeps them (it rebuilds the workspace's crates anyway: the wrapper below differs).
export CARGO_INCREMENTAL=0
export RUSTC_WORKSPACE_WRAPPER
RUSTC_WORKSPACE_WRAPPER=$(rustup which clippy-driver)
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
step "building every target, with clippy's lints (warnings are errors), beside the bootstrap"
build_log=$(mktemp)
cargo test --workspace --all-targets --locked --no-run >"$build_log" 2>&1 {npm_lock}>&- &
build=$!
# A failed bootstrap stops the build it ran beside.
trap 'kill "$build" 2>/dev/null || true; rm -f "$build_log"' EXIT
KYA_NPM_LOCK_FD=$npm_lock bash scripts/bootstrap.sh
exec {npm_lock}>&-
await_job "$build" "$build_log" "building the tests"

step "contract artifacts match the Solidity sources"
node contracts/compile.mjs --check

step "formatting"
cargo fmt --all --check

# kya-core is compiled for wasm32 by the Worker's build and, in the browser package's
# cdylib (core/wasm/), by build-explorer.sh (both in build-worker.sh below); a debug build here would only
# compile it a fourth time. What is checked here is what no build shows: its dependencies.
step "kya-core has no I/O dependency on wasm32"
io_crates=$(cargo tree -p kya-core --target wasm32-unknown-unknown -e normal --prefix none --locked \
  | sed 's/ .*//' | sort -u \
  | grep -xE 'tokio|mio|socket2|hyper|reqwest|worker|web-sys|js-sys|wasm-bindgen-futures|getrandom' || true)
if [ -n "$io_crates" ]; then
  echo "kya-core must not depend on I/O crates, found: $io_crates" >&2
  exit 1
fi

# Every test runs once, in one of two parts split by name. The tests of `needs_wasm` start the
# Worker or use the browser package; every other test (the crates' unit and property tests, the
# relayer's and the contracts' end-to-end tests) runs while the Worker and the package build.
# Those end-to-end tests mostly wait (on anvil's blocks, the relayer's timers, PostgreSQL), so
# beside the wasm builds, which leave a core idle in their one-threaded steps (wasm-opt, the
# package's LTO), they cost the builds little and take their own minutes off the run
# (docs/testing.md, "How long it takes"). Both parts run the same test binaries with complementary
# filters, so no test is left out; a test of the first part that would build the wasm fails,
# naming this list (KYA_WASM_BUILDING, tests/lib.rs's `run_script`).
# Three test threads on these two-core machines: most end-to-end tests wait more than they
# compute, so two threads left the cores idle for much of the run. Three, not four: four edge
# API tests at once (anvil, wrangler dev, node each) can want more than two cores.
# Under a watchdog: a test that hangs fails the run within ten minutes, naming itself and the
# processes it left, where it would otherwise hold the run until CI's limit and say nothing.
# `python_package::` needs no wasm, but builds the Python wheel with maturin, whose cargo build of
# pyo3 (with its own features and environment) makes the next cargo build of the workspace build
# pyo3 again: it runs here, after the run's last cargo build.
needs_wasm=(edge_api:: browser:: core_package:: cli:: openapi::edge:: relayer::registry_rules:: python_package::)
watched() { python3 scripts/lib/watch_tests.py --quiet-limit 600 -- "$@"; }
failed=()

step "the Worker and the browser package, beside the tests that need neither"
worker_log=$(mktemp)
bash scripts/build-worker.sh >"$worker_log" 2>&1 &
worker=$!
trap 'kill "$worker" 2>/dev/null || true; rm -f "$build_log" "$worker_log"' EXIT
skips=()
for name in "${needs_wasm[@]}"; do skips+=(--skip "$name"); done
# `--lib --bins --tests`, the targets the build above compiled in test mode, and the doc tests
# apart (cargo takes `--doc` alone): a bare `cargo test` also builds the examples again, outside
# test mode (the build above compiled and linted them in it), about 26 s of compiling. The doc
# tests pass the Worker's crate by, a cdylib alone (edge-api/Cargo.toml says why).
KYA_WASM_BUILDING=1 watched cargo test --workspace --locked --lib --bins --tests -- --test-threads=3 "${skips[@]}" \
  || failed+=("the tests that need no wasm")
cargo test --workspace --locked --doc || failed+=("the doc tests")
await_job "$worker" "$worker_log" "building the Worker or the browser package"

step "the tests of the Worker and the browser package"
# Longest first: libtest starts tests in the order of their names, and the three longest (the
# stream's crowd, every provider shape, Schemathesis: about 150, 100 and 70 s on a busy machine)
# sort late, so in one process they started last and ended the part alone. They run one after
# another from the start in a test process of their own (a lane), beside the rest on two
# threads: three tests at once, each once (the rest skip them). More at once was faster (five:
# the rest on three threads and two lanes, 237 s against 283 here) but not sound: two fresh
# clones in a row failed in this part, the explorer's Chromium never closing in one and the
# crowd's request for the feed timing out in the other (docs/testing.md, "Stop 61's runs").
longest=(edge_api::stream_crowd:: edge_api::providers::every_endpoint_ openapi::edge:: python_package::)
skip_longest=()
for name in "${longest[@]}"; do skip_longest+=(--skip "$name"); done
# Both built just now from this tree: the tests' fixtures run no build script of their own
# (tests/lib.rs's `ensure_built`; the test of an up-to-date build still runs them).
export KYA_WASM_BUILT=1
longest_log=$(mktemp)
trap 'kill "${longest_tests:-}" 2>/dev/null || true; rm -f "$build_log" "$worker_log" "$longest_log"' EXIT
watched cargo test --workspace --locked --lib --bins --tests -- \
  --test-threads=1 "${longest[@]}" >"$longest_log" 2>&1 &
longest_tests=$!
watched cargo test --workspace --locked --lib --bins --tests -- \
  --test-threads=2 "${needs_wasm[@]}" "${skip_longest[@]}" \
  || failed+=("the tests of the Worker and the browser package")
wait "$longest_tests" || failed+=("the longest tests of the Worker")
echo "==> the longest tests of the Worker, beside the rest" >&2
cat "$longest_log" >&2

if [ "${#failed[@]}" -ne 0 ]; then
  printf 'failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
