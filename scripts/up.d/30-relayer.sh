# shellcheck shell=bash
# The gasless relayer on RELAYER_PORT (default 3001) against the local chain, paying gas from
# RELAYER_KEY of .devchain/env (anvil's funded account 9), with its Prometheus metrics on
# METRICS_PORT (default 9464, loopback only). One daemon on an SQLite store, which starts empty
# with the chain, since every `scripts/up.sh` deploys a fresh chain; with DATABASE_URL set in the
# environment, on that PostgreSQL database instead (more daemons can then join it with their own
# RELAYER_ID and ports: docs/relayer.md, "Running a cluster").
cargo build --locked -p kya-relayer
relayer_port=${RELAYER_PORT:-3001}
metrics_port=${METRICS_PORT:-9464}
rm -f .devchain/relayer.db .devchain/relayer.db-wal .devchain/relayer.db-shm
start_service "relayer" env RELAYER_PORT="$relayer_port" METRICS_PORT="$metrics_port" RELAYER_DB=.devchain/relayer.db target/debug/kya-relayer
wait_until 60 "the relayer" curl -fsS "http://127.0.0.1:$relayer_port/status"
summary+=("relayer    http://127.0.0.1:$relayer_port (POST /relay; GET /status, /nonce/:address, /domain; metrics on http://127.0.0.1:$metrics_port/metrics), wallet $(curl -fsS "http://127.0.0.1:$relayer_port/status" | sed -n 's/.*"relayer":"\(0x[0-9a-fA-F]*\)".*/\1/p')")
