//! The registry index against today's direct path, in one run per registry size: anvil with
//! the registry seeded by `seed_bulk`, the Worker under `wrangler dev` with local D1, behind a
//! JSON-RPC proxy that counts what the Worker asks the chain.
//!
//! `cargo bench -p kya-tests --bench index` (or `bash scripts/bench.sh`) writes one report per
//! size, `docs/bench/index-<agents>.md`. `BENCH_INDEX_AGENTS` lists the sizes (default `1000`;
//! the committed reports are `1000,10000`, about 20 minutes; `seed_bulk` stopped on a failed
//! transaction after about four minutes of seeding 100,000).
//! `BENCH_INDEX_PAID_PER_RUN` sets the larger run size of the second fill (default 2000).
//! Absolute times depend on the machine; compare the ratios within one report.

mod cpu;
mod d1;
mod endpoints;
mod indexer;
mod report;
mod timing;

use std::time::{Duration, Instant};

use kya_devchain::seed;
use kya_tests::{
    TestChain,
    edge_fixture::{CountingProxy, EdgeWorker, chain_vars},
};

/// The chain and the proxy every Worker of one size reads through.
pub(crate) struct Setup {
    pub(crate) chain: TestChain,
    pub(crate) proxy: CountingProxy,
}

/// Everything measured at one size.
pub(crate) struct Measured {
    pub(crate) agents: u64,
    pub(crate) seeding: Duration,
    pub(crate) load: String,
    pub(crate) fills: Vec<indexer::Fill>,
    pub(crate) storage: d1::Storage,
    pub(crate) endpoints: Vec<endpoints::Endpoint>,
    pub(crate) steady: Vec<indexer::Steady>,
    /// A write's way to the answers, at 10 and 100 other changes a minute.
    pub(crate) freshness: Vec<indexer::Freshness>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let sizes: Vec<u64> = std::env::var("BENCH_INDEX_AGENTS")
        .unwrap_or_else(|_| "1000".into())
        .split(',')
        .map(|size| size.trim().parse().expect("BENCH_INDEX_AGENTS: numbers"))
        .collect();
    let paid_per_run: u64 = std::env::var("BENCH_INDEX_PAID_PER_RUN")
        .ok()
        .map(|value| value.parse().expect("BENCH_INDEX_PAID_PER_RUN: a number"))
        .unwrap_or(2000);
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/bench");
    std::fs::create_dir_all(&folder).expect("docs/bench");
    for agents in sizes {
        let measured = measure(agents, paid_per_run).await;
        let text = report::render(&measured);
        print!("{text}");
        std::fs::write(folder.join(format!("index-{agents}.md")), text).expect("writing the report");
    }
}

async fn measure(agents: u64, paid_per_run: u64) -> Measured {
    let load = report::load();
    let chain = TestChain::start().await;
    let started = Instant::now();
    seed::seed_bulk(&chain.chain, &chain.deployment, agents).await.expect("bulk seed");
    let seeding = started.elapsed();
    eprintln!("{agents} agents seeded in {seeding:.1?}");
    let proxy = CountingProxy::start(&chain.rpc_url()).await;
    let setup = Setup { chain, proxy };

    let mut vars = chain_vars(&setup.proxy.url, setup.chain.registry());
    // Every answer reads D1: nothing cached in the isolate or the Cache API.
    vars.extend([("INDEX_ANSWER_TTL_SECS", "0".to_owned()), ("MEMORY_CACHE_BYTES", "0".to_owned())]);
    let worker = EdgeWorker::start_indexed(&vars).await;
    let mut fills = vec![indexer::fill(&setup, &worker, agents, kya_edge_defaults::AGENTS_PER_RUN).await];
    eprintln!("{agents}: filled in {} runs", fills[0].runs);
    let storage = d1::storage(&worker, agents);
    let endpoints = endpoints::measure(&setup, &worker, agents).await;
    eprintln!("{agents}: endpoints measured");
    let mut seed = 0x9e37_79b9_7f4a_7c15;
    let (mut steady, mut freshness) = (Vec::new(), Vec::new());
    for changes in [10, 100] {
        steady.push(indexer::steady(&setup, &worker, agents, changes, &mut seed).await);
        freshness.push(indexer::freshness(&setup, &worker, agents, changes, &mut seed).await);
    }
    drop(worker);

    let mut paid_vars = chain_vars(&setup.proxy.url, setup.chain.registry());
    paid_vars.push(("INDEX_AGENTS_PER_RUN", paid_per_run.to_string()));
    let paid = EdgeWorker::start_indexed(&paid_vars).await;
    fills.push(indexer::fill(&setup, &paid, agents, paid_per_run).await);
    Measured { agents, seeding, load, fills, storage, endpoints, steady, freshness }
}

/// The Worker's defaults the benchmark runs with (`edge-api/src/config.rs`).
mod kya_edge_defaults {
    /// `INDEX_AGENTS_PER_RUN`'s default.
    pub(crate) const AGENTS_PER_RUN: u64 = 200;
}
