# shellcheck shell=bash
# Python eth-account in .tools/venv: an EIP-712 implementation independent of ours, which the
# relayer's end-to-end tests sign requests with (tests/signers/). Pinned in requirements.txt;
# a stamp of that file makes the second run instant.
signer_venv=.tools/venv
signer_requirements=tests/signers/requirements.txt
signer_stamp=$signer_venv/.kya-requirements-stamp
if [ "$(cat "$signer_stamp" 2>/dev/null)" != "$(sha256sum < "$signer_requirements" | cut -d' ' -f1)" ]; then
  log "installing the Python signer ($(tr '\n' ' ' < "$signer_requirements")) into $signer_venv"
  [ -x "$signer_venv/bin/python" ] || python3 -m venv "$signer_venv"
  "$signer_venv/bin/pip" install --quiet --disable-pip-version-check -r "$signer_requirements"
  sha256sum < "$signer_requirements" | cut -d' ' -f1 > "$signer_stamp"
fi
