//! Ours against Ponder (`../shared/peer-ponder/`) on the same chain: Ponder's first fill (wall
//! time, CPU seconds of its process tree, RPC requests through a counting proxy of its own, which
//! asks its `eth_call`s at the head: [`PonderProxy`]), then
//! each path of [`endpoints::paths`] cold on both servers, each restarted before each sample
//! (median of [`cold_samples`]), and the key figures of both answers compared.
//!
//! Ours is the filled index's Worker (`INDEX_ANSWER_TTL_SECS=0`, `MEMORY_CACHE_BYTES=0`: every
//! answer reads D1), restarted on its own state directory ([`EdgeWorker::restart`]); Ponder is
//! restarted on its PGlite directory and waited for until it has indexed the chain's head again
//! ([`Ponder::synced`]). Each server is stopped while the other is measured. The agents a direct
//! read of the chain counts are reported beside each server's count ([`Census`]).

use std::time::{Duration, Instant};

use alloy::providers::Provider;
use kya_core::chain::abi::AgentRegistry;
use kya_tests::edge_fixture::{EdgeWorker, fresh_ip};
use serde_json::Value;

use crate::{
    Setup, cpu,
    direct::DirectWorker,
    endpoints,
    ponder::{self, Ponder, PonderProxy},
    report,
    timing::{self, Timed, median},
};

/// Restarts (and cold requests) per path and server: `BENCH_INDEX_SIDE_SAMPLES`, 3 unless set.
/// Each sample more restarts both servers once more per path (the side by side took 18 minutes
/// at 10,000 agents with 3); more settle an endpoint whose ratio is near 1 (three samples of one
/// path can spread over several milliseconds here).
pub(crate) fn cold_samples() -> usize {
    std::env::var("BENCH_INDEX_SIDE_SAMPLES")
        .ok()
        .map_or(3, |value| value.trim().parse().expect("BENCH_INDEX_SIDE_SAMPLES: a number"))
        .max(1)
}

/// Everything measured side by side at one size.
pub(crate) struct SideBySide {
    /// Load averages when the comparison started.
    pub(crate) load: String,
    pub(crate) ponder_fill: PonderFill,
    pub(crate) paths: Vec<Path>,
    /// Key figures on which the two answers differ, as `path: figure: ours ≠ Ponder's`.
    pub(crate) mismatches: Vec<String>,
    pub(crate) census: Census,
}

/// The agents on the chain at the head (a direct read) and as each server's first cold
/// `/stats` counted them, with the block each named.
pub(crate) struct Census {
    pub(crate) head: u64,
    /// `nextAgentId() - 1` at the head.
    pub(crate) chain: u64,
    /// `totalAgents` and the block named (`X-Block-Number`, Ponder's `X-Indexed-Block`).
    pub(crate) ours: (String, String),
    pub(crate) ponder: (String, String),
}

/// Ponder's first fill, from its start (build and start-up included) to `/status` at the head.
pub(crate) struct PonderFill {
    pub(crate) wall: Duration,
    /// CPU of its process tree ([`cpu::process_tree`]).
    pub(crate) cpu: Duration,
    /// RPC HTTP requests and JSON-RPC calls.
    pub(crate) rpc: (usize, usize),
}

/// One path on both servers.
pub(crate) struct Path {
    pub(crate) path: String,
    pub(crate) ours: Cold,
    /// Ours asked at the runtime's own entry, past wrangler's proxy ([`kya_tests::processes::runtime_entry`]).
    pub(crate) ours_entry: Cold,
    /// Ours asked on the Worker's own socket, past the runtime's entry too ([`DirectWorker`]).
    pub(crate) ours_direct: Cold,
    pub(crate) ponder: Cold,
}

/// Medians of the cold samples of one server.
pub(crate) struct Cold {
    pub(crate) status: u16,
    pub(crate) first_byte: Duration,
    pub(crate) last_byte: Duration,
}

