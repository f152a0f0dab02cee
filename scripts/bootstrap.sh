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

# The Worker and the browser package build for wasm. RUSTUP_AUTO_INSTALL=0 is set on these
# machines, so a rust-toolchain file alone would not install the target: add it explicitly.
if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  log "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

# Parts named *.background.sh build on the CPU (the wasm-bindgen CLI from source, minutes of it
# on a fresh machine): they start first and run while the others wait on the network (npm, apt,
# pip); the bootstrap waits for them at its end, and fails if one failed.
background=()
for part in scripts/bootstrap.d/*.background.sh; do
  [ -e "$part" ] || continue
  # shellcheck source=/dev/null
  ( source "$part" ) &
  background+=("$!:$part")
done

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

# Further installs, one file per concern (wasm tools, Python signers, browsers, ...), in name order.
for part in scripts/bootstrap.d/*.sh; do
  [ -e "$part" ] || continue
  [[ $part == *.background.sh ]] && continue
  # shellcheck source=/dev/null
  source "$part"
done

for job in "${background[@]}"; do
  if ! wait "${job%%:*}"; then
    log "${job#*:} failed"
    exit 1
  fi
done
