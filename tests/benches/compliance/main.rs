//! `/api/v1/agents/compliance` from the index, alone: the Worker's CPU per request from V8's
//! profiler, by function (where it goes), and the first and last byte, at one registry size.
//!
//! `cargo bench -p kya-tests --bench compliance` seeds `BENCH_COMPLIANCE_AGENTS` agents (default
//! 10000) on anvil, fills the index of a Worker under `wrangler dev` (local D1, answers uncached),
//! then measures the endpoint and writes `docs/bench/compliance-<agents>.md`.
//!
//! `BENCH_COMPLIANCE_BUILDS=label=folder,label=folder` compares Worker builds (copies of
//! `edge-api/build`, e.g. one made at an earlier commit) on the same index: each is put in
//! `edge-api/build` in turn and the Worker restarted on the same state, for
//! `BENCH_COMPLIANCE_ROUNDS` rounds (default 3), so a machine whose load moves weighs on each
//! build alike; the build the benchmark made is put back at the end. Without it, the build the
//! benchmark made is measured, labelled by its commit. Build with `WASM_KEEP_NAMES=1` for the
//! Rust functions' names in the breakdown.
//! The index benchmark (`tests/benches/index/`) measures the endpoint among the others; this one
//! is the quick loop for its CPU.

#[path = "../index/timing.rs"]
mod timing;

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use alloy::providers::Provider;
use kya_devchain::{AnvilOptions, seed};
use kya_tests::{
    TestChain,
    edge_fixture::{CountingProxy, EdgeWorker, chain_vars, fresh_ip},
    repo_root,
    worker_profile::Profiler,
};
use timing::{median, ms};

const PATH: &str = "/api/v1/agents/compliance";
/// Timed requests per build and round, then as many profiled.
const REPEATS: usize = 9;
/// Functions listed in a build's breakdown.
const FUNCTIONS_LISTED: usize = 15;

/// One build's figures, over all its rounds.
#[derive(Default)]
struct Measured {
    first_bytes: Vec<Duration>,
    last_bytes: Vec<Duration>,
    /// Worker CPU per request, one figure per round.
    worker_cpus: Vec<Duration>,
    /// Worker CPU per request by function, summed over the rounds.
    by_function: BTreeMap<String, Duration>,
    samples: usize,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // The profiles of the Worker's CPU attach to wrangler's DevTools inspector.
    kya_tests::edge_fixture::open_inspectors();
    let agents: u64 = number("BENCH_COMPLIANCE_AGENTS", 10_000);
    let rounds = number("BENCH_COMPLIANCE_ROUNDS", 3) as usize;
    let root = repo_root();
    let build = root.join("edge-api/build");
    let commit = kya_tests::commit_measured(&["edge-api", "core"]);
    let builds: Vec<(String, Option<PathBuf>)> = match std::env::var("BENCH_COMPLIANCE_BUILDS") {
        Ok(list) => list
            .split(',')
            .map(|entry| {
                let (label, folder) = entry.split_once('=').expect("BENCH_COMPLIANCE_BUILDS: label=folder");
                (label.trim().to_owned(), Some(PathBuf::from(folder.trim())))
            })
            .collect(),
        Err(_) => vec![(commit.clone(), None)],
    };
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let started = Instant::now();

    let chain =
        TestChain::start_with(&AnvilOptions { states_kept: Some(4), ..AnvilOptions::default() }).await;
    seed::seed_bulk(&chain.chain, &chain.deployment, agents).await.expect("bulk seed");
    quiet_window(&chain).await;
    eprintln!("{agents} agents seeded in {:.1?}", started.elapsed());
    let proxy = CountingProxy::start(&chain.rpc_url()).await;
    let mut vars = chain_vars(&proxy.url, chain.registry());
    vars.extend([
        ("INDEX_ANSWER_TTL_SECS", "0".to_owned()),
        ("MEMORY_CACHE_BYTES", "0".to_owned()),
        ("INDEX_AGENTS_PER_RUN", "2000".to_owned()),
    ]);
    let mut worker = EdgeWorker::start_indexed(&vars).await;
    // The build the fixture just made, put back at the end.
    let own = tempfile::tempdir().expect("a temporary directory");
    copy_folder(&build, own.path());
    worker.fill_index().await;
    eprintln!("{agents}: filled ({:.1?} in all)", started.elapsed());

    let mut measured: Vec<Measured> = builds.iter().map(|_| Measured::default()).collect();
    let mut body: Option<Vec<u8>> = None;
    for round in 0..rounds {
        for ((label, folder), measured) in builds.iter().zip(&mut measured) {
            if let Some(folder) = folder {
                copy_folder(folder, &build);
            }
            worker.restart().await;
            let answer = measure(&worker, measured).await;
            // Every build answers the same bytes.
            match &body {
                None => body = Some(answer),
                Some(first) => assert!(first == &answer, "{label}'s body differs from the first build's"),
            }
            eprintln!(
                "{agents}, round {round}, {label}: Worker CPU {}",
                ms(*measured.worker_cpus.last().expect("measured"))
            );
        }
    }
    copy_folder(own.path(), &build);
    drop(worker);