/// Whether the benchmark runs Ponder: `BENCH_INDEX_PONDER=0` leaves it out.
pub(crate) fn enabled() -> bool {
    std::env::var("BENCH_INDEX_PONDER").map_or(true, |value| value.trim() != "0")
}

/// Ponder's fill and both servers cold, `worker` being our filled index (restarted here).
pub(crate) async fn measure(setup: &Setup, worker: &mut EdgeWorker, agents: u64) -> SideBySide {
    let load = report::load();
    at_head(setup, worker).await;
    let app = ponder::install();
    let scratch = tempfile::tempdir().expect("a temporary directory");
    let proxy = PonderProxy::start(&setup.chain.rpc_url()).await;
    let config = ponder::Config {
        app,
        rpc_url: proxy.url.clone(),
        chain_id: setup.chain.chain_id(),
        registry: setup.chain.registry(),
        pglite: scratch.path().join("pglite"),
    };
    let ponder_fill = fill(setup, &proxy, &config, agents).await;
    eprintln!("{agents}: Ponder filled in {:.1?}, {:.1?} CPU", ponder_fill.wall, ponder_fill.cpu);

    let head = setup.chain.chain.provider().get_block_number().await.expect("the head");
    let next = setup
        .chain
        .chain
        .view(setup.chain.registry(), &AgentRegistry::nextAgentIdCall {})
        .await
        .expect("nextAgentId");
    let mut census =
        Census { head, chain: next.to::<u64>() - 1, ours: Default::default(), ponder: Default::default() };
    let (mut paths, mut mismatches) = (Vec::new(), Vec::new());
    // Each server's cheapest route, cold the same way: what answering costs before any
    // endpoint's own work (ours: the OpenAPI document, a constant; Ponder's `/health`).
    let floor = Path {
        path: "runtime floor: ours `/openapi.json`, Ponder `/health`".into(),
        ours: cold(&ours_cold(worker, "/openapi.json", Via::Wrangler).await),
        ours_entry: cold(&ours_cold(worker, "/openapi.json", Via::RuntimeEntry).await),
        ours_direct: cold(&ours_cold(worker, "/openapi.json", Via::Direct).await),
        ponder: cold(&ponder_cold(setup, &config, "/health").await),
    };
    eprintln!(
        "{agents}: cold floor: ours {:.1?} ({:.1?} at the runtime's entry, {:.1?} direct), Ponder {:.1?}",
        floor.ours.last_byte, floor.ours_entry.last_byte, floor.ours_direct.last_byte, floor.ponder.last_byte
    );
    paths.push(floor);
    for path in endpoints::paths(agents) {
        let ours = ours_cold(worker, &path, Via::Wrangler).await;
        let ours_entry = ours_cold(worker, &path, Via::RuntimeEntry).await;
        let ours_direct = ours_cold(worker, &path, Via::Direct).await;
        let theirs = ponder_cold(setup, &config, &path).await;
        eprintln!(
            "{path}: ours {:.1?} ({:.1?} at the runtime's entry, {:.1?} direct), Ponder {:.1?}",
            cold(&ours).last_byte,
            cold(&ours_entry).last_byte,
            cold(&ours_direct).last_byte,
            cold(&theirs).last_byte
        );
        mismatches.extend(compare(&path, &ours, &theirs));
        mismatches.extend(compare(&path, &ours_entry, &theirs));
        mismatches.extend(compare(&path, &ours_direct, &theirs));
        if path == "/api/v1/stats" {
            census.ours = counted(&ours[0], "x-block-number");
            census.ponder = counted(&theirs[0], "x-indexed-block");
        }
        paths.push(Path {
            path,
            ours: cold(&ours),
            ours_entry: cold(&ours_entry),
            ours_direct: cold(&ours_direct),
            ponder: cold(&theirs),
        });
    }
    SideBySide { load, ponder_fill, paths, mismatches, census }
}

