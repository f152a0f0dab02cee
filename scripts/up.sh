#!/usr/bin/env bash
# Brings the whole system up locally: anvil (chain id 84532) with the forwarder and the registry
# deployed and demo data seeded, then every service of scripts/up.d/ (in name order) against it.
# Prints where everything is; Ctrl-C stops everything it started. This is the README's run command.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/bootstrap.sh
cargo build --locked -p kya-devchain

env_file=.devchain/env
rm -f "$env_file"
pids=()
summary=()
stop_all() {
  trap - EXIT INT TERM
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_all EXIT
trap 'exit 130' INT TERM

# start_service NAME COMMAND...: runs COMMAND in the background; it is stopped (SIGTERM to its
# process id) when this script ends.
start_service() {
  local name=$1; shift
  "$@" &
  pids+=($!)
  echo "up: started $name (pid $!)" >&2
}

# wait_until SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.2 s until it succeeds.
wait_until() {
  local seconds=$1 what=$2; shift 2
  local tries=$((seconds * 5))
  for _ in $(seq 1 "$tries"); do
    "$@" >/dev/null 2>&1 && return 0
    for pid in "${pids[@]}"; do
      kill -0 "$pid" 2>/dev/null || { echo "up: a service exited while waiting for $what" >&2; exit 1; }
    done
    sleep 0.2
  done
  echo "up: $what not ready within $seconds s" >&2
  exit 1
}

start_service "local chain" target/debug/kya-devchain up --port "${CHAIN_PORT:-8545}" --env-file "$env_file"
# The env file is written last, once the chain is deployed and seeded.
wait_until 120 "the local chain" test -f "$env_file"
set -a
# shellcheck source=/dev/null
source "$env_file"
set +a
summary+=("chain      $RPC_URL (chain id $CHAIN_ID), registry $REGISTRY_ADDRESS, forwarder $FORWARDER_ADDRESS")

for part in scripts/up.d/*.sh; do
  [ -e "$part" ] || continue
  # shellcheck source=/dev/null
  source "$part"
done

echo
echo "The local system is up (settings in $env_file):"
printf '  %s\n' "${summary[@]}"
echo "Ctrl-C stops everything."
wait "${pids[@]}"
