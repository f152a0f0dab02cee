# shellcheck shell=bash
# Sourced by scripts/bootstrap.sh after 30-python-signer.sh (which creates .tools/venv): the
# OpenAPI tools of the contract tests (tests/it/openapi/), pinned in
# tests/openapi-tools/requirements.txt:
# openapi-spec-validator (a standard validator of both documents), Schemathesis (fuzzes both
# services from their documents) and eth-utils (its hooks checksum the wallets it makes up). A
# stamp of that file makes the second run instant.
openapi_venv=.tools/venv
openapi_requirements=tests/openapi-tools/requirements.txt
openapi_stamp=$openapi_venv/.kya-openapi-stamp
if [ "$(cat "$openapi_stamp" 2>/dev/null)" != "$(sha256sum < "$openapi_requirements" | cut -d' ' -f1)" ]; then
  log "installing the OpenAPI tools ($(tr '\n' ' ' < "$openapi_requirements")) into $openapi_venv"
  venv_install "$openapi_venv" "$openapi_requirements"
  sha256sum < "$openapi_requirements" | cut -d' ' -f1 > "$openapi_stamp"
fi
