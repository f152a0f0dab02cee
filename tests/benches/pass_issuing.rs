//! What issuing KYA passes costs the Worker (the targets of `docs/passes.md`): a pass over the
//! uncached `/kya/:wallet` answer it signs, and a batch of 100 wallets over 100 `/kya` answers.
//! Every part is real on loopback: anvil with the registry and EOA agents that registered
//! themselves, the Worker under `wrangler dev` with pass keys, behind a JSON-RPC proxy that counts
//! requests. Worker CPU is the isolate's, from V8's sampling profiler (`kya_tests::worker_profile`),
//! the kinds interleaved block by block so a slow minute of the machine falls on all alike.
//!
//! `cargo bench -p kya-tests --bench pass_issuing` (or `bash scripts/bench.sh`) prints the report
//! and writes it to `docs/bench/pass-issuing.md`.

use std::time::{Duration, Instant};

use alloy::{primitives::Address, signers::local::PrivateKeySigner};
use futures::future::join_all;
use kya_core::pass::{SigningKey, SigningKeys};
use kya_tests::{
    TestChain,
    edge_fixture::{CountingProxy, EdgeWorker, chain_vars, fresh_ip},
    register_call, repo_root,
    worker_profile::Profiler,
};
use serde_json::{Value, json};

/// Profiled blocks per kind, and requests in each.
const BLOCKS: usize = 11;
const PER_BLOCK: usize = 4;
/// Warm-up requests per kind before anything is profiled.
const WARM_UP: usize = 3;
/// Wallets in a batch: the most one holds.
const BATCH: usize = 100;
/// After a profiled block, time for its `wait_until` work to land in its profile.
const SETTLE: Duration = Duration::from_millis(100);
/// Targets: a pass adds at most this much Worker CPU over the `/kya` answer it signs.
const PASS_TARGET: Duration = Duration::from_millis(1);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    KyaUncached,
    Pass,
    Batch,
}

impl Kind {
    const ALL: [Self; 3] = [Self::KyaUncached, Self::Pass, Self::Batch];

    fn name(self) -> &'static str {
        match self {
            Self::KyaUncached => "`GET /api/v1/kya/:wallet`, uncached (a wallet not asked before)",
            Self::Pass => "`GET /api/v1/kya/:wallet/pass` (a wallet not asked before)",
            Self::Batch => "`POST /api/v1/kya/batch`, 100 wallets",
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // The profiles of the Worker's CPU attach to wrangler's DevTools inspector.
    kya_tests::edge_fixture::open_inspectors();
    kya_tests::run_script("build-worker.sh");
    let started = Instant::now();
    let load = kya_tests::load_averages();
    let chain = TestChain::start().await;
    let proxy = CountingProxy::start(&chain.rpc_url()).await;
    // Each single request names a wallet never asked before; a batch names 100 registered ones.
    let singles = 2 * (WARM_UP + BLOCKS * PER_BLOCK);
    let keys: Vec<PrivateKeySigner> = (0..singles + BATCH).map(|_| PrivateKeySigner::random()).collect();
    for chunk in keys.chunks(16) {
        join_all(chunk.iter().map(|key| async {
            chain.chain.impersonate(key.address()).await.expect("funds the agent");
            chain
                .chain
                .send(key.address(), chain.registry(), &register_call(key.address(), 0))
                .await
                .expect("registers");
        }))
        .await;
    }
    let mut wallets: Vec<Address> = keys.iter().map(PrivateKeySigner::address).collect();
    let batch: Vec<String> =
        wallets.split_off(singles).iter().map(|wallet| wallet.to_checksum(None)).collect();

    let mut vars = chain_vars(&proxy.url, chain.registry());
    let signing = SigningKeys::new(SigningKey::from_seed(&[0x5a; 32]), Vec::new());
    vars.push(("PASS_SIGNING_KEYS", signing.private_json()));
    let worker = EdgeWorker::start(&vars).await;
    let http = kya_tests::http_client();
    let send = async |kind: Kind, wallets: &mut Vec<Address>| -> usize {
        let before = proxy.requests();
        let request = match kind {
            Kind::KyaUncached => {
                http.get(format!("{}/api/v1/kya/{}", worker.base, wallets.pop().expect("a wallet")))
            }
            Kind::Pass => {
                http.get(format!("{}/api/v1/kya/{}/pass", worker.base, wallets.pop().expect("a wallet")))
            }
            Kind::Batch => {
                http.post(format!("{}/api/v1/kya/batch", worker.base)).json(&json!({ "wallets": batch }))
            }
        };
        // Each request from a client of its own: a batch counts 10 against the rate limit.
        let response =
            request.header("cf-connecting-ip", fresh_ip()).send().await.expect("the Worker answers");
        let status = response.status().as_u16();
        let text = response.text().await.expect("a body");
        assert_eq!(status, 200, "{}: {text}", kind.name());
        match kind {
            Kind::KyaUncached => {
                assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["isCompliant"], true)
            }
            Kind::Pass => assert_eq!(text.split('.').count(), 3, "a compact JWS: {text}"),
            Kind::Batch => {
                let body: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(body["results"].as_array().map(Vec::len), Some(BATCH));
            }
        }
        proxy.requests() - before
    };
    let mut rpc: Vec<Vec<usize>> = vec![Vec::new(); Kind::ALL.len()];
    for _ in 0..WARM_UP {
        for (index, kind) in Kind::ALL.into_iter().enumerate() {
            rpc[index].push(send(kind, &mut wallets).await);
        }
    }
    let mut profiler = Profiler::attach(worker.inspector_port()).await;
    let mut cpu: Vec<Vec<Duration>> = vec![Vec::new(); Kind::ALL.len()];
    for _ in 0..BLOCKS {
        for (index, kind) in Kind::ALL.into_iter().enumerate() {
            profiler.start().await;
            for _ in 0..PER_BLOCK {
                rpc[index].push(send(kind, &mut wallets).await);
            }
            tokio::time::sleep(SETTLE).await;
            cpu[index].push(profiler.stop().await.cpu() / PER_BLOCK as u32);
        }
    }
    let medians: Vec<Duration> = cpu.iter().map(|figures| median(figures)).collect();
    let (kya, pass, batch_cpu) = (medians[0], medians[1], medians[2]);
    // Signed: a pass skips the Cache API's store an uncached `/kya` answer makes, and adds the
    // signature and the header's read, so it can come out below.
    let added_ms = (pass.as_secs_f64() - kya.as_secs_f64()) * 1e3;
    let hundred = kya * BATCH as u32;
    let met = |ok: bool| if ok { "met" } else { "not met" };
    let most = |index: usize| rpc[index].iter().max().copied().unwrap_or(0);
    let least = |index: usize| rpc[index].iter().min().copied().unwrap_or(0);

