//! What `POST /api/v1/kya/verify` costs over `GET /api/v1/kya/:wallet`, with every part real on
//! loopback: anvil with the registry, EOA agents that registered themselves, the Worker under
//! `wrangler dev` (its nonces in the real Durable Object) behind a JSON-RPC proxy that counts
//! round trips, and requests signed by `kya_core::erc8128` with a fresh nonce each.
//!
//! - Cold: the first request of a freshly started Worker (after the fixture's start-up probe of
//!   `/health`, which reads the latest block), time and RPC round trips on [`COLD_TIMED`] Workers
//!   per kind, the Worker's CPU on [`COLD_PROFILED`] more (apart: the profiler slows what it
//!   samples).
//! - Warm: one Worker, the kinds interleaved round by round ([`REPEATS`] rounds, so drift hits
//!   all alike), from one returning client per kind; then the Worker's CPU from V8's profiler
//!   (`kya_tests::worker_profile`) in [`BLOCKS`] blocks of [`PER_BLOCK`] requests per kind, also
//!   interleaved.
//!
//! With the Worker built with `WASM_KEEP_NAMES=1` the profiles name the wasm's functions, and the
//! nonce store's Durable Object (in the Worker's isolate under `wrangler dev`) is told apart from
//! the Worker's own CPU (`split.rs`).
//!
//! `WASM_KEEP_NAMES=1 cargo bench -p kya-tests --bench verify` (or `bash scripts/bench.sh`) prints
//! the report (`report.rs`) and writes it to `docs/bench/verify.md`, in about two minutes once
//! built. `KYA_PROFILE_DIR=<folder>` keeps the profiles as `.cpuprofile` files. Absolute times
//! depend on the machine; compare the rows within one report.

mod report;
mod split;

use std::time::{Duration, Instant};

use alloy::{primitives::Address, signers::local::PrivateKeySigner};
use base64::Engine;
use futures::future::join_all;
use kya_core::erc8128::{RequestToSign, SignParams, sign_request_with_secret};
use kya_tests::{
    TestChain,
    edge_fixture::{CountingProxy, EdgeWorker, chain_vars, fresh_ip},
    register_call, repo_root,
    worker_profile::{Profile, Profiler},
};
use serde_json::{Value, json};

/// Fresh Workers per kind for the cold time, and for the cold CPU.
const COLD_TIMED: usize = 7;
const COLD_PROFILED: usize = 5;
/// Warm timed requests per kind (rounds); each kind's requests come from one client, under the
/// rate limit's 60 a minute.
const REPEATS: usize = 41;
/// Warm profiled blocks per kind, and requests in each.
const BLOCKS: usize = 15;
const PER_BLOCK: usize = 6;
/// Profiled blocks a client sends before the next kind's client takes over: 48 requests, under
/// the rate limit's 60 a minute.
const BLOCKS_PER_CLIENT: usize = 8;
/// Warm-up requests per kind before anything is timed.
const WARM_UP: usize = 2;
/// After a profiled block, time for its `wait_until` work (the rate-limit counter's KV write) to
/// land in the block's profile.
const SETTLE: Duration = Duration::from_millis(100);

/// The request a provider received and forwards: the one `tests/it/edge_api/verify.rs` signs.
const URL: &str = "https://api.provider.example/v1/infer?model=small&stream=0";
const BODY: &[u8] = br#"{"prompt":"hello"}"#;

/// What one request is, in the order of the tables.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A path no route serves: the Worker's floor (routing, rate limit, a 404).
    NotFound,
    /// `/kya/:wallet` of one wallet again and again: the isolate's memory cache.
    KyaCached,
    /// `/kya/:wallet` of a registered wallet not asked before: the chain read, a cache miss.
    KyaUncached,
    /// `verify` of the same EOA agent, a fresh nonce each time: its Durable Object warm.
    VerifySameSigner,
    /// `verify` of another EOA agent each time: a Durable Object never used, a wallet never read.
    VerifyNewSigner,
    /// `verify` refused `digest_mismatch` (the body changed after signing): the body parsed and
    /// its digest checked, refused before the signature is recovered, nothing read or claimed.
    VerifyDigestMismatch,
    /// `verify` refused `bad_signature` (the query changed after signing): the signature recovers
    /// to another address, so the keyid's account is asked as an ERC-1271 contract (its standing
    /// and `isValidSignature` in one read), and it has no code; no nonce claimed.
    VerifyBadSignature,
}

