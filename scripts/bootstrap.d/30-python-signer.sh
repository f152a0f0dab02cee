# shellcheck shell=bash
# Python eth-account in .tools/venv: an EIP-712 implementation independent of ours, which the
# relayer's end-to-end tests sign requests with (tests/signers/). Pinned in requirements.txt;
# a stamp of that file makes the second run instant.
signer_venv=.tools/venv
signer_requirements=tests/signers/requirements.txt
signer_stamp=$signer_venv/.kya-requirements-stamp
if [ "$(cat "$signer_stamp" 2>/dev/null)" != "$(sha256sum < "$signer_requirements" | cut -d' ' -f1)" ]; then
  log "installing the Python signer ($(tr '\n' ' ' < "$signer_requirements")) into $signer_venv"
  if [ ! -x "$signer_venv/bin/pip" ]; then
    rm -rf "$signer_venv"
    # Debian's own python3 ships venv (with ensurepip) as a separate package.
    if ! python3 -m venv "$signer_venv" 2>/dev/null; then
      log "python3 cannot create a venv; installing Debian's python3-venv"
      rm -rf "$signer_venv"
      apt_install python3-venv
      python3 -m venv "$signer_venv"
    fi
  fi
  venv_install "$signer_venv" "$signer_requirements"
  sha256sum < "$signer_requirements" | cut -d' ' -f1 > "$signer_stamp"
fi
