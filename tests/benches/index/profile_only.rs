//! `BENCH_INDEX_ONLY=profile`: after the first fill, only the endpoints' Worker CPU
//! (`worker_cpu.rs`: in rotated rounds, beside the 1,000-agent reference at a larger size),
//! split by what the samples landed in, and printed, not reported: the runtime's native work
//! while the isolate is entered (`(program)`), garbage collection, JavaScript (wasm-bindgen's
//! glue, D1's result glue) and the Worker's wasm, with the costliest functions. It is how a
//! difference in the report's Worker CPU is traced to its part, in minutes where the whole
//! benchmark takes up to an hour. With `KYA_PROFILE_DIR` set, each round's profile of each path
//! is kept there (names of the wasm's functions with `WASM_KEEP_NAMES=1`).

use kya_tests::{edge_fixture::EdgeWorker, worker_profile::Profiler};

use crate::{
    reference::{self, Reference},
    timing::ms,
    worker_cpu::{self, Part, PathCpu},
};

/// Whether the benchmark runs in this mode.
pub(crate) fn enabled() -> bool {
    std::env::var("BENCH_INDEX_ONLY").is_ok_and(|value| value.trim() == "profile")
}

/// Profiles the endpoints and prints each one's split.
pub(crate) async fn measure(
    worker: &EdgeWorker,
    profiler: &mut Profiler,
    agents: u64,
    reference: Option<&mut Reference>,
) {
    let (measured, beside) = worker_cpu::endpoints(worker, profiler, agents, reference).await;
    for cpu in &measured {
        println!("{}", render(agents, cpu));
    }
    for (cpu, reference) in measured.iter().zip(beside.iter().flatten()) {
        println!("{}", render(reference::AGENTS, reference));
        let paired = worker_cpu::Paired::new(cpu, reference);
        let shown: Vec<String> = paired.ratios.iter().map(|ratio| format!("{ratio:.2}")).collect();
        println!(
            "  {agents} against {} agents, round by round: {} ({} of {} costlier)",
            reference::AGENTS,
            shown.join(", "),
            paired.costlier(),
            paired.ratios.len()
        );
    }
}

/// One path's lines: the median of its rounds, its parts, its rounds, its costliest functions.
fn render(agents: u64, cpu: &PathCpu) -> String {
    let parts: Vec<String> =
        Part::ALL.iter().map(|part| format!("{} {}", part.label(), ms(cpu.part(*part)))).collect();
    let rounds: Vec<String> = cpu.rounds.iter().map(|time| ms(*time)).collect();
    let top: Vec<String> =
        cpu.top(8).iter().map(|(function, time)| format!("    {} {function}", ms(*time))).collect();
    format!(
        "{agents} agents, Worker CPU {}: median {} a request ({} samples); means: {}\n  rounds: {}\n{}",
        cpu.path,
        ms(cpu.median()),
        cpu.samples,
        parts.join(", "),
        rounds.join(", "),
        top.join("\n")
    )
}
