#!/usr/bin/env bash
# Reruns the benchmarks and rewrites their reports in docs/bench/:
#   core.md           kya-core's read path, CPU per request (cargo bench -p kya-bench --bench read_path)
#   wasm.md           the same cases natively and as wasm in V8, in one run: what the Worker's
#                     wasm costs (cargo bench -p kya-bench --bench wasm_factor)
#   system-<N>.md     latency of the running system on loopback: anvil seeded with N agents, the
#                     Worker under wrangler dev, the relayer (cargo bench -p kya-tests --bench system)
#   rpc-cost.md       RPC round trips and billed calls per endpoint, with and without Multicall3,
#                     at 1,000 and 10,000 agents (cargo bench -p kya-tests --bench rpc_cost)
#   index-<N>.md      the registry index against the direct path at N agents: the five endpoints
#                     cold (time, CPU, D1 rows), the indexer's first fill and steady state, a
#                     write's way to the answers, and Ponder (../shared/peer-ponder, installed
#                     into target/peer-ponder by npm ci) side by side on the same chain: both
#                     fills and the endpoints cold, each server restarted before each sample
#                     (cargo bench -p kya-tests --bench index; BENCH_INDEX_PONDER=0 leaves Ponder
#                     out); the cost model in docs/index-cost.md is built on these reports
#   compliance-<N>.md GET /api/v1/agents/compliance from the index alone at N agents: the Worker's
#                     CPU by function, first and last byte; builds side by side with
#                     BENCH_COMPLIANCE_BUILDS (cargo bench -p kya-tests --bench compliance, the
#                     Worker built with WASM_KEEP_NAMES=1; BENCH_COMPLIANCE_AGENTS, default 10000)
#   relayer-cluster.md relays per second accepted and mined by 1, 2 and 4 relayer daemons with 1
#                     and 4 keys on PostgreSQL, and one daemon on SQLite, on anvil mining a block
#                     a second, with on-chain checks per row (cargo bench -p kya-tests --bench cluster)
#   verify.md         POST /api/v1/kya/verify against GET /api/v1/kya/:wallet, cold and warm: time,
#                     RPC round trips, the Worker's CPU with the nonce store's Durable Object apart
#                     (cargo bench -p kya-tests --bench verify, the Worker built with WASM_KEEP_NAMES=1)
#   passes.md         a KYA pass verified offline: natively, as wasm in Node, and by npm jose in the
#                     same Node (cargo bench -p kya-bench --bench passes)
#   python.md         the Python package: a pass verified by kya._core.verify_pass against the native
#                     check and PyJWT with cryptography, a request signed in Python against the native
#                     signer, in one run (bash bench/python/run.sh: the module built in release)
#   pass-issuing.md   the Worker's CPU for a pass over the /kya it signs, and for a batch of 100 over
#                     100 /kya answers (cargo bench -p kya-tests --bench pass_issuing)
#   change-stream.md  GET /api/v1/changes/stream with 1, 100 and 1,000 listeners: D1 rows read,
#                     latency to each listener (cargo bench -p kya-tests --bench stream)
#   point-answers-<N>.md /kya, a pass and a batch from the index at N agents against the chain 50 ms
#                     away: RPC requests, wall time, the Worker's CPU by layer and function, and a
#                     grace period change's runs (cargo bench -p kya-tests --bench point_answers,
#                     the Worker built with WASM_KEEP_NAMES=1; BENCH_POINT_AGENTS, default 100000:
#                     about 45 minutes)
# BENCH_AGENTS=N sets the registry size of the system benchmark (default 1000; 10000 takes a
# minute more to seed). BENCH_INDEX_AGENTS lists the index benchmark's sizes (default 1000; the
# committed reports are 1000, 10000 and 100000: about 5, 5 and 33 minutes without Ponder, the
# last with 8 of seeding and about 6 GB for anvil; Ponder's fill adds about 4 minutes at 10000).
# Compare ratios within one run: machines here are noisy.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/bootstrap.sh

printf '\n==> kya-core read path\n' >&2
cargo bench -p kya-bench --locked --bench read_path
printf '\n==> kya-core read path, wasm against native\n' >&2
cargo bench -p kya-bench --locked --bench wasm_factor
printf '\n==> the system on loopback (%s agents)\n' "${BENCH_AGENTS:-1000}" >&2
cargo bench -p kya-tests --locked --bench system
printf '\n==> RPC cost per endpoint (%s agents)\n' "${BENCH_RPC_AGENTS:-1000,10000}" >&2
cargo bench -p kya-tests --locked --bench rpc_cost
printf '\n==> the registry index against the direct path (%s agents)\n' "${BENCH_INDEX_AGENTS:-1000}" >&2
cargo bench -p kya-tests --locked --bench index
printf '\n==> /agents/compliance from the index (%s agents)\n' "${BENCH_COMPLIANCE_AGENTS:-10000}" >&2
WASM_KEEP_NAMES=1 cargo bench -p kya-tests --locked --bench compliance
printf '\n==> the relayer cluster (%s relays a row)\n' "${BENCH_CLUSTER_RELAYS:-200}" >&2
cargo bench -p kya-tests --locked --bench cluster
printf '\n==> ERC-8128 verification against a KYA read\n' >&2
# The wasm's function names let the profiles tell the nonce store's Durable Object from the Worker.
WASM_KEEP_NAMES=1 cargo bench -p kya-tests --locked --bench verify
printf '\n==> KYA passes: verifying offline, and issuing\n' >&2
cargo bench -p kya-bench --locked --bench passes
cargo bench -p kya-tests --locked --bench pass_issuing
printf '\n==> The Python package against native and PyJWT\n' >&2
bash bench/python/run.sh
printf '\n==> The change feed stream with 1, 100 and 1,000 listeners\n' >&2
cargo bench -p kya-tests --locked --bench stream
printf '\n==> Point answers from the index (%s agents)\n' "${BENCH_POINT_AGENTS:-100000}" >&2
WASM_KEEP_NAMES=1 cargo bench -p kya-tests --locked --bench point_answers
