//! `BENCH_INDEX_ONLY=cold`: after the first fill, only our Worker's cold answers, each after a
//! restart, at the runtime's entry and direct to the Worker (`direct.rs`), and printed, not
//! reported: the few minutes a change to the cold path needs to be judged, where the whole
//! benchmark takes from ten minutes to hours.
//! Ponder is not run; the side-by-side report (`side_by_side.rs`) stays the record.
//! `BENCH_INDEX_COLD_SAMPLES` sets the restarts per path (default 9). With `KYA_PROFILE_DIR`
//! set, V8's profiler is attached after each restart (once `/health` answered) and each cold
//! request's profile is kept there (`cold-<path>-<sample>.cpuprofile`; names with
//! `WASM_KEEP_NAMES=1`), to see where a cold answer's CPU goes.

use kya_tests::{
    edge_fixture::{EdgeWorker, fresh_ip},
    worker_profile::Profiler,
};

use crate::{direct::DirectWorker, timing};

/// Whether the benchmark runs in this mode.
pub(crate) fn enabled() -> bool {
    std::env::var("BENCH_INDEX_ONLY").is_ok_and(|value| value.trim() == "cold")
}

/// The floor and each endpoint of the side by side, cold, printed as medians of the samples
/// (and every sample, for the spread).
pub(crate) async fn measure(worker: &mut EdgeWorker, agents: u64) {
    let samples: usize = std::env::var("BENCH_INDEX_COLD_SAMPLES")
        .ok()
        .map_or(9, |value| value.trim().parse().expect("BENCH_INDEX_COLD_SAMPLES: a number"));
    let http = kya_tests::http_client();
    let paths = ["/openapi.json", "/api/v1/stats", "/api/v1/revenue/aggregate"];
    // Interleaved (one sample of each path per round), so a change in the machine's load
    // reaches every path alike.
    let routes = ["at the runtime's entry", "direct to the Worker"];
    let mut times: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); paths.len()]; routes.len()];
    let profiling = std::env::var_os("KYA_PROFILE_DIR").is_some();
    for sample in 0..samples {
        for (index, path) in paths.iter().enumerate() {
            worker.restart().await;
            let base = kya_tests::processes::runtime_entry(&worker.runtimes())
                .await
                .expect("the runtime's entry of the restarted Worker answers /health");
            let mut profiler =
                if profiling { Some(Profiler::attach(worker.inspector_port()).await) } else { None };
            if let Some(profiler) = profiler.as_mut() {
                profiler.start().await;
            }
            let answer = timing::get(&http, &base, path, &fresh_ip()).await;
            if let Some(profiler) = profiler.as_mut() {
                let profile = profiler.stop().await;
                let name = path.trim_start_matches('/').replace('/', "-");
                profile.keep(&format!("cold-{name}-{sample}"));
            }
            assert_eq!(answer.status, 200, "{path}: {}", String::from_utf8_lossy(&answer.body));
            assert_eq!(answer.header("x-index-fallback"), None, "{path}: from the index");
            times[0][index].push(answer.last_byte.as_secs_f64() * 1e3);

            let direct = DirectWorker::start(worker).await;
            let answer = timing::get(&http, &direct.base, path, &fresh_ip()).await;
            assert_eq!(answer.status, 200, "{path}, direct: {}", String::from_utf8_lossy(&answer.body));
            assert_eq!(answer.header("x-index-fallback"), None, "{path}, direct: from the index");
            times[1][index].push(answer.last_byte.as_secs_f64() * 1e3);
        }
    }
    for (route, times) in routes.iter().zip(times) {
        for (path, mut samples) in paths.iter().zip(times) {
            let shown: Vec<String> = samples.iter().map(|ms| format!("{ms:.1}")).collect();
            samples.sort_by(f64::total_cmp);
            let median = samples[samples.len() / 2];
            println!(
                "{agents} agents, cold {route}: {path}: median {median:.2} ms of [{}]",
                shown.join(", ")
            );
        }
    }
}
