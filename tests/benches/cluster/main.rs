//! Relays per second accepted and mined by a cluster of relayer daemons (issue 18): 1, 2 and 4
//! daemons on one PostgreSQL database, with 1 and 4 keys, and one daemon on SQLite, on one anvil
//! mining a block a second; with request→mined percentiles and, per row, checks on the chain
//! that every accepted relay registered its agent exactly once and that no key's nonces have a
//! gap.
//!
//! `cargo bench -p kya-tests --bench cluster` (or `bash scripts/bench.sh`) prints the report and
//! writes it to `docs/bench/relayer-cluster.md`. Settings:
//! - `BENCH_CLUSTER_RELAYS`: relays per row (default 200), each from a signer of its own;
//! - `BENCH_CLUSTER_CONFIGS`: the rows, `store:daemons:keys` comma-separated (default the eight
//!   of issue 18: `sqlite:1:1,sqlite:1:4,postgres:1:1,…,postgres:4:4`);
//! - `BENCH_CLUSTER_CONCURRENCY`: `POST /relay` requests in flight (default 128: with the node
//!   50 ms away a relay spends about a second before its send, its checks' round trips and the
//!   cores' queue, so by Little's law 64 in flight offered four daemons at most about 56 a second
//!   while their four keys' locks were busy only about two thirds of the time (at `5165ecf`); 32
//!   held four daemons back in an earlier trial);
//! - `BENCH_CLUSTER_CLIENTS`: distinct client addresses the requests come from (default one
//!   per relay: a crowd of agents; 1: every request from one client, whose relays each check of
//!   its budget share and rate window then counts, so a row's work grows with its length), named
//!   in `X-Forwarded-For` by the bench, which the daemons trust as their load balancer;
//! - `BENCH_CLUSTER_POLL_MS`, `BENCH_CLUSTER_POLLS_IN_FLIGHT`: how often each accepted relay is
//!   read (default kya-client's `RELAY_POLL`, 250 ms) and how many reads run at once (default 16);
//! - `BENCH_CLUSTER_SETTLE_SECS`: how long after the last answer the relays may take to end
//!   (default 90);
//! - `BENCH_CLUSTER_RPC_DELAY_MS`: round trips added to every RPC call of the daemons, by a
//!   delay proxy on loopback in front of anvil (`kya_tests::delay_proxy`), comma-separated; every
//!   configuration runs at each (default `50,0`: a hosted provider in the daemons' region, then
//!   anvil on loopback). The bench's own reads and checks go to anvil directly;
//! - `BENCH_CLUSTER_LOGS`: a folder to write every daemon's log to (`<row>-<daemon id>.log`);
//! - `BENCH_CLUSTER_PG_STATEMENTS`: a folder to write each PostgreSQL row's statement counts
//!   to (see statements.rs);
//! - `BENCH_CLUSTER_ROUNDS`: how many times each configuration is measured (default 1), the
//!   configurations one after another, round after round; each row is then the median round
//!   (rounds.rs says why), and every round is listed.
//!
//! The default run takes about ten minutes on two cores, after the build.

mod chain;
mod checks;
mod cpu;
mod daemons;
mod figures;
mod load;
mod plan;
mod reading;
mod report;
mod rounds;
mod sends;
mod statements;

use std::time::{Duration, Instant};

use kya_tests::{
    TestChain,
    delay_proxy::DelayProxy,
    relayer_fixture::{TestStore, signed_registrations},
};

use crate::{daemons::Cluster, plan::Configuration};

