//! The five registry-wide endpoints cold, from the index and from the chain (today's direct
//! path), in one run: latency (median), the Worker's CPU per request, and what the index's
//! answer reads from D1.
//!
//! - From the index: one Worker with `INDEX_ANSWER_TTL_SECS=0` and `MEMORY_CACHE_BYTES=0`, so
//!   every request reads D1; each endpoint once to warm the isolate, then [`INDEX_REPEATS`]
//!   timed requests, whose CPU is measured together ([`crate::cpu`]), then [`PROFILED_REPEATS`]
//!   more under V8's profiler for the Worker's own CPU (`kya_tests::worker_profile`; apart, as
//!   the profiler costs the runtime thread time of its own).
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
    timing::{self, Timed, median},
};

/// Timed requests per endpoint from the index.
const INDEX_REPEATS: usize = 9;
/// Requests per endpoint under the profiler, whose mean is the Worker CPU of one. V8 samples
/// the isolate every 0.2 to 0.3 ms here, so nine requests of under a millisecond each gave
/// about 30 samples, and the mean moved by about 0.1 ms with a few samples more or fewer:
/// as much as the differences between sizes it is read for.
pub(crate) const PROFILED_REPEATS: usize = 45;
/// Fresh Workers per endpoint on the direct path; one past [`DIRECT_REPEATED_UP_TO`] agents,
/// where one cold read of the chain takes most of a minute.
const DIRECT_REPEATS: usize = 3;
const DIRECT_REPEATED_UP_TO: u64 = 10_000;

/// One endpoint as measured.
pub(crate) struct Endpoint {
    pub(crate) path: String,
    pub(crate) index: Side,
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
    /// The Worker's own CPU per request, from V8's profiler (the index's side only).
    pub(crate) worker_cpu: Option<Duration>,
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

/// Measures every path from the index (`indexed`, filled, answers uncached) and directly.
pub(crate) async fn measure(
    setup: &Setup,
    indexed: &EdgeWorker,
    profiler: &mut Profiler,
    agents: u64,
) -> Vec<Endpoint> {
    let http = kya_tests::http_client();
    let mut measured = Vec::new();
    for path in paths(agents) {
        let ip = fresh_ip();
        let warm = timing::get(&http, &indexed.base, &path, &ip).await;
        assert_eq!(warm.status, 200, "{path} from the index: {}", String::from_utf8_lossy(&warm.body));
        let meter = Meter::attach(indexed.pid());
        let before = meter.now();
        let mut answers = Vec::new();
        for _ in 0..INDEX_REPEATS {
            answers.push(timing::get(&http, &indexed.base, &path, &ip).await);
        }
        let cpu = (meter.settled().await - before) / INDEX_REPEATS as u32;
        profiler.start().await;
        for _ in 0..PROFILED_REPEATS {
            timing::get(&http, &indexed.base, &path, &ip).await;
        }
        let profile = profiler.stop().await;
        let name: String = path.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
        profile.keep(&format!("endpoint-{agents}{name}"));
        let mut index = side(&answers, cpu, (0, 0));
        index.worker_cpu = Some(profile.cpu() / PROFILED_REPEATS as u32);
        let repeats = if agents <= DIRECT_REPEATED_UP_TO { DIRECT_REPEATS } else { 1 };
        let direct = direct(setup, &path, repeats).await;
        measured.push(Endpoint { path, index, direct });
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
        worker_cpu: None,
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
        let meter = Meter::attach(worker.pid());
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