const WARM_KINDS: [Kind; 7] = [
    Kind::NotFound,
    Kind::KyaCached,
    Kind::KyaUncached,
    Kind::VerifySameSigner,
    Kind::VerifyNewSigner,
    Kind::VerifyDigestMismatch,
    Kind::VerifyBadSignature,
];
const COLD_KINDS: [Kind; 2] = [Kind::KyaUncached, Kind::VerifySameSigner];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::NotFound => "unknown path (404 from the Worker)",
            Kind::KyaCached => "`GET /api/v1/kya/:wallet`, cached (the isolate's memory)",
            Kind::KyaUncached => "`GET /api/v1/kya/:wallet`, uncached (a wallet not asked before)",
            Kind::VerifySameSigner => "`POST /api/v1/kya/verify`, the same signer, a fresh nonce",
            Kind::VerifyNewSigner => "`POST /api/v1/kya/verify`, a new signer (a new Durable Object)",
            Kind::VerifyDigestMismatch => {
                "`POST /api/v1/kya/verify` refused `digest_mismatch` (before recovery: no read, no claim)"
            }
            Kind::VerifyBadSignature => {
                "`POST /api/v1/kya/verify` refused `bad_signature` (recovery, then an ERC-1271 read; no claim)"
            }
        }
    }

    /// A file name's part for the kind.
    fn slug(self) -> &'static str {
        match self {
            Kind::NotFound => "not-found",
            Kind::KyaCached => "kya-cached",
            Kind::KyaUncached => "kya-uncached",
            Kind::VerifySameSigner => "verify-same-signer",
            Kind::VerifyNewSigner => "verify-new-signer",
            Kind::VerifyDigestMismatch => "verify-digest-mismatch",
            Kind::VerifyBadSignature => "verify-bad-signature",
        }
    }

    fn cold_name(self) -> &'static str {
        match self {
            Kind::KyaUncached => "`GET /api/v1/kya/:wallet`",
            _ => "`POST /api/v1/kya/verify` (its Durable Object new too)",
        }
    }
}

/// The agents the requests name: one that signs again and again, and unused ones.
struct Agents {
    chain_id: u64,
    main: PrivateKeySigner,
    /// Wallets for uncached `/kya` reads, each asked once.
    unread: Vec<Address>,
    /// Signers for `verify` from a new signer, each used once.
    unused: Vec<PrivateKeySigner>,
    nonces: u64,
    /// Agents registered for the run.
    registered: usize,
}

/// One request to send, and what its answer must be.
struct Prepared {
    method: &'static str,
    path: String,
    body: Option<String>,
    kind: Kind,
    /// The wallet a `/kya` answer or an accepted verification must name.
    wallet: Option<Address>,
}

impl Agents {
    fn next(&mut self, kind: Kind) -> Prepared {
        let kya = |wallet: Address| Prepared {
            method: "GET",
            path: format!("/api/v1/kya/{wallet}"),
            body: None,
            kind,
            wallet: Some(wallet),
        };
        match kind {
            Kind::NotFound => {
                Prepared { method: "GET", path: "/api/v1/nothing".into(), body: None, kind, wallet: None }
            }
            Kind::KyaCached => kya(self.main.address()),
            Kind::KyaUncached => kya(self.unread.pop().expect("enough registered wallets")),
            Kind::VerifySameSigner | Kind::VerifyDigestMismatch | Kind::VerifyBadSignature => {
                let key = self.main.clone();
                self.verify(kind, &key)
            }
            Kind::VerifyNewSigner => {
                let key = self.unused.pop().expect("enough registered signers");
                self.verify(kind, &key)
            }
        }
    }

