//! The five registry-wide endpoints cold, from the index and from the chain (today's direct
//! path), in one run: latency (median), the Worker's CPU per request, and what the index's
//! answer reads from D1.
//!
//! - From the index: one Worker with `INDEX_ANSWER_TTL_SECS=0` and `MEMORY_CACHE_BYTES=0`, so
//!   every request reads D1; each endpoint once to warm the isolate, then [`INDEX_REPEATS`]
//!   timed requests, whose CPU is measured together ([`crate::cpu`]). After every endpoint's
//!   timing, the Worker's own CPU under V8's profiler (`worker_cpu.rs`: rounds over every
//!   endpoint, beside the 1,000-agent reference at a larger size; apart, as the profiler costs
//!   the runtime thread time of its own).
//! - Direct: a Worker whose index was never run, so it answers as today's direct path does
//!   (`X-Index-Fallback: the index is not filled yet`), after one read of the index's state
//!   row. (A Worker started without `start_indexed` still has wrangler.toml's D1 binding but no
//!   tables, and answers these endpoints 500 `worker runtime: TypeError: Invalid header value.`
//!   after reading the chain: D1's error text does not pass as an `X-Index-Fallback` value.) Its cold request is the one that reads the
//!   registry's snapshot from the chain, and the isolate caches it after: so each sample is a
//!   fresh Worker (new isolate, empty Cache API), warmed by one request that reads one agent
//!   through the same RPC, Multicall3 and decoding code (`/api/v1/agent/1`), then the endpoint,
//!   timed and its CPU measured. [`DIRECT_REPEATS`] Workers per
//!   endpoint.

use std::time::Duration;

use kya_tests::{
    edge_fixture::{EdgeWorker, chain_vars, fresh_ip},
    worker_profile::Profiler,
};

use crate::{
    Setup,
    cpu::Meter,
    reference::Reference,
    timing::{self, Timed, median},
    worker_cpu::{self, PathCpu},
};

/// Timed requests per endpoint from the index.
const INDEX_REPEATS: usize = 9;
/// Fresh Workers per endpoint on the direct path; one past [`DIRECT_REPEATED_UP_TO`] agents,
/// where one cold read of the chain takes most of a minute.
const DIRECT_REPEATS: usize = 3;
const DIRECT_REPEATED_UP_TO: u64 = 10_000;

/// One endpoint as measured.
pub(crate) struct Endpoint {
    pub(crate) path: String,
    pub(crate) index: Side,
    /// The index's Worker CPU per request, from V8's profiler.
    pub(crate) worker_cpu: PathCpu,
    /// The same role's (the same endpoint's, or `/agents`' near or last full page's) at
    /// 1,000 agents, profiled in the same rounds, for a larger size.
    pub(crate) reference_cpu: Option<PathCpu>,
    pub(crate) direct: Side,
}

/// Median figures of one side.
#[derive(Default)]
pub(crate) struct Side {
    pub(crate) status: u16,
    pub(crate) first_byte: Duration,
    pub(crate) last_byte: Duration,
    /// CPU per request ([`crate::cpu`]): an upper bound.
    pub(crate) cpu: Duration,
    pub(crate) bytes: usize,
    /// RPC HTTP requests (JSON-RPC calls) of one cold request: the direct side's chain reads.
    pub(crate) rpc: (usize, usize),
    /// `X-Index-Fallback`, if the index's Worker did not answer from the index.
    pub(crate) fallback: Option<String>,
    /// Why the answer was no 200: its `error` (or its body).
    pub(crate) error: Option<String>,
}

/// The paths measured: the five endpoints, `/agents` as a near page and a deep one (its
/// `OFFSET` is the cost of depth).
pub(crate) fn paths(agents: u64) -> Vec<String> {
    // seed_bulk leaves 47 of every 50 agents Active: the last full page of 100.
    let deep = (agents * 47 / 50 / 100).max(1);
    vec![
        "/api/v1/stats".into(),
        "/api/v1/stats/detailed".into(),
        "/api/v1/agents?status=Active&page=3&limit=100".into(),
        format!("/api/v1/agents?status=Active&page={deep}&limit=100"),
        "/api/v1/agents/compliance".into(),
        "/api/v1/revenue/aggregate".into(),
    ]
}

