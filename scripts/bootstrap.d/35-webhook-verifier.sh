# shellcheck shell=bash
# Python standardwebhooks in .tools/venv (made by 30-python-signer.sh): an implementation of
# Standard Webhooks independent of ours, which the relayer's webhook tests verify every delivery
# with (tests/webhooks/). Pinned in requirements.txt; a stamp of that file makes the second run
# instant.
webhook_venv=.tools/venv
webhook_requirements=tests/webhooks/requirements.txt
webhook_stamp=$webhook_venv/.kya-webhooks-stamp
if [ "$(cat "$webhook_stamp" 2>/dev/null)" != "$(sha256sum < "$webhook_requirements" | cut -d' ' -f1)" ]; then
  log "installing the webhook verifier ($(tr '\n' ' ' < "$webhook_requirements")) into $webhook_venv"
  venv_install "$webhook_venv" "$webhook_requirements"
  sha256sum < "$webhook_requirements" | cut -d' ' -f1 > "$webhook_stamp"
fi
