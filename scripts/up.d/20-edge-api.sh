# shellcheck shell=bash
# The edge API Worker under `wrangler dev` on PORT (default 3000, as SPEC.md says) against the
# local chain, offline (no telemetry, no Cloudflare calls). Its Cache API and KV state start
# empty: every `scripts/up.sh` deploys a fresh chain at the same addresses, so old cached answers
# would otherwise describe the previous chain.
bash scripts/build-worker.sh
edge_port=${PORT:-3000}
rm -rf .wrangler/state

# wrangler stops cleanly (with workerd) on SIGINT; up.sh stops services with SIGTERM, so this
# wrapper turns one into the other.
run_edge_api() {
  WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false CLOUDFLARE_CF_FETCH_ENABLED=false \
    node_modules/.bin/wrangler dev --ip 127.0.0.1 --port "$edge_port" --persist-to .wrangler/state \
    --var "RPC_URL:$RPC_URL" --var "REGISTRY_ADDRESS:$REGISTRY_ADDRESS" </dev/null &
  local wrangler=$!
  trap 'kill -INT "$wrangler" 2>/dev/null; wait "$wrangler"' TERM
  wait "$wrangler"
}
start_service "edge API" run_edge_api
wait_until 90 "the edge API" curl -fsS "http://127.0.0.1:$edge_port/health"
summary+=("edge API   http://127.0.0.1:$edge_port (GET /health, /api/v1/stats, /agents, /agent/:id, /kya/:wallet, ...)")
summary+=("explorer   http://127.0.0.1:$edge_port/ (the registry explorer page, served with the Worker)")
