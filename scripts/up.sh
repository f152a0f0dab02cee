#!/usr/bin/env bash
# Brings the whole system up locally: anvil (chain id 84532) with the forwarder and the registry
# deployed and demo data seeded. Prints where everything is; Ctrl-C stops everything it started.
# This is the README's run command.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/bootstrap.sh
cargo build --locked -p kya-devchain

env_file=.devchain/env
rm -f "$env_file"
pids=()
stop_all() {
  trap - EXIT INT TERM
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_all EXIT
trap 'exit 130' INT TERM

target/debug/kya-devchain up --port "${CHAIN_PORT:-8545}" --env-file "$env_file" &
pids+=($!)

# The env file is written last, once the chain is deployed and seeded.
for _ in $(seq 1 600); do
  [ -f "$env_file" ] && break
  kill -0 "${pids[0]}" 2>/dev/null || { echo "up: the local chain failed to start" >&2; exit 1; }
  sleep 0.2
done
[ -f "$env_file" ] || { echo "up: the local chain did not come up within 120 s" >&2; exit 1; }

echo
echo "The local system is up (settings in $env_file). Ctrl-C stops it."
wait "${pids[@]}"
