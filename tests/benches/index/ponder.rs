//! Ponder, the indexer a user would pick instead (`../shared/peer-ponder/`, a Ponder 0.16 app
//! with embedded PGlite serving the five registry-wide endpoints): installed from the project's
//! own copy, started against the benchmark's chain, stopped by its pid.
//!
//! The shared folder is never written to: it is copied (without `node_modules/` or `.ponder/`)
//! to `target/peer-ponder/`, and `npm ci` runs there with the project's node and npm, once per
//! `package-lock.json` (a stamp beside `node_modules/`, as `scripts/bootstrap.sh` keeps one).

use std::{
    fs::File,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use alloy::{primitives::Address, providers::Provider};
use serde_json::Value;

use kya_tests::{
    TestChain, repo_root,
    rpc_proxy::{self, RpcAction},
};

/// Where the copy is installed, under the workspace's `target/`.
const SCRATCH: &str = "target/peer-ponder";

/// The peer's files copied to [`SCRATCH`] and its packages installed; the folder.
pub(crate) fn install() -> PathBuf {
    let root = repo_root();
    let source = root.join("../shared/peer-ponder");
    assert!(source.join("package.json").is_file(), "no Ponder peer at {}", source.display());
    let scratch = root.join(SCRATCH);
    std::fs::create_dir_all(&scratch).expect("target/peer-ponder");
    // Everything but the installed packages is replaced, so the copy follows the source.
    for entry in std::fs::read_dir(&scratch).expect("target/peer-ponder").flatten() {
        if entry.file_name() != "node_modules" {
            let path = entry.path();
            let removed =
                if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
            removed.unwrap_or_else(|error| panic!("removing {}: {error}", path.display()));
        }
    }
    copy_tree(&source, &scratch);
    let lock = std::fs::read(scratch.join("package-lock.json")).expect("the peer's package-lock.json");
    let stamp = scratch.join("node_modules/.kya-lock-stamp");
    let wanted = alloy::primitives::keccak256(&lock).to_string();
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(wanted.as_str()) {
        eprintln!("installing Ponder in {SCRATCH} (npm ci)");
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&scratch)
            .status()
            .expect("npm runs (run scripts/bootstrap.sh)");
        assert!(status.success(), "npm ci of the Ponder peer failed");
        std::fs::write(&stamp, wanted).expect("the install stamp");
    }
    scratch
}

/// `from` copied into `to`, but `node_modules/` and `.ponder/`; files made writable (the shared
/// folder's are read-only, and the next install replaces them).
fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("the peer's folder").flatten() {
        let name = entry.file_name();
        if name == "node_modules" || name == ".ponder" {
            continue;
        }
        let (source, target) = (entry.path(), to.join(&name));
        if source.is_dir() {
            std::fs::create_dir_all(&target).expect("a folder of the copy");
            copy_tree(&source, &target);
        } else {
            std::fs::copy(&source, &target).expect("a file of the copy");
            let mut permissions = std::fs::metadata(&target).expect("the copy").permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            permissions.set_readonly(false);
            std::fs::set_permissions(&target, permissions).expect("a writable copy");
        }
    }
}

/// Ponder's way to the chain: a JSON-RPC proxy on loopback that counts its HTTP requests and
/// JSON-RPC calls, as the Worker's counting proxy does, and asks every `eth_call` at the head.
///
/// Why at the head: the peer reads `getAgent` at each registration's block (for the hashes,
/// the scope and `selfModifying`, which the registry sets once, at registration, and none of the
/// five answers shows), and the benchmark's anvil keeps the state of only its last blocks
/// (`STATES_KEPT` in main.rs: a copy of the state per block is about 170 MB at 100,000 agents),
/// so a read at a seeding block fails (`BlockOutOfRangeError`) and Ponder stops. At the head the
/// same fields read the same, for the same cost to anvil.
pub(crate) struct PonderProxy {
    pub(crate) url: String,
    requests: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
}

impl PonderProxy {
    pub(crate) async fn start(upstream: &str) -> Self {
        let (requests, calls) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (counted_requests, counted_calls) = (requests.clone(), calls.clone());
        let url = rpc_proxy::start(
            Some(upstream.to_owned()),
            Arc::new(move |body: &str| {
                counted_requests.fetch_add(1, Ordering::SeqCst);
                let Ok(mut parsed) = serde_json::from_str::<Value>(body) else {
                    counted_calls.fetch_add(1, Ordering::SeqCst);
                    return RpcAction::Forward(body.to_owned());
                };
                let calls = match &mut parsed {
                    Value::Array(batch) => {
                        batch.iter_mut().for_each(at_head);
                        batch.len()
                    }
                    single => {
                        at_head(single);
                        1
                    }
                };
                counted_calls.fetch_add(calls, Ordering::SeqCst);
                RpcAction::Forward(parsed.to_string())
            }),
        )
        .await;
        Self { url, requests, calls }
    }

    /// HTTP requests and JSON-RPC calls forwarded so far.
    pub(crate) fn counts(&self) -> (usize, usize) {
        (self.requests.load(Ordering::SeqCst), self.calls.load(Ordering::SeqCst))
    }
}

