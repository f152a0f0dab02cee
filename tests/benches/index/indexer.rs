//! The indexer: its first fill (runs and wall time), its steady state with 10 and 100 agents
//! changed a minute (per run: wall time, CPU, RPC requests, D1 rows), and how long a write on
//! chain takes to show in answers.
//!
//! A minute of Base is simulated between runs: the writes, then 30 empty blocks 2 s apart
//! (`anvil_mine`), so each run follows a minute of blocks and re-scans a 64-block window that
//! covers the last two minutes, as in production. Without them anvil mines a block only per
//! write, and the window would reach back over dozens of runs' writes.

use std::time::{Duration, Instant};

use alloy::{
    network::TransactionBuilder,
    primitives::{Address, U256, keccak256},
    providers::Provider,
    rpc::types::TransactionRequest,
    sol_types::SolCall,
};
use kya_core::chain::abi::AgentRegistry;
use kya_devchain::{
    consent::{ConsentNonces, consent_deadline, sign_consents},
    dev_accounts::{self, Role},
};
use kya_tests::{edge_fixture::EdgeWorker, worker_profile::Profiler};
use serde_json::Value;

use crate::{Setup, cpu::Meter, timing::median};

/// Runs measured per steady-state rate, after one that settles the window.
const STEADY_RUNS: usize = 5;
/// Writes timed from the chain to an answer.
const FRESHNESS_WRITES: usize = 3;

/// The first fill at one `INDEX_AGENTS_PER_RUN`.
pub(crate) struct Fill {
    pub(crate) per_run: u64,
    pub(crate) runs: u64,
    pub(crate) wall: Duration,
    /// Median wall time of a run, and the median and the most CPU of one ([`crate::cpu`]).
    pub(crate) run_wall: Duration,
    pub(crate) run_cpu: Duration,
    pub(crate) run_cpu_max: Duration,
    /// The Worker's own CPU of one run in [`FILL_PROFILED_EVERY`] (the only run of a fill of
    /// one), from V8's profiler: median and most.
    pub(crate) run_worker_cpu: Duration,
    pub(crate) run_worker_cpu_max: Duration,
    /// RPC HTTP requests and JSON-RPC calls of the whole fill.
    pub(crate) rpc: (usize, usize),
    /// CPU of the Worker's runtimes and everything below them over the fill
    /// ([`crate::cpu::runtimes`]): the figure compared with Ponder's fill.
    pub(crate) tree_cpu: Duration,
}

/// Fill runs profiled: one in this many (the second among them: the first also compiles the
/// Worker's code in a fresh isolate). Profiling every run of a 100,000-agent fill through
/// wrangler's inspector made it 20 times slower.
const FILL_PROFILED_EVERY: u64 = 10;

/// Runs the index on `worker` (fresh) until its first fill is complete.
pub(crate) async fn fill(
    setup: &Setup,
    worker: &EdgeWorker,
    profiler: &mut Profiler,
    agents: u64,
    per_run: u64,
) -> Fill {
    let api = worker.client();
    let meter = Meter::attach(&worker.runtimes());
    let (requests, calls) = (setup.proxy.requests(), setup.proxy.calls());
    let tree_cpu = crate::cpu::runtimes(&worker.runtimes());
    let started = Instant::now();
    let (mut runs, mut walls, mut cpus, mut worker_cpus) = (0u64, Vec::new(), Vec::new(), Vec::new());
    loop {
        runs += 1;
        // A fill of one run has only the cold one to profile.
        let profiled = runs % FILL_PROFILED_EVERY == 2 || per_run >= agents;
        if profiled {
            profiler.start().await;
        }
        let (cpu, run_started) = (meter.now(), Instant::now());
        worker.run_index().await;
        walls.push(run_started.elapsed());
        cpus.push(meter.now() - cpu);
        if profiled {
            worker_cpus.push(profiler.stop().await.cpu());
        }
        // /health now and then: its own work (a rate-limit write to KV after it answers) is
        // left to end before the next run is measured.
        if runs % 10 == 0 || runs * per_run >= agents {
            let index = api.get("/health").await.body["index"].clone();
            assert_eq!(index["lastRun"]["ok"], true, "fill run {runs}: {index}");
            tokio::time::sleep(Duration::from_millis(150)).await;
            if index["complete"] == true {
                break;
            }
        }
    }
    let wall = started.elapsed();
    let tree_cpu = crate::cpu::runtimes(&worker.runtimes()) - tree_cpu;
    let rpc = (setup.proxy.requests() - requests, setup.proxy.calls() - calls);
    let run_cpu_max = cpus.iter().copied().max().unwrap_or_default();
    let run_worker_cpu_max = worker_cpus.iter().copied().max().unwrap_or_default();
    Fill {
        per_run,
        runs,
        wall,
        run_wall: median(walls),
        run_cpu: median(cpus),
        run_cpu_max,
        run_worker_cpu: median(worker_cpus),
        run_worker_cpu_max,
        rpc,
        tree_cpu,
    }
}

