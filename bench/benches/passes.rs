//! What checking a KYA pass offline costs a provider (the targets of `docs/passes.md`): the same
//! pass verified by `kya_core::pass` natively (release), by the npm package's `verifyPass` (the
//! same Rust as wasm) in Node, and by npm `jose`'s `jwtVerify` in that same Node process, so the
//! wasm and jose figures compare as a ratio. Each figure is the median of [`SAMPLES`] samples,
//! each a loop of at least [`SAMPLE_MILLIS`] ms.
//!
//! `cargo bench -p kya-bench --bench passes` (or `bash scripts/bench.sh`) prints the report and
//! writes it to `docs/bench/passes.md`, naming the commit it measured.

use std::{fmt::Write as _, path::PathBuf, process::Command, time::Instant};

use kya_bench::{PassFixture, SAMPLE_MILLIS, SAMPLES, format_time, report_path};

/// Targets (INTERFACE.md section 7's bench): native and wasm ceilings, and no slower than jose.
const NATIVE_TARGET_MICROS: f64 = 50.0;
const WASM_TARGET_MICROS: f64 = 250.0;

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let built = Command::new("bash").arg(root.join("scripts/build-core-wasm.sh")).current_dir(&root).status();
    assert!(built.expect("bash runs").success(), "scripts/build-core-wasm.sh failed");

    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_secs();
    // The pass cases of `kya_bench::CASES`, on a pass checked at the wall clock (jose reads it).
    let pass = PassFixture::compliant(now);
    assert!(pass.verify() && pass.check_signature(), "the pass verifies");

    let verify_native = median_nanos(|| {
        std::hint::black_box(std::hint::black_box(&pass).verify());
    });
    // The floor: the Ed25519 check alone (ed25519-dalek's `verify_strict`, as `verify_pass`
    // calls it) on the pass's own signing input, key decompressed once as `Jwks` keeps it.
    let signature_native = median_nanos(|| {
        std::hint::black_box(std::hint::black_box(&pass).check_signature());
    });
    let sign_native = median_nanos(|| {
        std::hint::black_box(std::hint::black_box(&pass).sign());
    });

    let fixture = serde_json::json!({
        "pass": pass.jws, "jwks": pass.jwks, "issuer": pass.trust.issuer, "chainId": pass.trust.chain_id,
        "registry": pass.trust.registry.to_checksum(None), "now": now,
        "samples": SAMPLES, "sampleMillis": SAMPLE_MILLIS,
    });
    let file = std::env::temp_dir().join(format!("kya-pass-bench-{}.json", std::process::id()));
    std::fs::write(&file, fixture.to_string()).expect("writes the fixture");
    let output = Command::new("node")
        .arg(root.join("bench/js/passes.mjs"))
        .arg(&file)
        .current_dir(&root)
        .output()
        .expect("node runs bench/js/passes.mjs");
    let _ = std::fs::remove_file(&file);
    assert!(
        output.status.success(),
        "bench/js/passes.mjs failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let node: serde_json::Value = serde_json::from_slice(&output.stdout).expect("its JSON");
    let figure = |name: &str| node[name].as_f64().unwrap_or_else(|| panic!("{name} in {node}"));
    let (ours_wasm, jose, node_version) = (figure("oursNanos"), figure("joseNanos"), node["node"].clone());
    let signature_node = figure("signatureNanos");

    let met = |ok: bool| if ok { "met" } else { "not met" };
    let commit = git(&root, &["rev-parse", "HEAD"]);
    let dirty = !git(&root, &["status", "--porcelain", "--", "core", "bench"]).is_empty();
    let mut report = String::from("# KYA passes: verifying offline\n\n");
    writeln!(
        report,
        "Measured by `cargo bench -p kya-bench --bench passes` (bench/benches/passes.rs, bench/js/passes.mjs) on commit `{commit}`{}, {}. One pass (Ed25519, {} bytes, the claims of a compliant agent) checked as a provider checks it: the signature under a key of a two-key JWKS, the lifetime, the issuer, chain and registry. Natively: `kya_core::pass::verify::verify_pass` (release). In Node {}: the npm package's `verifyPass` (the same Rust as wasm, built as `scripts/build-core-wasm.sh` builds it) and npm `jose` {}'s `jwtVerify` with the same checks (issuer, `typ`, EdDSA, a local JWKS), in one process, interleaved. Each figure is the median of {SAMPLES} samples, each a loop of at least {SAMPLE_MILLIS} ms; machines here are noisy, so compare the ratio, measured in one run.\n",
        if dirty { " (with uncommitted changes to core/ or bench/)" } else { "" },
        kya_bench_time(),
        pass.jws.len(),
        node_version.as_str().unwrap_or("?"),
        node["jose"].as_str().unwrap_or("?"),
    )
    .expect("writing to a String");
    writeln!(report, "| Check | per pass | target |\n|---|---:|---|").expect("writing to a String");
    writeln!(
        report,
        "| native `verify_pass` | {} | at most {NATIVE_TARGET_MICROS} µs: {} |",
        format_time(verify_native),
        met(verify_native <= NATIVE_TARGET_MICROS * 1e3)
    )
    .expect("writing to a String");
    writeln!(
        report,
        "| wasm `verifyPass` in Node | {} | at most {WASM_TARGET_MICROS} µs: {} |",
        format_time(ours_wasm),
        met(ours_wasm <= WASM_TARGET_MICROS * 1e3)
    )
    .expect("writing to a String");
    writeln!(
        report,
        "| `jose` `jwtVerify` in the same Node | {} | ours ÷ jose = {:.2}: {} |",
        format_time(jose),
        ours_wasm / jose,
        met(ours_wasm <= jose)
    )
    .expect("writing to a String");
    writeln!(
        report,
        "| native signing (`jws::sign`, what the Worker does per pass, natively) | {} | |",
        format_time(sign_native)
    )
    .expect("writing to a String");
    writeln!(
        report,
        "| the Ed25519 check alone, native (ed25519-dalek `verify_strict` on the pass's signing input) | {} | `verify_pass` ÷ it = {:.2} |",
        format_time(signature_native),
        verify_native / signature_native
    )
    .expect("writing to a String");
    writeln!(
        report,
        "| the Ed25519 check alone in the same Node (`crypto.verify`, OpenSSL: what `jose` calls) | {} | `jose` ÷ it = {:.2} |",
        format_time(signature_node),
        jose / signature_node
    )
    .expect("writing to a String");
    let overhead = verify_native - signature_native;
    let floor = if signature_native > NATIVE_TARGET_MICROS * 1e3 {
        format!(
            "On this machine the native target is below the floor: the Ed25519 check alone costs {} (fifth \
             row), more than {NATIVE_TARGET_MICROS} µs, ",
            format_time(signature_native)
        )
    } else {
        format!("The Ed25519 check alone costs {} here (fifth row), ", format_time(signature_native))
    };
    writeln!(
        report,
        "\n{floor}and everything else `verify_pass` does (splitting, base64url, the header, the claims' \
         JSON, the lifetime and trust checks) adds {} ({:.0} %). For scale on the same cores, OpenSSL's \
         C takes {} for the same check (sixth row), and the wasm `verifyPass` takes {:.2} times that.",
        format_time(overhead.max(0.0)),
        100.0 * overhead.max(0.0) / signature_native,
        format_time(signature_node),
        ours_wasm / signature_node
    )
    .expect("writing to a String");
    println!("{report}");
    std::fs::write(report_path("passes.md"), report).expect("writes docs/bench/passes.md");
}

/// The median of `run`'s time over [`SAMPLES`] samples, natively; nanoseconds per run.
fn median_nanos(run: impl FnMut()) -> f64 {
    let started = Instant::now();
    kya_bench::median_nanos(|| started.elapsed().as_secs_f64() * 1e3, run)
}

fn git(root: &PathBuf, args: &[&str]) -> String {
    let output = Command::new("git").args(args).current_dir(root).output().expect("git runs");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// When the run was, UTC, from `date` (the bench has no clock library).
fn kya_bench_time() -> String {
    let output = Command::new("date").args(["-u", "+%Y-%m-%d %H:%M (UTC)"]).output().expect("date runs");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}