    let mut report = format!(
        "# KYA passes: what issuing costs the Worker\n\n\
         Measured by `cargo bench -p kya-tests --bench pass_issuing` (tests/benches/pass_issuing.rs) on {}; \
         load averages at the start {load} (2 shared cores); the run took {:.0} s. Anvil with the registry and \
         {} EOA agents that registered themselves, the Worker under `wrangler dev` with pass keys behind a \
         JSON-RPC proxy that counts HTTP requests. **Worker CPU**: the isolate's, from V8's sampling profiler \
         (as in [verify.md](verify.md)), per request: the median of {BLOCKS} profiled blocks of {PER_BLOCK} \
         requests per kind, the kinds interleaved block by block, after {WARM_UP} warm-up requests each. A \
         loaded machine inflates every CPU figure: compare the rows.\n\n\
         | Request | Worker CPU | RPC HTTP requests (least to most) |\n|---|---:|---:|\n",
        kya_tests::commit_measured(&["core", "edge-api", "wrangler.toml", "Cargo.lock"]),
        started.elapsed().as_secs_f64(),
        keys.len(),
    );
    for (index, kind) in Kind::ALL.into_iter().enumerate() {
        report.push_str(&format!(
            "| {} | {} | {} to {} |\n",
            kind.name(),
            ms(medians[index]),
            least(index),
            most(index)
        ));
    }
    report.push_str(&format!(
        "\n## Against the targets\n\n\
         - A pass adds **{added_ms:+.2} ms** of Worker CPU over the uncached `/kya` answer it signs (target at \
         most {}: {}). It reads the same record and the latest block's header beside it, in one round trip: \
         {} HTTP requests, sent together; it signs (Ed25519, `jws::sign`) and it is not stored in the \
         Cache API, where the uncached `/kya` answer is, so the difference can come out below zero.\n\
         - A batch of 100 costs **{}** of Worker CPU against {} for 100 uncached `/kya` answers ({:.1}× less: {}), \
         and {} RPC HTTP request(s) (target one round trip: {}).\n",
        ms(PASS_TARGET),
        met(added_ms <= PASS_TARGET.as_secs_f64() * 1e3),
        most(1),
        ms(batch_cpu),
        ms(hundred),
        hundred.as_secs_f64() / batch_cpu.as_secs_f64().max(1e-9),
        met(batch_cpu < hundred),
        most(2),
        met(most(2) == 1),
    ));
    print!("{report}");
    std::fs::write(repo_root().join("docs/bench/pass-issuing.md"), report).expect("writes the report");
}

fn median(values: &[Duration]) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1e3)
}
