//! CPU cost of the edge API's read path in `kya-core`, per request, natively (the cases are in
//! `kya_bench::CASES`).
//!
//! `cargo bench -p kya-bench --bench read_path` (or `bash scripts/bench.sh`) prints a table and
//! writes it to `docs/bench/core.md`. A Worker on the free plan gets 10 ms of CPU per request;
//! what the same cases cost as wasm is measured by `--bench wasm_factor` (`docs/bench/wasm.md`).

use std::{fmt::Write as _, time::Instant};

use kya_bench::{CASES, Fixture, SAMPLE_MILLIS, SAMPLES, SIZES, format_time, measure, report_path};

fn main() {
    let started = Instant::now();
    let now = || started.elapsed().as_secs_f64() * 1e3;
    let fixtures: Vec<Fixture> = SIZES.iter().map(|&agents| Fixture::new(agents)).collect();
    let figures: Vec<Vec<f64>> = fixtures.iter().map(|fixture| measure(fixture, now)).collect();

    let mut table = String::from("| Case | 1,000 agents | 10,000 agents |\n|---|---:|---:|\n");
    for (index, (name, _)) in CASES.iter().enumerate() {
        writeln!(
            table,
            "| {name} | {} | {} |",
            format_time(figures[0][index]),
            format_time(figures[1][index])
        )
        .expect("writing to a String");
    }
    let largest = &fixtures[1];
    let report = format!(
        "# kya-core read path: CPU per request (native, release)\n\n\
         Measured by `cargo bench -p kya-bench --bench read_path` (bench/benches/read_path.rs, the \
         cases in bench/src/lib.rs): the median of {SAMPLES} samples, each a loop of at least \
         {SAMPLE_MILLIS} ms. Agents as `seed_bulk` makes them: every third reports revenue, one in \
         fifty is not Active. The same cases as wasm, as the Worker runs them: \
         [wasm.md](wasm.md).\n\n{table}\n\
         The snapshot of 10,000 agents is {} KiB as JSON; its five answers in the compact form \
         the Worker caches (`SnapshotAnswers`: the bodies, and every `/agents` item rendered once, \
         loaded by slicing) are {} KiB. The other snapshot endpoints (`/stats`, `/stats/detailed`, \
         `/agents/compliance`, `/revenue/aggregate`) are a copy of a loaded body.\n",
        largest.snapshot_json.len() / 1024,
        largest.snapshot_answers_text.len() / 1024,
    );
    print!("{report}");
    std::fs::write(report_path("core.md"), report).expect("writing docs/bench/core.md");
}