    /// The verify body for [`URL`] and [`BODY`] signed now by `key` with a fresh nonce; the body or
    /// the query changed after signing for the refused kinds.
    fn verify(&mut self, kind: Kind, key: &PrivateKeySigner) -> Prepared {
        self.nonces += 1;
        let nonce = format!("bench-{}", self.nonces);
        let created = unix_now();
        let request = RequestToSign {
            method: "POST",
            url: URL,
            headers: &[("content-type", "application/json")],
            body: Some(BODY),
        };
        let params = SignParams {
            chain_id: self.chain_id,
            created,
            expires: created + 60,
            nonce: Some(&nonce),
            extra_components: &[],
        };
        let secret: [u8; 32] = key.credential().to_bytes().into();
        let signed = sign_request_with_secret(&request, &params, &secret).expect("signs");
        let mut headers = serde_json::Map::new();
        headers.insert("content-type".into(), "application/json".into());
        for (name, value) in signed.pairs() {
            headers.insert(name.into(), value.into());
        }
        let url = if kind == Kind::VerifyBadSignature {
            URL.replace("model=small", "model=large")
        } else {
            URL.into()
        };
        let sent: &[u8] = if kind == Kind::VerifyDigestMismatch { br#"{"prompt":"bye"}"# } else { BODY };
        let body = json!({
            "method": "POST",
            "url": url,
            "headers": headers,
            "body": base64::engine::general_purpose::STANDARD.encode(sent),
        });
        let accepted = matches!(kind, Kind::VerifySameSigner | Kind::VerifyNewSigner);
        Prepared {
            method: "POST",
            path: "/api/v1/kya/verify".into(),
            body: Some(body.to_string()),
            kind,
            wallet: accepted.then(|| key.address()),
        }
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_secs()
}

/// Requests sent again because the connection closed before an answer (a pooled connection the
/// server had just closed, say): reported, and at most [`RETRY_MARGIN`] in a run.
static RESENT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Spare wallets and signers in each pool, for requests sent again.
const RETRY_MARGIN: usize = 8;

/// Sends `prepared` as `ip` and checks its answer; the time to the answer's last byte. A request
/// whose connection closed before an answer is sent again as a new request of its kind (a new
/// nonce, and an unused wallet or signer where the kind needs one), whose time counts instead.
async fn send(
    http: &reqwest::Client,
    base: &str,
    ip: &str,
    agents: &mut Agents,
    prepared: Prepared,
) -> Duration {
    let mut prepared = prepared;
    loop {
        match attempt(http, base, ip, &prepared).await {
            Ok(time) => return time,
            Err(error) => {
                let resent = RESENT.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                assert!(resent <= RETRY_MARGIN, "{}: {error}", prepared.kind.name());
                eprintln!("sent again ({error}): {}", prepared.kind.name());
                prepared = agents.next(prepared.kind);
            }
        }
    }
}

/// One try of [`send`]: an error when the connection failed before a whole answer.
async fn attempt(
    http: &reqwest::Client,
    base: &str,
    ip: &str,
    prepared: &Prepared,
) -> Result<Duration, reqwest::Error> {
    let method = reqwest::Method::from_bytes(prepared.method.as_bytes()).expect("a method");
    let mut request = http.request(method, format!("{base}{}", prepared.path)).header("cf-connecting-ip", ip);
    if let Some(body) = &prepared.body {
        request = request.header("content-type", "application/json").body(body.clone());
    }
    let started = Instant::now();
    let response = request.send().await?;
    let status = response.status().as_u16();
    let cache = response.headers().get("x-cache").and_then(|value| value.to_str().ok()).map(str::to_owned);
    let text = response.text().await?;
    let time = started.elapsed();
    check(prepared, status, cache.as_deref(), &text);
    Ok(time)
}

/// The answer each kind must get: a bench that measured errors would measure nothing.
fn check(prepared: &Prepared, status: u16, cache: Option<&str>, text: &str) {
    let what = prepared.kind.name();
    let body: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let wallet = prepared.wallet.map(|wallet| wallet.to_checksum(None));
    match prepared.kind {
        Kind::NotFound => assert_eq!(status, 404, "{what}: {text}"),
        Kind::KyaCached | Kind::KyaUncached => {
            assert_eq!(status, 200, "{what}: {text}");
            assert_eq!(body["wallet"].as_str(), wallet.as_deref(), "{what}: {text}");
            assert_eq!(body["isCompliant"], true, "{what}: {text}");
            if prepared.kind == Kind::KyaUncached {
                assert_eq!(cache, Some("MISS"), "{what}: a wallet not asked before");
            }
        }
        Kind::VerifySameSigner | Kind::VerifyNewSigner => {
            assert_eq!(status, 200, "{what}: {text}");
            assert_eq!(body["verified"], true, "{what}: {text}");
            assert_eq!(body["signer"].as_str(), wallet.as_deref(), "{what}: {text}");
            assert_eq!(body["kya"]["isCompliant"], true, "{what}: {text}");
        }
        Kind::VerifyDigestMismatch | Kind::VerifyBadSignature => {
            let reason =
                if prepared.kind == Kind::VerifyBadSignature { "bad_signature" } else { "digest_mismatch" };
            assert_eq!(status, 200, "{what}: {text}");
            assert_eq!(body["reason"], reason, "{what}: {text}");
        }
    }
}

/// RPC HTTP requests and the JSON-RPC calls in them.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Rpc {
    requests: usize,
    calls: usize,
}

impl Rpc {
    fn read(proxy: &CountingProxy) -> Self {
        Self { requests: proxy.requests(), calls: proxy.calls() }
    }

