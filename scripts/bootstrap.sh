#!/usr/bin/env bash
# Installs what the project needs into project-local, git-ignored folders (node_modules/, .tools/).
# Idempotent: each step checks a stamp or a version first, so a second run takes seconds.
# Both README commands (scripts/up.sh and scripts/test.sh) start with it.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'bootstrap: %s\n' "$*" >&2; }

# Installs Debian packages quietly, through sudo when not root (the steps in bootstrap.d/ that
# need a system package call it after checking the package is missing).
apt_install() {
  local apt_get=(apt-get)
  if [ "$(id -u)" -ne 0 ]; then
    apt_get=(sudo apt-get)
  fi
  "${apt_get[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive "${apt_get[@]}" install -y -qq --no-install-recommends "$@" >/dev/null
}

# Installs the pinned requirements file $2 into the venv $1. `--no-compile`: pip otherwise
# compiles every module it installs to bytecode (3,010 files for the tools here: the three
# installs took 38 to 40 s of CPU with it and 30 to 31 without, beside the tests' build);
# Python compiles the modules a test imports when it first does (714 of them), and keeps them.
venv_install() {
  "$1/bin/pip" install --quiet --disable-pip-version-check --no-compile -r "$2"
}

# The Rust toolchain's parts: clippy (scripts/test.sh lints through clippy-driver) and rustfmt.
for component in clippy rustfmt; do
  if ! rustup component list --installed | grep -q "^$component"; then
    log "adding the toolchain's $component"
    rustup component add "$component"
  fi
done

# The Worker and the browser package build for wasm. RUSTUP_AUTO_INSTALL=0 is set on these
# machines, so a rust-toolchain file alone would not install the target: add it explicitly.
if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  log "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

# `--toolchain`: only the toolchain's parts, all a cargo build of the workspace needs before it
# starts: scripts/test.sh builds while the rest, the npm packages first, installs beside it.
if [ "${1:-}" = "--toolchain" ]; then
  exit 0
fi

# npm packages (solc-js, OpenZeppelin sources, anvil, wrangler, ...) at the locked versions.
# `npm ci` refused this lockfile when it lacked entries for the other platforms' optional
# binaries (anvil-darwin-*, ...), which the registry we reach lists, so `npm install` (which keeps
# the locked versions) is used. The lockfile carries those entries as `npm install` writes them,
# so a fresh clone's install leaves the tree clean.
lock_stamp=node_modules/.kya-lock-stamp
lock_hash() { cat package.json package-lock.json | sha256sum | cut -d' ' -f1; }
if [ "$(cat "$lock_stamp" 2>/dev/null)" != "$(lock_hash)" ]; then
  log "installing npm packages from package-lock.json"
  npm install --no-audit --no-fund --loglevel=error
  lock_hash > "$lock_stamp"
fi
# The packages are in place: a build that scripts/test.sh started beside this install may read
# them now. It holds node_modules/.kya-npm-install.lock (flock) on the descriptor it names here,
# and the relayer's build script, which embeds Swagger UI from one of them, waits on that lock
# (relayer-daemon/build.rs).
if [ -n "${KYA_NPM_LOCK_FD:-}" ]; then
  flock --unlock "$KYA_NPM_LOCK_FD"
fi

# Further installs, one file per concern (Python signers, browsers, PostgreSQL, ...), in name order.
for part in scripts/bootstrap.d/*.sh; do
  [ -e "$part" ] || continue
  # shellcheck source=/dev/null
  source "$part"
done