/// Everything measured for one row.
pub(crate) struct Measured {
    pub(crate) configuration: Configuration,
    pub(crate) figures: figures::Figures,
    pub(crate) checks: checks::Checks,
    pub(crate) logs: daemons::Logs,
    /// The lanes' holders as the daemons' `/status` named them, in words.
    pub(crate) holders: String,
    /// Whether the daemons named different holders: the keys were leased.
    pub(crate) leased: bool,
    /// The row's wall time, from starting its daemons to their exit.
    pub(crate) took: Duration,
    /// The machine's one-minute load average when the row ended.
    pub(crate) load: String,
    /// The CPU time of the row's processes from the burst's start to the end of its checks.
    pub(crate) cpu: cpu::Usage,
    /// Where the keys' sends spent their time.
    pub(crate) sends: sends::SendPhases,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let plan = plan::Plan::from_env();
    let machine = machine();
    let chain = chain::start().await;
    let mut proxies: Vec<(Duration, DelayProxy)> = Vec::new();
    let mut rounds = Vec::new();
    for round in 0..plan.rounds {
        let mut rows = Vec::new();
        for (index, configuration) in plan.configurations.iter().enumerate() {
            eprintln!("==> {} ({} relays, round {})", configuration.label(), plan.relays, round + 1);
            let rpc_url = rpc_url(&chain, &mut proxies, configuration.rpc_delay);
            // Every row its own keys and signers, across rounds too.
            let row_index = round * plan.configurations.len() + index;
            let row = measure(&chain, &rpc_url, row_index, *configuration, &plan).await;
            eprintln!(
                "    {:.1} accepted/s, {:.1} mined/s, not mined: {:?}, checks ok: {}",
                row.figures.accepted_per_sec,
                row.figures.mined_per_sec,
                row.figures.errors,
                row.checks.ok()
            );
            rows.push(row);
        }
        rounds.push(rows);
    }
    let every_round = (plan.rounds > 1).then(|| rounds::table(&rounds));
    let rows = rounds::medians(rounds);
    let text = report::render(&plan, &machine, &command(), &rows, every_round.as_deref());
    print!("{text}");
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/bench");
    std::fs::create_dir_all(&folder).expect("docs/bench");
    std::fs::write(folder.join("relayer-cluster.md"), text).expect("writing the report");
}

/// The daemons' RPC URL for a node `delay` away (a round trip): anvil's own for none, else a
/// delay proxy in front of it (one per delay, kept for the run), half the delay each way.
fn rpc_url(chain: &TestChain, proxies: &mut Vec<(Duration, DelayProxy)>, delay: Duration) -> String {
    if delay.is_zero() {
        return chain.rpc_url();
    }
    if let Some((_, proxy)) = proxies.iter().find(|(proxied, _)| *proxied == delay) {
        return format!("http://{}", proxy.address());
    }
    let anvil_url = chain.rpc_url();
    let anvil = anvil_url
        .strip_prefix("http://")
        .and_then(|rest| rest.trim_end_matches('/').parse().ok())
        .unwrap_or_else(|| panic!("anvil's URL is http://<ip>:<port>, not {anvil_url}"));
    let proxy = DelayProxy::start(anvil, delay / 2);
    let url = format!("http://{}", proxy.address());
    proxies.push((delay, proxy));
    url
}

/// One row: its keys funded, its daemons started on a fresh store, the burst, the checks, the
/// daemons stopped.
async fn measure(
    chain: &TestChain,
    rpc_url: &str,
    index: usize,
    configuration: Configuration,
    plan: &plan::Plan,
) -> Measured {
    let keys = chain::relayer_keys(index, configuration.keys);
    chain::fund(chain, &keys).await;
    let signers = chain::signers(index, plan.relays);
    let bodies = signed_registrations(chain, &signers);
    let store = TestStore::new(configuration.engine);
    let started = Instant::now();
    let cluster =
        tokio::task::block_in_place(|| Cluster::start(chain, rpc_url, &store, &keys, configuration.daemons));
    cluster.until_leases_settle(configuration.keys).await;
    let (holders, leased) = holders(&cluster).await;
    let next_before = chain::next_agent_id(chain).await;
    let bases: Vec<String> = cluster.daemons.iter().map(|daemon| daemon.client.base.clone()).collect();
    let pids: Vec<u32> = cluster.daemons.iter().map(|daemon| daemon.pid()).collect();
    let pg_port = store
        .database()
        .and_then(|database| database.url().rsplit_once(':')?.1.split('/').next()?.parse().ok());
    statements::reset(&store);
    let cpu_before = cpu::sample(&pids, pg_port);
    let outcomes = load::burst(&bases, &bodies, plan).await;
    let checks = checks::check(chain, next_before, &signers, &outcomes, &keys).await;
    let cpu = cpu::between(&cpu_before, &cpu::sample(&pids, pg_port));
    statements::write(&store, &row_name(&configuration));
    let sends = sends::read(&cluster).await;
    eprintln!("    sends: {}", sends.words());
    let logs = tokio::task::block_in_place(|| cluster.stop());
    keep_logs(&configuration, &logs);
    let took = started.elapsed();
    drop(store);
    let load = load_averages().split(", ").next().unwrap_or_default().to_owned();
    Measured {
        configuration,
        figures: figures::of(&outcomes),
        checks,
        logs,
        holders,
        leased,
        took,
        load,
        cpu,
        sends,
    }
}

