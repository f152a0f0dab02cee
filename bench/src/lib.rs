//! The edge API's read path in kya-core as benchmark cases, for registries of 1,000 and 10,000
//! agents: decoding the JSON-RPC answers into a snapshot, the snapshot's cache round trip, each
//! list and statistics body, the EIP-712 digest the relayer and the browser package compute, and
//! a KYA pass signed (the Worker) and verified (a provider).
//!
//! The cases and the sampling are written once and measured twice: natively
//! (`benches/read_path.rs`, `docs/bench/core.md`) and compiled to wasm the way the Worker is,
//! run in Node's V8, the engine of workerd (`src/wasm.rs`, `benches/wasm_factor.rs`,
//! `docs/bench/wasm.md`). The clock is the only part that differs.

mod fixture;
mod pass_fixture;
#[cfg(target_arch = "wasm32")]
pub mod wasm;

use core::hint::black_box;

use alloy_primitives::Address;
pub use fixture::Fixture;
use kya_core::{
    Snapshot, SnapshotAnswers,
    api::query::AgentsQuery,
    chain::rpc::{BlockTag, batches},
    registry::forward_request,
    snapshot::stats,
};
pub use pass_fixture::{PassFixture, WALLET, WALLET_KEY};

/// The registry sizes every case runs at.
pub const SIZES: [u64; 2] = [1_000, 10_000];
/// Samples per case; a case's figure is their median.
pub const SAMPLES: usize = 15;
/// Each sample repeats the case until it has run at least this long.
pub const SAMPLE_MILLIS: f64 = 40.0;
/// `RPC_BATCH_SIZE`'s default.
pub const BATCH_SIZE: usize = 500;

