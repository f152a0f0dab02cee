//! What running as wasm costs the Worker: every case of `kya_bench::CASES` measured natively and
//! then compiled as the Worker is (`scripts/build-bench-wasm.sh`) and run in Node's V8, the engine
//! of workerd (`bench/js/measure.mjs`), in one run on one machine, so their ratios compare.
//!
//! `cargo bench -p kya-bench --bench wasm_factor` (or `bash scripts/bench.sh`) prints the table
//! and writes it to `docs/bench/wasm.md`. `docs/edge-api.md` reads its plan figures from it.

use std::{fmt::Write as _, path::PathBuf, process::Command, time::Instant};

use kya_bench::{CASES, Fixture, SAMPLE_MILLIS, SAMPLES, SIZES, format_time, measure, report_path};

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    // The build script runs at the repository's root; a relative target folder is relative to it.
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), |dir| root.join(dir));
    let built = Command::new("bash")
        .arg(root.join("scripts/build-bench-wasm.sh"))
        .current_dir(&root)
        .status()
        .expect("bash runs");
    assert!(built.success(), "scripts/build-bench-wasm.sh failed");

    let started = Instant::now();
    let now = || started.elapsed().as_secs_f64() * 1e3;
    let native: Vec<Vec<f64>> = SIZES.iter().map(|&agents| measure(&Fixture::new(agents), now)).collect();
    let wasm = wasm_figures(&root, &target.join("bench-wasm"));

    let mut table = String::from(
        "| Case | 1,000 agents: native | wasm | × | 10,000 agents: native | wasm | × |\n\
         |---|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut ratios = Vec::new();
    for (index, (name, _)) in CASES.iter().enumerate() {
        let mut row = format!("| {name} |");
        for size in 0..SIZES.len() {
            let ratio = wasm[size][index] / native[size][index];
            ratios.push(ratio);
            let (native, wasm) = (format_time(native[size][index]), format_time(wasm[size][index]));
            write!(row, " {native} | {wasm} | {ratio:.2} |").expect("writing to a String");
        }
        writeln!(table, "{row}").expect("writing to a String");
    }
    ratios.sort_by(f64::total_cmp);
    // A snapshot refresh (a cache miss): plan the calls, decode the answers, render the answers.
    let refresh: Vec<usize> = ["plan the `getAgent`", "decode the batch answers", "render the snapshot's"]
        .iter()
        .map(|start| CASES.iter().position(|(name, _)| name.starts_with(start)).expect("a case of that name"))
        .collect();
    let miss =
        |figures: &[Vec<f64>], size: usize| refresh.iter().map(|&case| figures[size][case]).sum::<f64>();
    let report = format!(
        "# kya-core read path: wasm against native\n\n\
         Measured by `cargo bench -p kya-bench --bench wasm_factor` (bench/benches/wasm_factor.rs): \
         each case of bench/src/lib.rs natively (release), then compiled to wasm as \
         scripts/build-worker.sh compiles the Worker (release, wasm-bindgen, wasm-opt -O1) and run \
         in Node {node} (V8, the engine of workerd), in one run. Each figure is the median of \
         {SAMPLES} samples, each a loop of at least {SAMPLE_MILLIS} ms; × is wasm ÷ native.\n\n\
         {table}\n\
         Over all {count} figures, wasm takes {low:.2}× to {high:.2}× native time, {mid:.2}× at the \
         median. A snapshot refresh (plan the calls, decode the answers, render and encode the five \
         answers) costs {miss_small} in wasm at 1,000 agents and {miss_large} at 10,000 (native: \
         {native_small} and {native_large}).\n",
        node = node_version(),
        count = ratios.len(),
        low = ratios[0],
        high = ratios[ratios.len() - 1],
        mid = ratios[ratios.len() / 2],
        miss_small = format_time(miss(&wasm, 0)),
        miss_large = format_time(miss(&wasm, 1)),
        native_small = format_time(miss(&native, 0)),
        native_large = format_time(miss(&native, 1)),
    );
    print!("{report}");
    std::fs::write(report_path("wasm.md"), report).expect("writing docs/bench/wasm.md");
}

/// Every case's median in wasm, per size in [`SIZES`]' order, from `bench/js/measure.mjs`.
fn wasm_figures(root: &std::path::Path, built: &std::path::Path) -> Vec<Vec<f64>> {
    let output = Command::new("node")
        .arg(root.join("bench/js/measure.mjs"))
        .arg(built)
        .args(SIZES.map(|agents| agents.to_string()))
        .output()
        .expect("node runs");
    assert!(output.status.success(), "the wasm run failed: {}", String::from_utf8_lossy(&output.stderr));
    let figures: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON figures");
    SIZES
        .iter()
        .map(|agents| {
            let per_case: Vec<f64> = figures[agents.to_string()]
                .as_array()
                .expect("figures for each size")
                .iter()
                .map(|nanos| nanos.as_f64().expect("a number"))
                .collect();
            assert_eq!(per_case.len(), CASES.len(), "one figure per case");
            per_case
        })
        .collect()
}

fn node_version() -> String {
    Command::new("node")
        .arg("--version")
        .output()
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .unwrap_or_else(|_| "(unknown version)".into())
}