/// `totalAgents` of a `/stats` answer and the block it names in `header`, as text.
fn counted(answer: &Timed, header: &str) -> (String, String) {
    let body = serde_json::from_slice::<Value>(&answer.body).unwrap_or(Value::Null);
    (text(&body["totalAgents"]), answer.header(header).unwrap_or("absent").to_owned())
}

/// Where our cold requests are sent.
#[derive(Clone, Copy)]
enum Via {
    /// `wrangler dev`'s port, through its proxy Worker.
    Wrangler,
    /// The runtime's own entry ([`kya_tests::processes::runtime_entry`]), as a deployed Worker is reached with
    /// no proxy of wrangler's in front.
    RuntimeEntry,
    /// The Worker's own socket in a runtime of its own ([`DirectWorker`]): as Cloudflare's edge
    /// calls a deployed Worker, with no entry Worker either.
    Direct,
}

/// `path` asked once after each of [`cold_samples`] restarts of our Worker (or starts of its
/// direct runtime), its index run just before each: Ponder's samples take minutes, and an index
/// older than `INDEX_MAX_AGE_SECS` would answer from the chain (`X-Index-Fallback`), which is
/// not the index's cost.
async fn ours_cold(worker: &mut EdgeWorker, path: &str, via: Via) -> Vec<Timed> {
    let http = kya_tests::http_client();
    let mut answers = Vec::new();
    for _ in 0..cold_samples() {
        worker.run_index().await;
        let answer = match via {
            Via::Wrangler => {
                worker.restart().await;
                timing::get(&http, &worker.base, path, &fresh_ip()).await
            }
            Via::RuntimeEntry => {
                worker.restart().await;
                let base = kya_tests::processes::runtime_entry(&worker.runtimes())
                    .await
                    .expect("the runtime's entry of the restarted Worker answers /health");
                timing::get(&http, &base, path, &fresh_ip()).await
            }
            // `wrangler dev` stays up, idle, beside it: its index runs only when asked.
            Via::Direct => {
                let direct = DirectWorker::start(worker).await;
                timing::get(&http, &direct.base, path, &fresh_ip()).await
            }
        };
        answers.push(answer);
    }
    answers
}

/// `path` asked once after each of [`cold_samples`] starts of Ponder on its filled directory.
async fn ponder_cold(setup: &Setup, config: &ponder::Config, path: &str) -> Vec<Timed> {
    let http = kya_tests::http_client();
    let mut answers = Vec::new();
    for _ in 0..cold_samples() {
        let mut server = Ponder::start(config);
        server.synced(&setup.chain, RESTART_WITHIN).await;
        answers.push(timing::get(&http, &server.base, path, &fresh_ip()).await);
    }
    answers
}

/// How long a restarted Ponder may take to sync again.
const RESTART_WITHIN: Duration = Duration::from_secs(300);

/// Runs `worker`'s index until it names the chain's head, as Ponder will: both judge compliance
/// at their block's timestamp.
async fn at_head(setup: &Setup, worker: &EdgeWorker) {
    let head = setup.chain.chain.provider().get_block_number().await.expect("the head");
    for _ in 0..5 {
        worker.run_index().await;
        let index = worker.client().get("/health").await.body["index"].clone();
        if index["block"].as_u64() == Some(head) {
            return;
        }
    }
    panic!("the index did not reach block {head} in 5 runs");
}

/// Ponder started on a fresh PGlite directory until it has indexed the head.
async fn fill(setup: &Setup, proxy: &PonderProxy, config: &ponder::Config, agents: u64) -> PonderFill {
    let (requests, calls) = proxy.counts();
    let started = Instant::now();
    let mut server = Ponder::start(config);
    // 10,000 agents took 254 s here: a generous bound.
    let within = Duration::from_millis(agents * 60).max(Duration::from_secs(900));
    server.synced(&setup.chain, within).await;
    let wall = started.elapsed();
    let cpu = cpu::process_tree(server.pid());
    let rpc = (proxy.counts().0 - requests, proxy.counts().1 - calls);
    PonderFill { wall, cpu, rpc }
}