/// An `eth_call` at a block asked at `latest` instead ([`PonderProxy`]).
fn at_head(call: &mut Value) {
    if call["method"] == "eth_call"
        && let Some(block) = call["params"].get_mut(1)
    {
        *block = Value::from("latest");
    }
}

/// What a Ponder process is started with; the same for every restart.
pub(crate) struct Config {
    /// The installed app ([`install`]).
    pub(crate) app: PathBuf,
    /// The JSON-RPC endpoint ([`PonderProxy`]).
    pub(crate) rpc_url: String,
    pub(crate) chain_id: u64,
    pub(crate) registry: Address,
    /// Its PGlite database, kept across restarts.
    pub(crate) pglite: PathBuf,
}

/// A running `ponder start`, stopped by its pid when dropped.
pub(crate) struct Ponder {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub(crate) base: String,
    log: PathBuf,
}

impl Ponder {
    /// Starts Ponder on a free loopback port with [`Config`]'s PGlite directory, indexing from
    /// block 0, telemetry off.
    pub(crate) fn start(config: &Config) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("a free port")
            .local_addr()
            .expect("bound")
            .port();
        let log = config.pglite.with_extension(format!("{port}.log"));
        let output = File::create(&log).expect("Ponder's log");
        let child = Command::new(config.app.join("node_modules/.bin/ponder"))
            .args(["start", "--schema", "bench", "--port", &port.to_string(), "-H", "127.0.0.1"])
            // One JSON object a line: [`Ponder::synced`] reads its "Indexed block" lines.
            .args(["--log-format", "json"])
            .current_dir(&config.app)
            .env(format!("PONDER_RPC_URL_{}", config.chain_id), &config.rpc_url)
            .env("CHAIN_ID", config.chain_id.to_string())
            .env("REGISTRY_ADDRESS", config.registry.to_checksum(None))
            .env("START_BLOCK", "0")
            .env("PONDER_PGLITE_DIR", &config.pglite)
            .env("PONDER_TELEMETRY_DISABLED", "true")
            .stdin(Stdio::null())
            .stdout(output.try_clone().expect("log handle"))
            .stderr(output)
            .spawn()
            .expect("Ponder starts");
        Self { child, base: format!("http://127.0.0.1:{port}"), log }
    }

    /// Waits until Ponder has indexed the chain's head block in this process, at most `within`;
    /// panics with the end of its log if it exits or takes longer.
    ///
    /// `/status` alone does not tell: on a restart Ponder's crash recovery reverts every row
    /// written after its last finalized checkpoint (30 blocks behind the head on chain 84532)
    /// but leaves `_ponder_checkpoint`, which `/status` and the answers' `X-Indexed-Block` read,
    /// naming the old head until live indexing has re-indexed those blocks. Answers asked in
    /// between name the head yet lack its last 30 blocks (at 1,000 agents: the three
    /// registrations of the last freshness measurement). Live indexing logs "Indexed block"
    /// for each block once its checkpoint is written: the head's line in this process's log,
    /// with `/status` at the head, is the sign.
    pub(crate) async fn synced(&mut self, chain: &TestChain, within: Duration) {
        let head = chain.chain.provider().get_block_number().await.expect("the head");
        let http = kya_tests::http_client();
        let started = Instant::now();
        let mut early = None;
        loop {
            let status =
                http.get(format!("{}/status", self.base)).timeout(Duration::from_secs(5)).send().await;
            let block = match status {
                Ok(answer) => answer
                    .json::<serde_json::Value>()
                    .await
                    .ok()
                    .and_then(|body| body.as_object()?.values().next()?["block"]["number"].as_u64()),
                Err(_) => None,
            };
            if block == Some(head) {
                if self.indexed(head) {
                    if let Some((agents, at)) = early {
                        eprintln!(
                            "Ponder's /status named block {head} {at:.1?} before it had indexed it; \
                             /api/v1/stats then counted {agents} agents"
                        );
                    }
                    return;
                }
                if early.is_none() {
                    let stats = http.get(format!("{}/api/v1/stats", self.base)).send().await;
                    let agents = match stats {
                        Ok(answer) => answer
                            .json::<Value>()
                            .await
                            .map_or(Value::Null, |body| body["totalAgents"].clone()),
                        Err(_) => Value::Null,
                    };
                    early = Some((agents, started.elapsed()));
                }
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("Ponder exited ({status}) before it synced:\n{}", self.log_tail());
            }
            assert!(
                started.elapsed() < within,
                "Ponder did not reach block {head} within {within:?} (at {block:?}):\n{}",
                self.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Whether this process has logged "Indexed block" for `block` or a later one.
    fn indexed(&self, block: u64) -> bool {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        log.lines().filter_map(|line| serde_json::from_str::<Value>(line).ok()).any(|line| {
            line["msg"] == "Indexed block" && line["number"].as_u64().is_some_and(|number| number >= block)
        })
    }

    /// The process's id (its children, esbuild's service among them, run below it).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Ponder {
    /// SIGINT (Ponder closes PGlite and ends), SIGKILL after 15 s.
    fn drop(&mut self) {
        kya_tests::interrupt_then_kill(&mut self.child, Duration::from_secs(15));
    }
}
