#!/usr/bin/env bash
# Runs every test of the project, installing what it needs first (scripts/bootstrap.sh).
# This is the README's test command and exactly what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*" >&2; }

bash scripts/bootstrap.sh

step "contract artifacts match the Solidity sources"
node contracts/compile.mjs --check

step "formatting"
cargo fmt --all --check

step "clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "clippy of kya-core's browser bindings (feature browser, wasm32)"
cargo clippy -p kya-core --features browser --target wasm32-unknown-unknown --locked -- -D warnings

# kya-core is compiled for wasm32 by the Worker's release build and, as the browser package's
# cdylib, by build-explorer.sh (both in build-worker.sh below); a debug build here would only
# compile it a fourth time. What is checked here is what no build shows: its dependencies.
step "kya-core has no I/O dependency on wasm32"
io_crates=$(cargo tree -p kya-core --target wasm32-unknown-unknown -e normal --prefix none --locked \
  | sed 's/ .*//' | sort -u \
  | grep -xE 'tokio|mio|socket2|hyper|reqwest|worker|web-sys|js-sys|wasm-bindgen-futures|getrandom' || true)
if [ -n "$io_crates" ]; then
  echo "kya-core must not depend on I/O crates, found: $io_crates" >&2
  exit 1
fi

step "unit, property and end-to-end tests"
bash scripts/build-worker.sh  # the edge API tests run the built Worker under wrangler dev
# Three test threads on these two-core machines: most end-to-end tests wait (on anvil's blocks,
# wrangler dev, PostgreSQL, the relayer's timers) more than they compute, so two threads left
# the cores idle for much of the run. Three, not four: four edge API tests at once (anvil,
# wrangler dev, node each) can want more than two cores (docs/testing.md, "How long it takes").
# Under a watchdog: a test that hangs fails the run within ten minutes, naming itself and the
# processes it left, where it would otherwise hold the run until CI's limit and say nothing.
python3 scripts/lib/watch_tests.py --quiet-limit 600 -- \
  cargo test --workspace --locked -- --test-threads=3