/// Writes the daemons' logs to `BENCH_CLUSTER_LOGS`, if set.
fn keep_logs(configuration: &Configuration, logs: &daemons::Logs) {
    let Some(folder) = std::env::var_os("BENCH_CLUSTER_LOGS") else { return };
    let folder = std::path::PathBuf::from(folder);
    std::fs::create_dir_all(&folder).expect("BENCH_CLUSTER_LOGS: a folder");
    let row = row_name(configuration);
    for (id, output) in &logs.outputs {
        std::fs::write(folder.join(format!("{row}-{id}.log")), output).expect("writing a daemon's log");
    }
}

/// A row's name in file names: `postgres-4x4-0ms`.
fn row_name(configuration: &Configuration) -> String {
    format!(
        "{}-{}x{}-{}ms",
        configuration.store(),
        configuration.daemons,
        configuration.keys,
        configuration.rpc_delay.as_millis()
    )
}

/// The lanes' holders in words, and whether they were leased (different daemons named).
async fn holders(cluster: &Cluster) -> (String, bool) {
    let holders = cluster.holders().await;
    let themselves = holders.iter().all(|(id, named)| named.iter().all(|holder| holder == id));
    if themselves {
        let words = if cluster.ids.len() == 1 {
            "the daemon names itself for every key"
        } else {
            "every daemon names itself for every key (no leases)"
        };
        return (words.to_owned(), false);
    }
    let words = holders
        .iter()
        .map(|(id, named)| format!("{id} sees [{}]", named.join(", ")))
        .collect::<Vec<_>>()
        .join("; ");
    (words, true)
}

/// The machine, for the report: cores, CPU, memory, and the load when the run began.
fn machine() -> String {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let model = cpuinfo
        .lines()
        .find_map(|line| {
            line.strip_prefix("model name")?.split_once(':').map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory_gib = read("/proc/meminfo")
        .lines()
        .find_map(|line| {
            line.strip_prefix("MemTotal:")?.trim().strip_suffix("kB")?.trim().parse::<f64>().ok()
        })
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
    let load = load_averages();
    format!(
        "Machine: {cores} cores ({model}), {memory_gib:.0} GiB, shared with anvil, PostgreSQL, the \
         daemons and the bench client alike; load averages at the start: {load}. Absolute rates \
         depend on it: compare rows within this report.\n\nCode measured: {}.",
        kya_tests::commit_measured(&["relayer-daemon", "core", "Cargo.lock"])
    )
}

/// `/proc/loadavg`'s three load averages, `0.52, 0.80, 1.10`.
fn load_averages() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().take(3).collect::<Vec<_>>().join(", ")
}

/// The command that reruns this report, with the run's `BENCH_CLUSTER_*` settings.
fn command() -> String {
    let mut settings: Vec<String> = std::env::vars()
        .filter(|(name, _)| name.starts_with("BENCH_CLUSTER_"))
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    settings.sort();
    settings.push("cargo bench -p kya-tests --bench cluster".to_owned());
    settings.join(" ")
}