/// Measures every path from the index (`indexed`, filled, answers uncached) and directly; the
/// index's Worker CPU beside `reference`'s, when there is one.
pub(crate) async fn measure(
    setup: &Setup,
    indexed: &EdgeWorker,
    profiler: &mut Profiler,
    agents: u64,
    reference: Option<&mut Reference>,
) -> Vec<Endpoint> {
    let http = kya_tests::http_client();
    let mut timed = Vec::new();
    for path in paths(agents) {
        let ip = fresh_ip();
        let warm = timing::get(&http, &indexed.base, &path, &ip).await;
        assert_eq!(warm.status, 200, "{path} from the index: {}", String::from_utf8_lossy(&warm.body));
        let meter = Meter::attach(&indexed.runtimes());
        let before = meter.now();
        let mut answers = Vec::new();
        for _ in 0..INDEX_REPEATS {
            answers.push(timing::get(&http, &indexed.base, &path, &ip).await);
        }
        let cpu = (meter.settled().await - before) / INDEX_REPEATS as u32;
        timed.push((path, side(&answers, cpu, (0, 0))));
    }
    let (worker_cpu, reference_cpu) = worker_cpu::endpoints(indexed, profiler, agents, reference).await;
    let mut reference_cpu = reference_cpu.map(Vec::into_iter);
    let mut measured = Vec::new();
    for ((path, index), worker_cpu) in timed.into_iter().zip(worker_cpu) {
        let repeats = if agents <= DIRECT_REPEATED_UP_TO { DIRECT_REPEATS } else { 1 };
        let direct = direct(setup, &path, repeats).await;
        let reference_cpu = reference_cpu.as_mut().and_then(Iterator::next);
        measured.push(Endpoint { path, index, worker_cpu, reference_cpu, direct });
    }
    measured
}

/// Medians of `answers`.
fn side(answers: &[Timed], cpu: Duration, rpc: (usize, usize)) -> Side {
    let first = &answers[0];
    Side {
        status: first.status,
        first_byte: median(answers.iter().map(|answer| answer.first_byte).collect()),
        last_byte: median(answers.iter().map(|answer| answer.last_byte).collect()),
        cpu,
        bytes: first.body.len(),
        rpc,
        fallback: first.header("x-index-fallback").map(str::to_owned),
        error: (first.status != 200).then(|| error_of(&first.body)),
    }
}

/// The `error` of a JSON error body, or the body as text.
fn error_of(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|json| json["error"].as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned())
}

/// `path` cold on `repeats` fresh Workers without the index.
async fn direct(setup: &Setup, path: &str, repeats: usize) -> Side {
    let http = kya_tests::http_client();
    let (mut answers, mut cpus, mut rpc) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..repeats {
        let worker = EdgeWorker::start_indexed(&chain_vars(&setup.proxy.url, setup.chain.registry())).await;
        let ip = fresh_ip();
        let warm = timing::get(&http, &worker.base, "/api/v1/agent/1", &ip).await;
        assert_eq!(warm.status, 200);
        let meter = Meter::attach(&worker.runtimes());
        let (requests, calls) = (setup.proxy.requests(), setup.proxy.calls());
        let before = meter.now();
        let answer = timing::get(&http, &worker.base, path, &ip).await;
        cpus.push(meter.settled().await - before);
        if answer.status != 200 {
            eprintln!("direct {path}: {} {}", answer.status, String::from_utf8_lossy(&answer.body));
        }
        rpc.push((setup.proxy.requests() - requests, setup.proxy.calls() - calls));
        answers.push(answer);
    }
    let cpu = median(cpus);
    let mut rpc_sorted = rpc.clone();
    rpc_sorted.sort();
    let mut direct = side(&answers, cpu, rpc_sorted[rpc_sorted.len() / 2]);
    // An error names the provider's URL: the proxy's port changes with every run.
    direct.error = direct.error.map(|error| error.replace(&setup.proxy.url, "RPC_URL"));
    direct
}