    fn since(self, before: Self) -> Self {
        Self { requests: self.requests - before.requests, calls: self.calls - before.calls }
    }
}

/// One kind's cold figures.
struct Cold {
    kind: Kind,
    times: Vec<Duration>,
    rpc: Vec<Rpc>,
    /// One per profiled Worker, of its first request.
    profiles: Vec<Profile>,
}

/// One kind's warm figures.
struct Warm {
    kind: Kind,
    times: Vec<Duration>,
    rpc: Vec<Rpc>,
    /// One per profiled block of [`PER_BLOCK`] requests.
    profiles: Vec<Profile>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // The profiles of the Worker's CPU attach to wrangler's DevTools inspector.
    kya_tests::edge_fixture::open_inspectors();
    // Built before anything is timed (the fixture's own build is then a quick check).
    kya_tests::run_script("build-worker.sh");
    let started = Instant::now();
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|text| text.split_whitespace().take(3).collect::<Vec<_>>().join(", "))
        .unwrap_or_else(|_| "unknown".into());
    let chain = TestChain::start().await;
    let proxy = CountingProxy::start(&chain.rpc_url()).await;
    let mut agents = register_agents(&chain).await;
    let registered = agents.registered;
    eprintln!("{registered} agents registered in {:.1?}", started.elapsed());

    let mut cold = Vec::new();
    for kind in COLD_KINDS {
        cold.push(Cold { kind, times: Vec::new(), rpc: Vec::new(), profiles: Vec::new() });
    }
    // Kinds alternate, so a slow minute of the machine does not fall on one kind.
    for sample in 0..COLD_TIMED.max(COLD_PROFILED) {
        for (kind, figures) in COLD_KINDS.iter().zip(&mut cold) {
            if sample < COLD_TIMED {
                let (time, rpc, _) = cold_request(&chain, &proxy, &mut agents, *kind, false).await;
                figures.times.push(time);
                figures.rpc.push(rpc);
            }
            if sample < COLD_PROFILED {
                let (_, _, profile) = cold_request(&chain, &proxy, &mut agents, *kind, true).await;
                figures.profiles.push(profile.expect("profiled"));
            }
        }
    }
    eprintln!("cold requests measured at {:.1?}", started.elapsed());

    let warm = warm(&chain, &proxy, &mut agents).await;
    let took = started.elapsed();
    let report = report::render(&cold, &warm, &load, took, registered);
    print!("{report}");
    let folder = repo_root().join("docs/bench");
    std::fs::create_dir_all(&folder).expect("docs/bench");
    std::fs::write(folder.join("verify.md"), report).expect("writing the report");
}

/// The main agent and the pools of unread wallets and unused signers, every one an EOA agent
/// that registered itself (a compliant root).
async fn register_agents(chain: &TestChain) -> Agents {
    let per_pool = WARM_UP + REPEATS + BLOCKS * PER_BLOCK + RETRY_MARGIN;
    // The cold `/kya` requests read unread wallets too.
    let unread_pool = per_pool + COLD_TIMED + COLD_PROFILED;
    let keys: Vec<PrivateKeySigner> =
        (0..1 + unread_pool + per_pool).map(|_| PrivateKeySigner::random()).collect();
    for chunk in keys.chunks(16) {
        join_all(chunk.iter().map(|key| async move {
            chain.chain.impersonate(key.address()).await.expect("funds the agent");
            chain
                .chain
                .send(key.address(), chain.registry(), &register_call(key.address(), 0))
                .await
                .expect("registers");
        }))
        .await;
    }
    let mut keys = keys.into_iter();
    let main = keys.next().expect("a key");
    let unread: Vec<Address> = keys.by_ref().take(unread_pool).map(|key| key.address()).collect();
    let unused: Vec<PrivateKeySigner> = keys.collect();
    let registered = 1 + unread.len() + unused.len();
    Agents { chain_id: chain.chain_id(), main, unread, unused, nonces: 0, registered }
}

