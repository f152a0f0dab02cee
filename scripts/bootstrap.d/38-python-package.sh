# shellcheck shell=bash
# Sourced by scripts/bootstrap.sh after 30-python-signer.sh (which creates .tools/venv): the
# tools of the Python package's tests (python/tests/, run by tests/it/python_package.rs), pinned
# in python/tests/requirements.txt: pytest, httpx and requests (the agent's auths are tested
# with both), mypy (the type stubs, checked on the examples with --strict), and fastapi and
# uvicorn (the FastAPI dependency, and the example provider run under uvicorn), and maturin (the
# build backend: the test builds the package's wheel and installs it, as `pip install ./python`
# does). A stamp of that file makes the second run instant.
package_venv=.tools/venv
package_requirements=python/tests/requirements.txt
package_stamp=$package_venv/.kya-python-package-stamp
if [ "$(cat "$package_stamp" 2>/dev/null)" != "$(sha256sum < "$package_requirements" | cut -d' ' -f1)" ]; then
  log "installing the Python package's test tools ($(tr '\n' ' ' < "$package_requirements")) into $package_venv"
  venv_install "$package_venv" "$package_requirements"
  sha256sum < "$package_requirements" | cut -d' ' -f1 > "$package_stamp"
fi
