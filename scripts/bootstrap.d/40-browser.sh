# shellcheck shell=bash
# Sourced by scripts/bootstrap.sh: Debian's Chromium for the explorer's browser test
# (tests/browser/, driven by the npm package playwright-core from package.json). Playwright's own
# browser download fails on these machines (TOOLCHAIN.md), so the distribution's build is used.
# Instant when /usr/bin/chromium is already there.
if [ ! -x /usr/bin/chromium ]; then
  log "installing Debian's chromium (headless browser for tests/browser/)"
  apt_install chromium
fi
