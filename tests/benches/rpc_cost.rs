//! What each endpoint costs at the RPC provider, per cold request: HTTP requests and billed
//! JSON-RPC calls (hosted providers bill and throttle per call; Infura bills every call of a
//! batch), with Multicall3 and without it, on registries of 1,000 and 10,000 agents.
//!
//! `cargo bench -p kya-tests --bench rpc_cost` (or `bash scripts/bench.sh`) writes
//! `docs/bench/rpc-cost.md`. `BENCH_RPC_AGENTS` lists the registry sizes (default `1000,10000`).
//! Counts, not times: they are exact and the same on every machine.

use std::fmt::Write as _;

use kya_devchain::seed;
use kya_tests::{
    TestChain,
    edge_fixture::{CountingProxy, EdgeWorker, chain_vars},
};

/// The two ways the Worker reads: through Multicall3 (the default) and without (what it did
/// before Multicall3, and still does where a chain has none).
const MODES: [(&str, Option<&str>); 2] = [("Multicall3", None), ("without Multicall3", Some(""))];

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let sizes: Vec<u64> = std::env::var("BENCH_RPC_AGENTS")
        .unwrap_or_else(|_| "1000,10000".into())
        .split(',')
        .map(|size| size.trim().parse().expect("BENCH_RPC_AGENTS: numbers"))
        .collect();
    let mut report = String::from(
        "# RPC cost per cold request\n\n\
         Measured by `cargo bench -p kya-tests --bench rpc_cost` (tests/benches/rpc_cost.rs): the \
         Worker under `wrangler dev` behind a loopback proxy that counts HTTP requests and the \
         JSON-RPC calls inside them (billed calls), against anvil seeded by `seed_bulk`. Each cell \
         is the first request of a fresh Worker (cold caches). The five endpoints computed from the \
         registry snapshot share one read of it; the table gives that read once.\n\n\
         Through Multicall3 every answer takes one sequential round trip (lineage one per level), \
         and the snapshot two: `nextAgentId` with the first 199 agents, then the rest at that \
         block. A round's calls go in HTTP requests of at most 1.5 MiB (anvil refuses bodies over \
         2 MB, geth over 5 MB), sent side by side: so a large snapshot is 2 round trips made of \
         more HTTP requests.\n\n\
         Without Multicall3 the Worker makes exactly the requests it made before Multicall3 was \
         added (a pinned block, then `eth_call`s at it in batches of `RPC_BATCH_SIZE` = 500), so \
         that column is also the before-figure.\n",
    );
    for agents in sizes {
        report.push_str(&measure(agents).await);
    }
    print!("{report}");
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/bench");
    std::fs::create_dir_all(&folder).expect("docs/bench");
    std::fs::write(folder.join("rpc-cost.md"), report).expect("writing the report");
}

async fn measure(agents: u64) -> String {
    let chain = TestChain::start().await;
    seed::seed_bulk(&chain.chain, &chain.deployment, agents).await.expect("bulk seed");
    let proxy = CountingProxy::start(&chain.rpc_url()).await;
    let probe = EdgeWorker::start(&chain_vars(&chain.rpc_url(), chain.registry())).await;
    let wallet =
        probe.client().get(&format!("/api/v1/agent/{}", agents / 2 + 1)).await.body["agent"]["agentWallet"]
            .as_str()
            .expect("an agent wallet")
            .to_owned();
    drop(probe);
    let endpoints = [
        (
            "the registry snapshot (`/stats`, `/stats/detailed`, `/agents`, `/agents/compliance`, `/revenue/aggregate`)",
            "/api/v1/stats/detailed".to_owned(),
        ),
        ("`/agent/:id`", format!("/api/v1/agent/{}", agents / 3 + 2)),
        ("`/agent/:id/revenue`", "/api/v1/agent/3/revenue".to_owned()),
        ("`/kya/:wallet`", format!("/api/v1/kya/{wallet}")),
        ("`/kya/:wallet`, no agent", "/api/v1/kya/0x000000000000000000000000000000000000dEaD".to_owned()),
        ("`/agent/1/lineage` (4 levels)", "/api/v1/agent/1/lineage".to_owned()),
    ];
    let mut rows: Vec<Vec<(usize, usize)>> = vec![Vec::new(); endpoints.len()];
    for (_, multicall) in MODES {
        let mut vars = chain_vars(&proxy.url, chain.registry());
        if let Some(address) = multicall {
            vars.push(("MULTICALL_ADDRESS", address.to_owned()));
        }
        for (row, (_, path)) in rows.iter_mut().zip(&endpoints) {
            // A fresh Worker per endpoint: cold Cache API, nothing learnt.
            let worker = EdgeWorker::start(&vars).await;
            let (requests, calls) = (proxy.requests(), proxy.calls());
            let answer = worker.client().get(path).await;
            assert_eq!(answer.status, 200, "{path}: {}", answer.body);
            row.push((proxy.requests() - requests, proxy.calls() - calls));
        }
    }
    let mut table = format!(
        "\n## {agents} agents\n\n\
         | Endpoint | Multicall3: HTTP requests | Multicall3: billed calls | without: HTTP requests | without: billed calls |\n\
         |---|---:|---:|---:|---:|\n"
    );
    for ((what, _), row) in endpoints.iter().zip(&rows) {
        writeln!(table, "| {what} | {} | {} | {} | {} |", row[0].0, row[0].1, row[1].0, row[1].1)
            .expect("writing to a String");
    }
    let snapshot = rows[0][0];
    writeln!(
        table,
        "\nThrough Multicall3 the snapshot takes {} HTTP requests in 2 round trips and {} billed calls: {:.2}% of the agent count.",
        snapshot.0,
        snapshot.1,
        snapshot.1 as f64 * 100.0 / agents as f64
    )
    .expect("writing to a String");
    table
}