/// One steady-state rate, medians of its runs.
pub(crate) struct Steady {
    pub(crate) changes: u64,
    pub(crate) wall: Duration,
    /// CPU of a run, median and most ([`crate::cpu`]; the profiler's own work included).
    pub(crate) cpu: Duration,
    pub(crate) cpu_max: Duration,
    /// The Worker's own CPU of a run, from V8's profiler: median and most.
    pub(crate) worker_cpu: Duration,
    pub(crate) worker_cpu_max: Duration,
    /// RPC HTTP requests and JSON-RPC calls per run.
    pub(crate) rpc: (usize, usize),
    /// Rows the run wrote: table rows (agent rows superseded and inserted, superseded rows
    /// collected, and the state row, saved once with the run's outcome, the touches of the
    /// re-scanned window and the stream's cursor), and D1's own count.
    pub(crate) rows: Rows,
    /// Blocks the index was behind the chain's head after the run (median).
    pub(crate) lag: u64,
    pub(crate) message: String,
}

/// Rows one run wrote, by kind, counted in the tables after it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Rows {
    pub(crate) superseded: u64,
    pub(crate) inserted: u64,
    pub(crate) collected: u64,
    pub(crate) state: u64,
    /// What D1 reported written by the run (its log line): the table rows above, the index
    /// entries their writes changed, the tallies, the status counts and the change feed's
    /// batches, as D1 bills them.
    pub(crate) d1: u64,
}

impl Rows {
    /// The table rows counted in the tables.
    pub(crate) fn total(&self) -> u64 {
        self.superseded + self.inserted + self.collected + self.state
    }
}

/// [`STEADY_RUNS`] runs with `changes` agents written in each simulated minute before it.
pub(crate) async fn steady(
    setup: &Setup,
    worker: &EdgeWorker,
    profiler: &mut Profiler,
    agents: u64,
    changes: u64,
    seed: &mut u64,
) -> Steady {
    let meter = Meter::attach(&worker.runtimes());
    let (mut walls, mut cpus, mut worker_cpus, mut rpcs, mut all_rows, mut lags) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut message = String::new();
    for run in 0..=STEADY_RUNS {
        write_minute(setup, agents, changes, seed).await;
        let before = counts(worker);
        let (requests, calls) = (setup.proxy.requests(), setup.proxy.calls());
        profiler.start().await;
        let (cpu_before, started) = (meter.now(), Instant::now());
        worker.run_index().await;
        let wall = started.elapsed();
        let cpu = meter.now() - cpu_before;
        let profile = profiler.stop().await;
        profile.keep(&format!("steady-{agents}-{changes}-{run}"));
        let rpc = (setup.proxy.requests() - requests, setup.proxy.calls() - calls);
        let index = worker.client().get("/health").await.body["index"].clone();
        assert_eq!(index["lastRun"]["ok"], true, "steady run: {index}");
        message = index["lastRun"]["message"].as_str().unwrap_or_default().to_owned();
        let block = index["block"].as_u64().expect("a complete index");
        let after = counts(worker);
        let superseded =
            count(worker, &format!("SELECT count(*) AS n FROM agent_versions WHERE until = {block}"));
        let inserted = count(worker, &format!("SELECT count(*) AS n FROM agents WHERE since = {block}"));
        let rows = Rows {
            superseded,
            inserted,
            collected: (before.versions + superseded).saturating_sub(after.versions),
            state: 1,
            d1: worker.index_rows_written(block).await,
        };
        if run > 0 {
            lags.push(index["lagBlocks"].as_u64().unwrap_or(0));
            walls.push(wall);
            cpus.push(cpu);
            worker_cpus.push(profile.cpu());
            rpcs.push(rpc);
            all_rows.push(rows);
        }
    }
    let pick = |key: fn(&Rows) -> u64| median_u64(all_rows.iter().map(key).collect());
    rpcs.sort();
    Steady {
        changes,
        wall: median(walls),
        cpu_max: cpus.iter().copied().max().unwrap_or_default(),
        cpu: median(cpus),
        worker_cpu_max: worker_cpus.iter().copied().max().unwrap_or_default(),
        worker_cpu: median(worker_cpus),
        rpc: rpcs[rpcs.len() / 2],
        rows: Rows {
            superseded: pick(|rows| rows.superseded),
            inserted: pick(|rows| rows.inserted),
            collected: pick(|rows| rows.collected),
            d1: pick(|rows| rows.d1),
            state: 1,
        },
        lag: median_u64(lags),
        message,
    }
}

/// How long a write took to show in the answers at one rate of other writes.
pub(crate) struct Freshness {
    pub(crate) changes: u64,
    /// Runs until the write showed (one a simulated minute), `None` if not within
    /// [`FRESHNESS_RUNS`]; and the wall time from its receipt, medians of [`FRESHNESS_WRITES`].
    pub(crate) runs: Option<u64>,
    pub(crate) wall: Duration,
    /// `X-Index-Fallback` of an answer seen meanwhile, if any.
    pub(crate) fallback: Option<String>,
}