fn cold(answers: &[Timed]) -> Cold {
    Cold {
        status: answers.iter().map(|answer| answer.status).find(|&status| status != 200).unwrap_or(200),
        first_byte: median(answers.iter().map(|answer| answer.first_byte).collect()),
        last_byte: median(answers.iter().map(|answer| answer.last_byte).collect()),
    }
}

/// What differs between the two servers' answers of `path`: a status other than 200 in any
/// sample, or else the key figures of their first answers (none when both agree).
fn compare(path: &str, ours: &[Timed], theirs: &[Timed]) -> Vec<String> {
    let statuses =
        |answers: &[Timed]| answers.iter().map(|answer| answer.status.to_string()).collect::<Vec<_>>();
    if ours.iter().chain(theirs).any(|answer| answer.status != 200) {
        let (mine, other) = (statuses(ours).join(", "), statuses(theirs).join(", "));
        return vec![format!("`{path}`: statuses {mine}, Ponder's {other}")];
    }
    // Every sample of ours from the index: a fallback answer times the chain, not the index.
    let fallbacks = ours.iter().filter(|answer| answer.header("x-index-fallback").is_some()).count();
    if fallbacks > 0 && path.starts_with("/api/") {
        return vec![format!(
            "`{path}`: {fallbacks} of our answers fell back to the chain (X-Index-Fallback)"
        )];
    }
    let (ours, theirs) = (&ours[0], &theirs[0]);
    // The block each answer names: a difference in the figures below is read against it.
    let mut differences = Vec::new();
    let (our_block, their_block) = (ours.header("x-block-number"), theirs.header("x-indexed-block"));
    if our_block != their_block {
        differences.push(format!(
            "`{path}`: block: {} ≠ Ponder's {}",
            our_block.unwrap_or("absent"),
            their_block.unwrap_or("absent")
        ));
    }
    let parse = |answer: &Timed| serde_json::from_slice::<Value>(&answer.body).unwrap_or(Value::Null);
    let (ours, theirs) = (key_figures(&parse(ours)), key_figures(&parse(theirs)));
    differences.extend(
        ours.iter()
            .zip(&theirs)
            .filter(|((_, mine), (_, other))| mine != other)
            .map(|((name, mine), (_, other))| format!("`{path}`: {name}: {mine} ≠ Ponder's {other}")),
    );
    differences
}

/// Totals and the first ids of an answer, as text (numbers and digit strings alike): the
/// figures both servers must agree on. The other fields (times, addresses, `chain`) are checked
/// against the chain by the tests (ours) and by the peer's `scripts/compare.mjs` (Ponder's).
fn key_figures(body: &Value) -> Vec<(&'static str, String)> {
    let totals = [
        "totalAgents",
        "compliantCount",
        "total",
        "totalPages",
        "totalReports",
        "totalAmount",
        "byCurrency",
        "byCategory",
        "totalRevenue",
        "statusDistribution",
        "generationDistribution",
        "complianceRate",
    ];
    let mut figures: Vec<(&'static str, String)> =
        totals.into_iter().map(|name| (name, text(&body[name]))).collect();
    let data = body["data"].as_array().map(Vec::as_slice).unwrap_or_default();
    figures.push(("data's length", data.len().to_string()));
    let first: Vec<String> = data.iter().take(5).map(|item| text(&item["agentId"])).collect();
    figures.push(("first ids", first.join(", ")));
    figures
}

/// `value` as text: numbers and strings bare (a sum may be a number on one side and a digit
/// string on the other), objects as `key=value` pairs in key order.
fn text(value: &Value) -> String {
    match value {
        Value::Null => "absent".to_owned(),
        Value::String(text) => text.clone(),
        Value::Object(map) => {
            let mut pairs: Vec<String> =
                map.iter().map(|(key, value)| format!("{key}={}", text(value))).collect();
            pairs.sort();
            format!("{{{}}}", pairs.join(", "))
        }
        other => other.to_string(),
    }
}
