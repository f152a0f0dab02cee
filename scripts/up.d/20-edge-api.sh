# shellcheck shell=bash
# The edge API Worker under `wrangler dev` on PORT (default 3000, as SPEC.md says) against the
# local chain, offline (no telemetry, no Cloudflare calls). Its Cache API, KV and D1 state start
# empty: every `scripts/up.sh` deploys a fresh chain at the same addresses, so old cached answers
# would otherwise describe the previous chain. The registry index's tables are created by the
# project's migrations (edge-api/migrations/). Its pacer (a Durable Object) runs the index every
# INDEX_INTERVAL_SECS (wrangler.toml: 2); the scheduled handler, its watchdog, is called once a
# minute through --test-scheduled, as the Cron Trigger would.
bash scripts/build-worker.sh
edge_port=${PORT:-3000}
# The KYA pass signing key: made once, kept in a git-ignored dotenv file that wrangler reads as
# the secret PASS_SIGNING_KEYS (docs/passes.md).
pass_env=.devchain/pass.env
target/debug/kya-devchain pass-keys --file "$pass_env"
rm -rf .wrangler/state
export WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false CLOUDFLARE_CF_FETCH_ENABLED=false
CI=true node_modules/.bin/wrangler d1 migrations apply INDEX --local --persist-to .wrangler/state >/dev/null

# wrangler stops cleanly (with workerd) on SIGINT; up.sh stops services with SIGTERM, so this
# wrapper turns one into the other.
run_edge_api() {
  node_modules/.bin/wrangler dev --ip 127.0.0.1 --port "$edge_port" --persist-to .wrangler/state \
    --test-scheduled --env-file "$pass_env" \
    --var "RPC_URL:$RPC_URL" --var "REGISTRY_ADDRESS:$REGISTRY_ADDRESS" </dev/null &
  local wrangler=$!
  trap 'kill -INT "$wrangler" 2>/dev/null; wait "$wrangler"' TERM
  wait "$wrangler"
}
start_service "edge API" run_edge_api
wait_until 90 "the edge API" curl -fsS "http://127.0.0.1:$edge_port/health"

# The index's watchdog: what the Cron Trigger does in a deployment, once a minute (the first
# call sets the pacer's alarm, which then runs the index at the chain's pace).
run_index() {
  # Ends at once on the SIGTERM of up.sh's stop (or a Ctrl-C): the pause runs in the background
  # so that the trap is not held up behind it.
  trap 'exit 0' TERM INT
  while true; do
    curl -fsS -o /dev/null "http://127.0.0.1:$edge_port/__scheduled?cron=*+*+*+*+*" || true
    sleep 60 &
    wait $!
  done
}
start_service "index runs" run_index
summary+=("edge API   http://127.0.0.1:$edge_port (GET /health, /api/v1/stats, /agents, /agent/:id, /kya/:wallet, ...)")
summary+=("index      D1 under wrangler dev, run every 2 s by its Durable Object pacer (GET /health shows it)")
summary+=("explorer   http://127.0.0.1:$edge_port/ (the registry explorer page, served with the Worker)")
summary+=("passes     http://127.0.0.1:$edge_port/api/v1/kya/:wallet/pass, keys at /.well-known/jwks.json (signing key in $pass_env)")