    let text = report(
        agents,
        rounds,
        &commit,
        &load,
        started.elapsed(),
        &builds,
        &measured,
        body.map_or(0, |b| b.len()),
    );
    print!("{text}");
    let file = root.join(format!("docs/bench/compliance-{agents}.md"));
    std::fs::write(&file, text).expect("writing the report");
}

/// One round of one build on a fresh isolate: a warming request, [`REPEATS`] timed, [`REPEATS`]
/// profiled. Returns the body.
async fn measure(worker: &EdgeWorker, measured: &mut Measured) -> Vec<u8> {
    let http = kya_tests::http_client();
    let ip = fresh_ip();
    let warm = timing::get(&http, &worker.base, PATH, &ip).await;
    assert_eq!(warm.status, 200, "{}", String::from_utf8_lossy(&warm.body));
    assert!(warm.header("x-index-fallback").is_none(), "answered from the chain: {:?}", warm.headers);
    for _ in 0..REPEATS {
        let timed = timing::get(&http, &worker.base, PATH, &ip).await;
        measured.first_bytes.push(timed.first_byte);
        measured.last_bytes.push(timed.last_byte);
    }
    let mut profiler = Profiler::attach(worker.inspector_port()).await;
    profiler.start().await;
    for _ in 0..REPEATS {
        timing::get(&http, &worker.base, PATH, &ip).await;
    }
    let profile = profiler.stop().await;
    measured.worker_cpus.push(profile.cpu() / REPEATS as u32);
    measured.samples += profile.samples();
    for (function, time) in profile.by_function() {
        *measured.by_function.entry(function).or_default() += time / REPEATS as u32;
    }
    warm.body
}

/// Mines 65 empty blocks 2 s apart, past the index's re-scanned window (64 blocks by default),
/// so its first fill does not fetch the seeding's logs (as in `tests/benches/index/main.rs`).
async fn quiet_window(chain: &TestChain) {
    let _: serde_json::Value = chain
        .chain
        .provider()
        .raw_request("anvil_mine".into(), ("0x41", "0x2"))
        .await
        .expect("a quiet window");
}

#[allow(clippy::too_many_arguments)]
fn report(
    agents: u64,
    rounds: usize,
    commit: &str,
    load: &str,
    took: Duration,
    builds: &[(String, Option<PathBuf>)],
    measured: &[Measured],
    bytes: usize,
) -> String {
    let mut text = format!("# `/api/v1/agents/compliance` at {agents} agents\n\n");
    let _ = writeln!(
        text,
        "Measured by `cargo bench -p kya-tests --bench compliance` (tests/benches/compliance/) with \
         `BENCH_COMPLIANCE_AGENTS={agents}` at {commit}: anvil seeded by `seed_bulk`, the Worker under \
         `wrangler dev` with local D1, its index filled, every answer read from D1 \
         (`INDEX_ANSWER_TTL_SECS=0`, `MEMORY_CACHE_BYTES=0`). Each build in turn on the same index, \
         {rounds} round(s), each on a fresh isolate: one warming request, {REPEATS} timed (first and last \
         byte: medians over the rounds), {REPEATS} under V8's profiler (Worker CPU per request: the \
         median of the rounds; `tests/worker_profile.rs`). The body, {bytes} bytes, was the same for \
         every build. Load averages at the start: {} (2 shared cores: compare the builds' ratios); \
         {:.0} s in all.\n",
        load.split_whitespace().take(3).collect::<Vec<_>>().join(", "),
        took.as_secs_f64(),
    );
    text.push_str("| build | Worker CPU per request | per agent | first byte | last byte |\n|---|---:|---:|---:|---:|\n");
    for ((label, _), measured) in builds.iter().zip(measured) {
        let cpu = median(measured.worker_cpus.clone());
        let _ = writeln!(
            text,
            "| {label} | {} | {:.2} µs | {} | {} |",
            ms(cpu),
            cpu.as_secs_f64() * 1e6 / agents as f64,
            ms(median(measured.first_bytes.clone())),
            ms(median(measured.last_bytes.clone())),
        );
    }
    for ((label, _), measured) in builds.iter().zip(measured) {
        let _ = writeln!(
            text,
            "\n## Where {label}'s CPU goes\n\nSelf time per request by function (the mean over the rounds; \
             {} samples in all), the {FUNCTIONS_LISTED} largest:\n\n| function | per request |\n|---|---:|",
            measured.samples
        );
        let mut functions: Vec<(&String, &Duration)> = measured.by_function.iter().collect();
        functions.sort_by(|a, b| b.1.cmp(a.1));
        for (function, time) in functions.into_iter().take(FUNCTIONS_LISTED) {
            let _ = writeln!(text, "| `{function}` | {} |", ms(*time / rounds as u32));
        }
    }
    text
}

fn number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .map_or(default, |value| value.trim().parse().unwrap_or_else(|_| panic!("{name}: a number")))
}

/// Replaces `to`'s files with `from`'s.
fn copy_folder(from: &Path, to: &Path) {
    if to.exists() {
        std::fs::remove_dir_all(to).expect("clearing the build folder");
    }
    std::fs::create_dir_all(to).expect("a build folder");
    for entry in std::fs::read_dir(from).expect("a build folder to copy") {
        let entry = entry.expect("an entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            copy_folder(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copying a build file");
        }
    }
}