/// Runs at most waited for a write to show.
const FRESHNESS_RUNS: u64 = 5;

/// A registration's way to `/api/v1/stats`: the run follows at once (a Cron Trigger firing just
/// after the block), and while it has not shown, the minutes go on, `changes` writes each, a run
/// after each.
pub(crate) async fn freshness(
    setup: &Setup,
    worker: &EdgeWorker,
    agents: u64,
    changes: u64,
    seed: &mut u64,
) -> Freshness {
    let api = worker.client();
    let (mut runs_needed, mut walls, mut fallback) = (Vec::new(), Vec::new(), None);
    for n in 0..FRESHNESS_WRITES as u64 {
        let before = api.get("/api/v1/stats").await.body["totalAgents"].as_u64().expect("totalAgents");
        let creator = dev_accounts::address(Role::CreatorA);
        let scope = format!("freshness probe {changes} {n}");
        let wallet = dev_accounts::agent_wallet(10_000_000 + agents + changes * 10 + n);
        let register = AgentRegistry::registerAgentCall {
            haftungsperson: creator,
            agentWallet: wallet.address(),
            constitutionHash: keccak256(&scope),
            capabilityHash: keccak256(&scope),
            operationalScope: scope,
            parentAgentId: U256::ZERO,
            selfModifying: false,
        };
        // A fresh wallet consents at its first nonce; the creator is its own Haftungsperson.
        let chain = (setup.chain.chain_id(), setup.chain.registry());
        let deadline = consent_deadline(&setup.chain.chain).await.expect("the head's time");
        let register =
            sign_consents(register, creator, chain, ConsentNonces::default(), &[&wallet], deadline);
        setup.chain.chain.send(creator, setup.chain.registry(), &register).await.expect("registered");
        let written = Instant::now();
        let mut shown = None;
        for run in 1..=FRESHNESS_RUNS {
            if run > 1 {
                write_minute(setup, agents, changes, seed).await;
            }
            worker.run_index().await;
            let stats = api.get("/api/v1/stats").await;
            if let Some(why) = stats.header("x-index-fallback") {
                fallback.get_or_insert_with(|| why.to_owned());
            }
            if stats.body["totalAgents"].as_u64() == Some(before + 1)
                && stats.header("x-index-fallback").is_none()
            {
                shown = Some(run);
                break;
            }
        }
        walls.push(written.elapsed());
        runs_needed.push(shown);
    }
    runs_needed.sort();
    Freshness { changes, runs: runs_needed[runs_needed.len() / 2], wall: median(walls), fallback }
}

/// A simulated minute: `changes` writes to distinct Active agents (attestations, every tenth a
/// revenue report), then 30 empty blocks 2 s apart.
async fn write_minute(setup: &Setup, agents: u64, changes: u64, seed: &mut u64) {
    let registry = setup.chain.registry();
    let mut ids = std::collections::BTreeSet::new();
    while (ids.len() as u64) < changes {
        let id = next_random(seed) % agents + 1;
        // seed_bulk's suspended, revoked and terminated agents refuse writes.
        if ![7, 13, 29].contains(&(id % 50)) {
            ids.insert(id);
        }
    }
    let writes = ids.into_iter().enumerate().map(|(n, id)| {
        let agent_id = U256::from(id);
        let input = if n % 10 == 9 {
            AgentRegistry::reportRevenueCall {
                agentId: agent_id,
                amount: U256::from(100 + id),
                currency: "USD".into(),
                category: "compute".into(),
                periodStart: 0,
                periodEnd: 0,
            }
            .abi_encode()
        } else {
            AgentRegistry::attestComplianceCall { agentId: agent_id }.abi_encode()
        };
        TransactionRequest::default()
            .with_from(creator_of(id))
            .with_to(registry)
            .with_input(input)
            .with_gas_limit(400_000)
    });
    setup.chain.chain.send_in_blocks(writes, 70).await.expect("the minute's writes");
    let _: Value = setup
        .chain
        .chain
        .provider()
        .raw_request("anvil_mine".into(), ("0x1e", "0x2"))
        .await
        .expect("a minute of blocks");
}

/// The creator `seed_bulk` registered agent `id` with (one of three, by group of ten): it may
/// attest and report for it.
fn creator_of(id: u64) -> Address {
    let creators = [Role::CreatorA, Role::CreatorB, Role::CreatorC];
    dev_accounts::address(creators[((id - 1) / 10 % 3) as usize])
}

/// A xorshift step: the same agents every run of the benchmark.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

struct Counts {
    /// Superseded versions kept (`agent_versions`).
    versions: u64,
}

fn counts(worker: &EdgeWorker) -> Counts {
    let row = &worker.query_index("SELECT count(*) AS versions FROM agent_versions")[0];
    Counts { versions: row["versions"].as_u64().unwrap_or(0) }
}

fn count(worker: &EdgeWorker, sql: &str) -> u64 {
    worker.query_index(sql)[0]["n"].as_u64().unwrap_or(0)
}

fn median_u64(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    values[values.len() / 2]
}
