#!/usr/bin/env bash
# The Python package's benchmark (issue 64's targets), written to docs/bench/python.md:
# `kya._core.verify_pass` against the native `kya_core::pass::verify_pass` and PyJWT with
# `cryptography` (OpenSSL) on the same pass, and signing an ERC-8128 request in Python against
# the native signer, in one run (bench/benches/python.rs, bench/python/bench_kya.py).
#
# The module is built in release by cargo, not maturin: the `module` example makes cargo build
# kya-python's lib, whose cdylib is `deps/lib_core.so`, laid out here beside a copy of
# python/kya/*.py as `kya/_core.abi3.so`, as the wheel lays it out (tests/it/python_package.rs
# does the same with the test command's debug build). PyJWT and cryptography, pinned in
# bench/python/requirements.txt, go into .tools/venv (made by scripts/bootstrap.sh): the test
# command never needs them. Compare the ratios, measured in one run: the machines are noisy.
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=.tools/venv
if [ ! -x "$venv/bin/python" ]; then
  echo "$venv is missing: run scripts/bootstrap.sh first" >&2
  exit 1
fi
requirements=bench/python/requirements.txt
stamp=$venv/.kya-python-bench-stamp
if [ "$(cat "$stamp" 2>/dev/null)" != "$(sha256sum < "$requirements" | cut -d' ' -f1)" ]; then
  printf '==> installing %s into %s\n' "$(tr '\n' ' ' < "$requirements")" "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-compile -r "$requirements"
  sha256sum < "$requirements" | cut -d' ' -f1 > "$stamp"
fi

printf '==> the extension module, release\n' >&2
cargo build --release --locked -p kya-python --example module
module="${CARGO_TARGET_DIR:-target}/release/deps/lib_core.so"

package=$(mktemp -d)
trap 'rm -rf "$package"' EXIT
mkdir "$package/kya"
cp python/kya/*.py python/kya/*.pyi python/kya/py.typed "$package/kya/"
cp "$module" "$package/kya/_core.abi3.so"

printf '==> Python against native and PyJWT\n' >&2
KYA_BENCH_PYTHON_PACKAGE="$package" KYA_BENCH_PYTHON="$PWD/$venv/bin/python" \
  cargo bench --locked -p kya-bench --bench python
