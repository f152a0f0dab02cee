//! The registry index against today's direct path, in one run per registry size: anvil with
//! the registry seeded by `seed_bulk`, the Worker under `wrangler dev` with local D1, behind a
//! JSON-RPC proxy that counts what the Worker asks the chain.
//!
//! `cargo bench -p kya-tests --bench index` (or `bash scripts/bench.sh`) writes one report per
//! size, `docs/bench/index-<agents>.md`. `BENCH_INDEX_AGENTS` lists the sizes (default `1000`;
//! the committed reports are `1000,10000,100000`: each report gives the time its size took).
//! `BENCH_INDEX_PAID_PER_RUN` sets the larger run size of the second fill (default 2000).
//! Each size also runs Ponder (`../shared/peer-ponder/`, installed into `target/peer-ponder/`)
//! on the same chain: its fill, and the endpoints cold on both servers, each restarted before
//! each sample (`side_by_side.rs`); `BENCH_INDEX_PONDER=0` leaves it out. `BENCH_INDEX_ONLY=cold`
//! measures only our cold answers after the first fill, and prints them (`cold_only.rs`);
//! `BENCH_INDEX_ONLY=profile`, only the endpoints' Worker CPU split by part (`profile_only.rs`).
//! Absolute times depend on the machine; compare the ratios within one report.

mod cold_only;
mod cpu;
mod d1;
mod direct;
mod endpoints;
mod indexer;
mod ponder;
mod profile_only;
mod reference;
mod report;
mod side_by_side;
mod timing;
mod worker_cpu;

use std::time::{Duration, Instant};

use alloy::providers::Provider;

use kya_devchain::{AnvilOptions, seed};
use kya_tests::{
    TestChain,
    edge_fixture::{CountingProxy, EdgeWorker, chain_vars},
    worker_profile::Profiler,
};
use reference::Reference;

/// The chain and the proxy every Worker of one size reads through.
pub(crate) struct Setup {
    pub(crate) chain: TestChain,
    pub(crate) proxy: CountingProxy,
}

/// Everything measured at one size.
pub(crate) struct Measured {
    /// The commit measured ([`report::commit`]), read when the size started.
    pub(crate) commit: String,
    pub(crate) agents: u64,
    pub(crate) seeding: Duration,
    /// The whole size, seeding included.
    pub(crate) took: Duration,
    pub(crate) load: String,
    pub(crate) fills: Vec<indexer::Fill>,
    pub(crate) storage: d1::Storage,
    pub(crate) endpoints: Vec<endpoints::Endpoint>,
    pub(crate) steady: Vec<indexer::Steady>,
    /// A write's way to the answers, at 10 and 100 other changes a minute.
    pub(crate) freshness: Vec<indexer::Freshness>,
    /// Ours and Ponder side by side, unless `BENCH_INDEX_PONDER=0`.
    pub(crate) ponder: Option<side_by_side::SideBySide>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // The profiles of the Worker's CPU attach to wrangler's DevTools inspector.
    kya_tests::edge_fixture::open_inspectors();
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
        let report_file = folder.join(format!("index-{agents}.md"));
        let Some(measured) = measure(agents, paid_per_run, &report_file).await else { continue };
        let text = report::render(&measured);
        print!("{text}");
        std::fs::write(&report_file, text).expect("writing the report");
    }
}

/// Writes what one size measured so far: a size takes up to hours, and a failure in its last
/// part (the second fill) must not lose the side by side before it. The full report replaces it.
fn write_interim(report_file: &std::path::Path, measured: &Measured) {
    std::fs::write(report_file, report::render(measured)).expect("writing the interim report");
    eprintln!("{}: interim report written", measured.agents);
}