/// One `kind` request as the first of a Worker started for it: its time, its RPC round trips
/// and, when `profiled`, the Worker's profile of it (the profiler then running through it).
async fn cold_request(
    chain: &TestChain,
    proxy: &CountingProxy,
    agents: &mut Agents,
    kind: Kind,
    profiled: bool,
) -> (Duration, Rpc, Option<Profile>) {
    let worker = EdgeWorker::start(&chain_vars(&proxy.url, chain.registry())).await;
    let http = kya_tests::http_client();
    let mut profiler = None;
    if profiled {
        let mut attached = Profiler::attach(worker.inspector_port()).await;
        attached.start().await;
        profiler = Some(attached);
    }
    // A verification is the main agent's: this Worker never read its wallet nor used its object.
    let prepared = agents.next(kind);
    let before = Rpc::read(proxy);
    let time = send(&http, &worker.base, &fresh_ip(), agents, prepared).await;
    let rpc = Rpc::read(proxy).since(before);
    let profile = match profiler.as_mut() {
        Some(profiler) => {
            tokio::time::sleep(SETTLE).await;
            let profile = profiler.stop().await;
            profile.keep(&format!("verify-cold-{}-{}", kind.slug(), unix_now()));
            Some(profile)
        }
        None => None,
    };
    drop(profiler);
    drop(worker);
    (time, rpc, profile)
}

/// Every warm kind on one Worker: timed and counted round by round, then profiled block by block.
async fn warm(chain: &TestChain, proxy: &CountingProxy, agents: &mut Agents) -> Vec<Warm> {
    let worker = EdgeWorker::start(&chain_vars(&proxy.url, chain.registry())).await;
    let http = kya_tests::http_client();
    let mut figures: Vec<Warm> = WARM_KINDS
        .iter()
        .map(|&kind| Warm { kind, times: Vec::new(), rpc: Vec::new(), profiles: Vec::new() })
        .collect();
    // One returning client per kind and phase, each under the rate limit.
    let timing_ips: Vec<String> = WARM_KINDS.iter().map(|_| fresh_ip()).collect();
    let mut profiling_ips: Vec<String> = Vec::new();

    for _ in 0..WARM_UP {
        for (kind, ip) in WARM_KINDS.iter().zip(&timing_ips) {
            let prepared = agents.next(*kind);
            send(&http, &worker.base, ip, agents, prepared).await;
        }
    }
    for _ in 0..REPEATS {
        for ((kind, figures), ip) in WARM_KINDS.iter().zip(&mut figures).zip(&timing_ips) {
            let prepared = agents.next(*kind);
            let before = Rpc::read(proxy);
            figures.times.push(send(&http, &worker.base, ip, agents, prepared).await);
            figures.rpc.push(Rpc::read(proxy).since(before));
        }
    }

    let mut profiler = Profiler::attach(worker.inspector_port()).await;
    for block in 0..BLOCKS {
        if block.is_multiple_of(BLOCKS_PER_CLIENT) {
            profiling_ips = WARM_KINDS.iter().map(|_| fresh_ip()).collect();
        }
        for ((kind, figures), ip) in WARM_KINDS.iter().zip(&mut figures).zip(&profiling_ips) {
            // Signed before the block: signing is the client's work, not the Worker's.
            let prepared: Vec<Prepared> = (0..PER_BLOCK).map(|_| agents.next(*kind)).collect();
            profiler.start().await;
            for request in prepared {
                send(&http, &worker.base, ip, agents, request).await;
            }
            tokio::time::sleep(SETTLE).await;
            let profile = profiler.stop().await;
            profile.keep(&format!("verify-{}-{block}", kind.slug()));
            figures.profiles.push(profile);
        }
    }
    figures
}