/// A named case: one request's worth of work on a fixture.
pub type Case = (&'static str, fn(&Fixture));

/// Every case, in the order the reports list them.
pub const CASES: [Case; 16] = [
    ("plan the `getAgent` batch bodies", |f| {
        black_box(batches(f.plan.requests(BlockTag::Number(1_234)), BATCH_SIZE));
    }),
    ("decode the batch answers into agents (cache miss)", |f| {
        black_box(f.decode_agents());
    }),
    ("snapshot to JSON (cache write, once per miss)", |f| {
        black_box(serde_json::to_string(&f.snapshot).expect("serialises"));
    }),
    ("snapshot from JSON (cache hit on the snapshot)", |f| {
        black_box(serde_json::from_str::<Snapshot>(&f.snapshot_json).expect("parses"));
    }),
    ("`/agents/compliance` body", |f| {
        black_box(serde_json::to_vec(&stats::compliance_list(&f.snapshot)).expect("serialises"));
    }),
    ("`/stats/detailed` body", |f| {
        let basic = stats::stats(&f.snapshot, &Address::ZERO, "http://127.0.0.1:8545");
        black_box(serde_json::to_vec(&stats::detailed(&f.snapshot, basic)).expect("serialises"));
    }),
    ("`/agents?status=Active&limit=100` body", |f| {
        let query = AgentsQuery::parse([("status", "Active"), ("limit", "100")]).expect("a valid query");
        black_box(serde_json::to_vec(&stats::agents_page(&f.snapshot, &query)).expect("serialises"));
    }),
    ("`/revenue/aggregate` body", |f| {
        black_box(serde_json::to_vec(&stats::revenue_aggregate(&f.snapshot.revenue)).expect("serialises"));
    }),
    ("render the snapshot's five answers and encode them (cache miss, once per snapshot)", |f| {
        black_box(SnapshotAnswers::render(&f.snapshot, &Address::ZERO, "http://127.0.0.1:8545").encode());
    }),
    ("load the compact snapshot answers (Cache API hit on the snapshot)", |f| {
        black_box(SnapshotAnswers::decode(&f.snapshot_answers_text).expect("decodes"));
    }),
    ("`/agents?status=Active&page=50&limit=100` from the loaded answers", |f| {
        let query =
            AgentsQuery::parse([("status", "Active"), ("page", "50"), ("limit", "100")]).expect("valid");
        black_box(f.snapshot_answers.agents_page(&query));
    }),
    ("slowest snapshot endpoint from the Cache API: load, then that `/agents` page", |f| {
        let answers = SnapshotAnswers::decode(&f.snapshot_answers_text).expect("decodes");
        let query =
            AgentsQuery::parse([("status", "Active"), ("page", "50"), ("limit", "100")]).expect("valid");
        black_box(answers.agents_page(&query));
    }),
    ("EIP-712 digest of one `ForwardRequest` (relayer and browser package)", |f| {
        black_box(forward_request::signing_digest(black_box(&f.request), &f.domain));
    }),
    ("sign a KYA pass (the Worker, per pass; the registry's size does not matter)", |f| {
        black_box(f.pass.sign());
    }),
    ("verify a KYA pass offline (a provider, `verify_pass`)", |f| {
        black_box(f.pass.verify());
    }),
    ("the Ed25519 check alone of that pass (`verify_strict`)", |f| {
        black_box(f.pass.check_signature());
    }),
];

/// Median time of one run of `case`, in nanoseconds, over [`SAMPLES`] samples; `now` reads a
/// clock in milliseconds (`Instant` natively, `performance.now()` in wasm).
pub fn median_nanos(now: impl Fn() -> f64, mut case: impl FnMut()) -> f64 {
    case(); // warm-up: allocator, caches
    let mut samples: Vec<f64> = (0..SAMPLES)
        .map(|_| {
            let (started, mut runs) = (now(), 0u32);
            while now() - started < SAMPLE_MILLIS || runs == 0 {
                case();
                runs += 1;
            }
            (now() - started) * 1e6 / f64::from(runs)
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[SAMPLES / 2]
}

/// Every case's median on `fixture`, in nanoseconds, in [`CASES`]' order.
pub fn measure(fixture: &Fixture, now: impl Fn() -> f64 + Copy) -> Vec<f64> {
    CASES.iter().map(|(_, case)| median_nanos(now, || case(fixture))).collect()
}

/// `9941 ns`, `245.1 µs`, `8.10 ms`.
pub fn format_time(nanos: f64) -> String {
    if nanos < 10_000.0 {
        format!("{nanos:.0} ns")
    } else if nanos < 1e6 {
        format!("{:.1} µs", nanos / 1e3)
    } else {
        format!("{:.2} ms", nanos / 1e6)
    }
}

/// `docs/bench/<name>`, for a bench to write its report to.
pub fn report_path(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/bench").join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixture is what the cases claim to start from, and every case runs on it: a bench
    /// that panics is found by the test command, not at the next benchmark run.
    #[test]
    fn every_case_runs_on_a_small_registry() {
        let fixture = Fixture::new(120);
        assert_eq!(fixture.decode_agents(), fixture.snapshot.agents);
        assert_eq!(fixture.snapshot.agents.len(), 120);
        assert_eq!(fixture.snapshot.revenue.len(), 40, "every third agent reports");
        let query = AgentsQuery::parse([("status", "Active"), ("limit", "100")]).expect("a valid query");
        let loaded = SnapshotAnswers::decode(&fixture.snapshot_answers_text).expect("decodes");
        assert_eq!(
            loaded.agents_page(&query),
            serde_json::to_string(&stats::agents_page(&fixture.snapshot, &query)).expect("serialises"),
            "the compact answers' page is the snapshot's"
        );
        // The pass cases measure an accepted pass, not a refusal.
        assert!(fixture.pass.verify() && fixture.pass.check_signature());
        assert!(fixture.pass.sign().split('.').count() == 3);
        for (_, case) in CASES {
            case(&fixture);
        }
    }

    /// With a clock that moves 10 ms per reading, a sample starts, runs the case while under
    /// 40 ms (3 runs: at 10, 20 and 30 ms) and ends at 50 ms: 16.67 ms a run.
    #[test]
    fn a_sample_is_its_time_over_its_runs() {
        let clock = core::cell::Cell::new(0.0);
        let now = || {
            clock.set(clock.get() + 10.0);
            clock.get()
        };
        let mut runs = 0;
        let nanos = median_nanos(now, || runs += 1);
        assert_eq!(runs, 1 + SAMPLES * 3, "a warm-up, then three runs a sample");
        assert!((nanos - 50e6 / 3.0).abs() < 1.0, "{nanos}");
        assert_eq!(format_time(nanos), "16.67 ms");
        assert_eq!(
            (format_time(9_941.0), format_time(245_100.0)),
            ("9941 ns".to_owned(), "245.1 µs".to_owned())
        );
    }
}