/// What one size measured; `None` when only the cold answers ([`cold_only`]) or only the
/// endpoints' Worker CPU ([`profile_only`]) were asked for.
async fn measure(agents: u64, paid_per_run: u64, report_file: &std::path::Path) -> Option<Measured> {
    let commit = report::commit();
    let load = report::load();
    let started = Instant::now();
    let setup = seeded_setup(agents).await;
    let seeding = started.elapsed();
    let mut worker = uncached_worker(&setup).await;
    let mut profiler = Profiler::attach(worker.inspector_port()).await;
    let fills =
        vec![indexer::fill(&setup, &worker, &mut profiler, agents, kya_edge_defaults::AGENTS_PER_RUN).await];
    eprintln!("{agents}: filled in {} runs ({:.1?} in all)", fills[0].runs, started.elapsed());
    if cold_only::enabled() {
        drop(profiler);
        cold_only::measure(&mut worker, agents).await;
        return None;
    }
    // Beside a larger size, the 1,000-agent registry its endpoints' Worker CPU is compared with.
    let mut reference = if agents > reference::AGENTS { Some(Reference::start().await) } else { None };
    if profile_only::enabled() {
        profile_only::measure(&worker, &mut profiler, agents, reference.as_mut()).await;
        return None;
    }
    let storage = d1::storage(&worker, agents);
    let endpoints = endpoints::measure(&setup, &worker, &mut profiler, agents, reference.as_mut()).await;
    drop(reference);
    eprintln!("{agents}: endpoints measured ({:.1?} in all)", started.elapsed());
    let mut seed = 0x9e37_79b9_7f4a_7c15;
    let (mut steady, mut freshness) = (Vec::new(), Vec::new());
    for changes in [10, 100] {
        steady.push(indexer::steady(&setup, &worker, &mut profiler, agents, changes, &mut seed).await);
        freshness.push(indexer::freshness(&setup, &worker, agents, changes, &mut seed).await);
        eprintln!("{agents}: {changes} changes a minute measured ({:.1?} in all)", started.elapsed());
    }
    drop(profiler);
    let ponder = if side_by_side::enabled() {
        let compared = side_by_side::measure(&setup, &mut worker, agents).await;
        eprintln!("{agents}: Ponder side by side measured ({:.1?} in all)", started.elapsed());
        Some(compared)
    } else {
        None
    };
    drop(worker);
    let mut measured = Measured {
        commit,
        agents,
        seeding,
        took: started.elapsed(),
        load,
        fills,
        storage,
        endpoints,
        steady,
        freshness,
        ponder,
    };
    write_interim(report_file, &measured);

    let mut paid_vars = chain_vars(&setup.proxy.url, setup.chain.registry());
    paid_vars.push(("INDEX_AGENTS_PER_RUN", paid_per_run.to_string()));
    let paid = EdgeWorker::start_indexed(&paid_vars).await;
    let mut paid_profiler = Profiler::attach(paid.inspector_port()).await;
    measured.fills.push(indexer::fill(&setup, &paid, &mut paid_profiler, agents, paid_per_run).await);
    measured.took = started.elapsed();
    eprintln!("{agents}: done in {:.1?}", measured.took);
    Some(measured)
}

/// A chain seeded with `agents` by `seed_bulk`, the quiet window after, and the counting proxy.
pub(crate) async fn seeded_setup(agents: u64) -> Setup {
    let started = Instant::now();
    let chain =
        TestChain::start_with(&AnvilOptions { states_kept: Some(STATES_KEPT), ..AnvilOptions::default() })
            .await;
    seed::seed_bulk(&chain.chain, &chain.deployment, agents).await.expect("bulk seed");
    eprintln!("{agents} agents seeded in {:.1?}", started.elapsed());
    quiet_window(&chain).await;
    let proxy = CountingProxy::start(&chain.rpc_url()).await;
    Setup { chain, proxy }
}

/// A Worker of `setup`'s registry, its index not run yet, whose every answer reads D1: nothing
/// cached in the isolate or the Cache API.
pub(crate) async fn uncached_worker(setup: &Setup) -> EdgeWorker {
    let mut vars = chain_vars(&setup.proxy.url, setup.chain.registry());
    vars.extend([("INDEX_ANSWER_TTL_SECS", "0".to_owned()), ("MEMORY_CACHE_BYTES", "0".to_owned())]);
    EdgeWorker::start_indexed(&vars).await
}

/// Blocks whose state anvil keeps: reads older than that fail. Every read of the benchmark is at
/// the head or at most a simulated minute (31 blocks) before it; a copy of the state per block
/// is about 170 MB at 100,000 agents.
const STATES_KEPT: u32 = 32;

/// Mines `INDEX_REORG_WINDOW` + 1 empty blocks 2 s apart, so the window the first fill's runs
/// re-scan holds no seeding logs. `seed_bulk` packs its writes into few large blocks (100,000
/// agents: about 210,000 logs in 112 blocks); each run would fetch all those in its window with
/// `eth_getLogs`, where a first fill on Base sees two minutes of ordinary traffic.
async fn quiet_window(chain: &TestChain) {
    let blocks = format!("{:#x}", kya_edge_defaults::REORG_WINDOW + 1);
    let _: serde_json::Value = chain
        .chain
        .provider()
        .raw_request("anvil_mine".into(), (blocks, "0x2"))
        .await
        .expect("a quiet window");
}

/// The Worker's defaults the benchmark runs with (`edge-api/src/config.rs`).
pub(crate) mod kya_edge_defaults {
    /// `INDEX_AGENTS_PER_RUN`'s default.
    pub(crate) const AGENTS_PER_RUN: u64 = 200;
    /// `INDEX_REORG_WINDOW`'s default.
    pub(crate) const REORG_WINDOW: u64 = 64;
}
