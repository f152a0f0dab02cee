//! Fixtures of the edge API end-to-end tests: the real Worker under `wrangler dev`, a counting
//! JSON-RPC proxy on loopback, and an HTTP client that speaks as a chosen client IP.

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::Command,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use alloy::primitives::Address;
use serde_json::Value;

use crate::{
    ensure_built, openapi,
    rpc_proxy::{self, RpcAction},
    wrangler_host::{Pending, StartRequest, WranglerHost},
};

/// Builds the Worker once per test process (`scripts/build-worker.sh`, a few seconds when
/// nothing changed; [`ensure_built`]), so `cargo test` alone never runs a stale or missing build.
fn build_worker() {
    static BUILT: Mutex<bool> = Mutex::new(false);
    let mut built = BUILT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if !*built {
        ensure_built("build-worker.sh");
        *built = true;
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("bound").port()
}

/// The Worker under `wrangler dev` on a free port, with a fresh state directory (cold Cache API
/// and KV): a dev server of the test process's wrangler host ([`WranglerHost`]), configured as
/// `wrangler dev`'s flags configure it. Stopped when dropped.
#[derive(Debug)]
pub struct EdgeWorker {
    /// Its name in the host.
    name: String,
    /// How its last start ended, once it has.
    starting: Pending,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// Wrangler's DevTools inspector (`crate::worker_profile`), if [`open_inspectors`] asked
    /// for one.
    inspector_port: Option<u16>,
    log: PathBuf,
    /// What it was started with, for [`EdgeWorker::restart`].
    vars: Vec<(String, String)>,
    indexed: bool,
    _state: tempfile::TempDir,
}

impl EdgeWorker {
    /// Starts the Worker with `vars` (`NAME`, value) passed as `--var NAME:value`, and waits
    /// until the Worker itself answers `/health` (with any status: a degraded Worker is still
    /// up). Wrangler's own proxy may answer a bare 500 while the runtime is still starting; only
    /// an answer with the Worker's `X-RateLimit-Remaining` counts. A wrangler that exits before
    /// answering (a port taken between choosing it and binding it) is started again on other
    /// ports, up to three times in all.
    pub async fn start(vars: &[(&str, String)]) -> Self {
        Self::start_with(vars, false).await
    }

    /// [`EdgeWorker::start`] with the registry index: its D1 tables as the project's migrations
    /// create them, copied into the fresh state directory ([`crate::local_d1`]),
    /// and the scheduled handler reachable through `--test-scheduled` ([`EdgeWorker::run_index`]).
    pub async fn start_indexed(vars: &[(&str, String)]) -> Self {
        Self::start_with(vars, true).await
    }

    async fn start_with(vars: &[(&str, String)], indexed: bool) -> Self {
        build_worker();
        for attempt in 1..=3 {
            let mut worker = Self::spawn(vars, indexed);
            if worker.answers(attempt).await {
                return worker;
            }
        }
        panic!("wrangler dev exited before answering three times (its output is above)");
    }

    /// Stops the Worker and starts it again on the same state directory (its D1 index, KV and
    /// Cache API as they were) with the same vars, on free ports (`base` and the inspector's
    /// port change), and waits as [`EdgeWorker::start`] does: a fresh isolate, so a request
    /// after it is cold. A profiler attached before must be attached again.
    pub async fn restart(&mut self) {
        self.restart_after(|_| ()).await;
    }

    /// [`EdgeWorker::restart`], with `between` run while the Worker is stopped: for a test that
    /// writes the local index from a second process ([`EdgeWorker::execute_index`], an
    /// operator's statement). With the runtime running, such a write was seen to leave the
    /// Worker's next D1 query unanswered for over two minutes on a loaded machine. The log
    /// starts anew.
    pub async fn restart_after<R>(&mut self, between: impl FnOnce(&Self) -> R) -> R {
        self.stop();
        let result = between(self);
        self.start_again().await;
        result
    }

    /// Launches the stopped Worker again and waits until it answers.
    async fn start_again(&mut self) {
        for attempt in 1..=3 {
            self.launch();
            if self.answers(attempt).await {
                return;
            }
        }
        panic!("wrangler dev exited before answering three times after a restart (its output is above)");
    }

    /// Waits until the Worker itself answers `/health`: true once it does, false if wrangler
    /// failed to start it first (its output printed).
    async fn answers(&mut self, attempt: u32) -> bool {
        let client = crate::http_client();
        let started = Instant::now();
        loop {
            let answered_by_worker = answered_by_worker(&client, &self.base).await;
            // Ours, not another test's Worker on a port ours failed to bind: wrangler says
            // it is ready on exactly this address.
            if answered_by_worker && self.output().contains(&format!("Ready on {}", self.base)) {
                return true;
            }
            if let Some(Err(failure)) = self.starting.outcome() {
                eprintln!(
                    "wrangler failed to start the Worker, attempt {attempt}: {failure}\n{}",
                    self.output()
                );
                return false;
            }
            assert!(
                started.elapsed() < Duration::from_secs(90),
                "wrangler dev did not answer within 90 s:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// One `wrangler dev` on free ports, with a fresh state directory (the index's tables
    /// created in it first when `indexed`).
    fn spawn(vars: &[(&str, String)], indexed: bool) -> Self {
        let state = tempfile::tempdir().expect("a temporary directory");
        if indexed {
            crate::local_d1::create_index_tables(&state.path().join("state"));
        }
        let vars: Vec<(String, String)> =
            vars.iter().map(|(name, value)| ((*name).to_owned(), value.clone())).collect();
        let name = WranglerHost::get().new_worker_name();
        let (starting, base, inspector_port, log) = launch_wrangler(&name, state.path(), &vars, indexed);
        Self { name, starting, base, inspector_port, log, vars, indexed, _state: state }
    }

    /// [`launch_wrangler`] on this Worker's state directory, vars and ports chosen anew.
    fn launch(&mut self) {
        let (starting, base, inspector_port, log) =
            launch_wrangler(&self.name, self._state.path(), &self.vars, self.indexed);
        (self.starting, self.base, self.inspector_port, self.log) = (starting, base, inspector_port, log);
    }

    /// Runs the index's scheduled handler once (`/__scheduled`, as a Cron Trigger would) and
    /// waits for it to end; the Worker needs [`EdgeWorker::start_indexed`].
    ///
    /// A connection refused or dropped before the request was sent (seen on a machine so loaded
    /// that the kernel answered the test ports with SYN cookies) ran nothing, so it is tried
    /// again, up to [`RUN_INDEX_CONNECT_TRIES`] times; any other failure panics at once.
    pub async fn run_index(&self) {
        let mut tries = 1;
        let response = loop {
            match crate::http_client()
                .get(format!("{}/__scheduled?cron=*+*+*+*+*", self.base))
                .timeout(RUN_INDEX_TIMEOUT)
                .send()
                .await
            {
                Ok(response) => break response,
                Err(error) if error.is_connect() && tries < RUN_INDEX_CONNECT_TRIES => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(error) => {
                    // The error's causes (a reset, a timeout) say more than its summary.
                    let causes =
                        std::iter::successors(std::error::Error::source(&error), |cause| cause.source())
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(": ");
                    panic!("/__scheduled (try {tries}): {error}: {causes}\n{}", self.output())
                }
            }
        };
        assert_eq!(response.status().as_u16(), 200, "/__scheduled:\n{}", self.output());
    }

    /// Runs the index (each run started here, as the pacer starts them) until `/health` says its
    /// first fill is complete; every run must end well.
    pub async fn fill_index(&self) {
        let api = self.client();
        loop {
            self.run_index().await;
            let index = api.get("/health").await.body["index"].clone();
            assert_eq!(index["lastRun"]["ok"], true, "{index}");
            if index["complete"] == true {
                return;
            }
        }
    }

    /// The rows D1 reported written by the index's run that committed block `block`, from its log
    /// line ("index run: block N: … (Q D1 queries, M rows written as D1 reports them)"; local D1
    /// counts a row and each index entry a write changes, as production bills them). Waits
    /// up to 30 s for the line: the Worker's console reaches the log through wrangler's own
    /// process, which a loaded machine (three end-to-end tests at once) can hold up for seconds.
    pub async fn index_rows_written(&self, block: u64) -> u64 {
        let start = format!("index run: block {block}:");
        for _ in 0..300 {
            let output = self.output();
            if let Some(line) = output.lines().rfind(|line| line.contains(&start)) {
                let (_, tail) = line.rsplit_once(" D1 queries, ").expect("the run's counts");
                return tail.split(' ').next().unwrap().parse().expect("rows written");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no log line of the run at block {block}:\n{}", self.output());
    }

    /// The rows `sql` selects from the Worker's local index, as JSON objects
    /// ([`crate::local_d1::select`]: read from its SQLite file).
    pub fn query_index(&self, sql: &str) -> Vec<Value> {
        crate::local_d1::select(&self.state_dir(), sql)
    }

    /// Runs `sql` (statements separated by `;`) on the Worker's local index, in one transaction
    /// ([`crate::local_d1::execute`]: written to its SQLite file).
    pub fn execute_index(&self, sql: &str) {
        crate::local_d1::execute(&self.state_dir(), sql);
    }

    /// The folder wrangler keeps the Worker's local state in (KV, Cache API, the index's D1).
    pub fn state_dir(&self) -> PathBuf {
        self._state.path().join("state")
    }

    /// The settings the Worker runs with over wrangler.toml's, in order (a later one wins).
    pub fn vars(&self) -> impl Iterator<Item = (&str, &str)> {
        settings(&self.vars)
    }

    /// The port of wrangler's DevTools inspector, for [`crate::worker_profile::Profiler`].
    ///
    /// # Panics
    ///
    /// If the Worker was started without one (before [`open_inspectors`] was called).
    pub fn inspector_port(&self) -> u16 {
        self.inspector_port
            .expect("a Worker with an inspector: call edge_fixture::open_inspectors() before starting it")
    }

    /// The process ids of the Worker's runtimes (`workerd`): wrangler's proxy Worker's, which
    /// owns the public port, and the Worker's own (the one whose entry port the system chose,
    /// [`crate::processes::worker_runtime`]). The Node process that drives them is the
    /// host's, shared with the test process's other Workers.
    pub fn runtimes(&self) -> Vec<u32> {
        WranglerHost::get().runtimes(&self.name)
    }

    /// What wrangler printed so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A client of this Worker.
    pub fn client(&self) -> EdgeClient {
        EdgeClient::new(&self.base, &self.log)
    }
}

impl Drop for EdgeWorker {
    fn drop(&mut self) {
        self.stop();
    }
}

impl EdgeWorker {
    /// Stops the Worker and waits until its runtimes have exited.
    fn stop(&mut self) {
        WranglerHost::get().stop(&self.name);
    }
}

/// Whether the Workers started from now on open wrangler's DevTools inspector.
static INSPECTORS: AtomicBool = AtomicBool::new(false);

/// Starts every later Worker of this process with wrangler's DevTools inspector, for a benchmark
/// that profiles the Worker ([`crate::worker_profile::Profiler`] attaches there). The tests run
/// their Workers without one: with an inspector, wrangler forwards every console line of the
/// Worker to its Node as a debug message and appends it to its debug log, about 2 ms of CPU a
/// line, and the Worker logs a line for most requests (docs/testing.md). `wrangler dev` always
/// opens one; its dev server API lets us leave it out.
pub fn open_inspectors() {
    INSPECTORS.store(true, Ordering::Relaxed);
}

/// Starts the Worker `name` of the wrangler host, as `wrangler dev --ip 127.0.0.1 --port <port>
/// [--inspector-port <port>] --persist-to <state>/state --log-level log [--test-scheduled] --var
/// NAME:value...` would, on free ports, logging to `<state>/wrangler.log` (rewritten): its
/// start, `http://127.0.0.1:<port>`, the inspector's port and the log.
fn launch_wrangler(
    name: &str,
    state: &Path,
    vars: &[(String, String)],
    indexed: bool,
) -> (Pending, String, Option<u16>, PathBuf) {
    let port = free_port();
    // Two ports the system handed out one after the other can be the same one. Each Worker
    // has its own: they would all want the default devtools port 9229.
    let inspector_port = INSPECTORS
        .load(Ordering::Relaxed)
        .then(|| std::iter::repeat_with(free_port).find(|&other| other != port).expect("a port"));
    let log = state.join("wrangler.log");
    let vars: Vec<(&str, &str)> = settings(vars).collect();
    let starting = WranglerHost::get().start(
        name,
        &StartRequest {
            port,
            inspector_port,
            persist: state.join("state"),
            // The Worker's own console lines (`--log-level log`: KV counter writes) are part
            // of what tests read.
            log: log.clone(),
            vars: &vars,
            test_scheduled: indexed,
        },
    );
    (starting, format!("http://127.0.0.1:{port}"), inspector_port, log)
}

/// Whether the Worker itself answers `/health` at `base`, with any status (a degraded Worker is
/// still up): only an answer with its `X-RateLimit-Remaining` counts, not a bare 500 from a
/// runtime or proxy still starting.
pub async fn answered_by_worker(client: &reqwest::Client, base: &str) -> bool {
    let probe = client.get(format!("{base}/health")).header("cf-connecting-ip", "203.0.113.1");
    probe
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .is_ok_and(|response| response.headers().contains_key("x-ratelimit-remaining"))
}

/// The Worker's settings over wrangler.toml's: `vars` after `INDEX_INTERVAL_SECS=0`. One run
/// per `run_index`: tests drive the index themselves, so the pacer stays off unless a test's own
/// vars turn it on (a later setting wins).
fn settings(vars: &[(String, String)]) -> impl Iterator<Item = (&str, &str)> {
    std::iter::once(("INDEX_INTERVAL_SECS", "0"))
        .chain(vars.iter().map(|(name, value)| (name.as_str(), value.as_str())))
}

/// Wrangler's CLI from the project's `node_modules`, run from the repository, offline (no
/// telemetry, no Cloudflare calls): for its one-off commands (`wrangler d1 ...`).
///
/// Its CLI module under Node with the flags `node_modules/.bin/wrangler` gives it: that launcher
/// only checks Node's version and spawns this, so calling it would start a second Node for each
/// command.
pub(crate) fn wrangler(root: &std::path::Path) -> Command {
    let mut command = node_for_wrangler(root);
    command.arg(root.join("node_modules/wrangler/wrangler-dist/cli.js"));
    command
}

/// Node as wrangler's launcher runs it, from the repository, offline; the script to run is the
/// caller's (wrangler's CLI, or the tests' [`WranglerHost`]).
///
/// With V8's compiled code kept between runs (the npm package `v8-compile-cache`, preloaded; its
/// cache in `node_modules/.cache/`): compiling wrangler's and Miniflare's bundles was about
/// 0.5 s of the 2.5 s of CPU a `wrangler dev` took to answer. Node 20 has no compile cache of
/// its own (`NODE_COMPILE_CACHE` is Node 22's). Writes take a lock file, and V8 refuses cached
/// code that does not match its source.
pub(crate) fn node_for_wrangler(root: &std::path::Path) -> Command {
    let mut command = Command::new("node");
    command
        .args(["--no-warnings", "--experimental-vm-modules", "--require"])
        .arg(root.join("node_modules/v8-compile-cache"))
        .env("V8_COMPILE_CACHE_CACHE_DIR", root.join("node_modules/.cache/v8-compile-cache"))
        .current_dir(root)
        .env("WRANGLER_SEND_METRICS", "false")
        .env("WRANGLER_SEND_ERROR_REPORTS", "false")
        .env("CLOUDFLARE_CF_FETCH_ENABLED", "false")
        .env("CI", "true");
    command
}

/// One response: status, headers and the body parsed as JSON (`Value::Null` when empty).
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
    /// The body as sent (numbers past 64 bits are exact only here).
    pub text: String,
}

impl Answer {
    /// A header's value, if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    /// `X-RateLimit-Remaining` as a number (panics when missing: every response must carry it).
    pub fn remaining(&self) -> u64 {
        self.header("x-ratelimit-remaining")
            .unwrap_or_else(|| panic!("no X-RateLimit-Remaining in {:?}", self.headers))
            .parse()
            .expect("a number")
    }
}

/// How much of the Worker's log a failed request shows.
const LOG_TAIL_LINES: usize = 40;

/// An HTTP client of the Worker. Every request comes from a fresh client IP (`CF-Connecting-IP`)
/// unless one is given, so tests do not use up each other's rate-limit quota.
#[derive(Debug, Clone)]
pub struct EdgeClient {
    base: String,
    http: reqwest::Client,
    /// The Worker's log, whose end a request that got no answer at all shows.
    log: PathBuf,
}

impl EdgeClient {
    fn new(base: &str, log: &Path) -> Self {
        Self { base: base.to_owned(), http: crate::http_client(), log: log.to_owned() }
    }

    /// The last lines of the Worker's log: what its runtime and wrangler said last, for a
    /// request that got no answer (a runtime gone or restarting shows there).
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
    }

    /// GET `path` from a fresh client IP.
    pub async fn get(&self, path: &str) -> Answer {
        self.request("GET", path, &fresh_ip(), &[]).await
    }

    /// `method` on `path` as `ip`, with extra headers.
    pub async fn request(&self, method: &str, path: &str, ip: &str, headers: &[(&str, &str)]) -> Answer {
        self.send(method, path, ip, headers, None).await
    }

    /// POST `body` as JSON to `path` as `ip`.
    pub async fn post_json(&self, path: &str, ip: &str, body: &Value) -> Answer {
        self.post_text(path, ip, body.to_string()).await
    }

    /// POST `text` (declared as JSON, whatever it holds) to `path` as `ip`.
    pub async fn post_text(&self, path: &str, ip: &str, text: String) -> Answer {
        self.send("POST", path, ip, &[("content-type", "application/json")], Some(text)).await
    }

    /// POST `chunks` to `path` as one chunked body (`Transfer-Encoding: chunked`, no
    /// `Content-Length`: the sender does not say how long it is); the status and the body's text.
    pub async fn post_chunked(&self, path: &str, chunks: Vec<String>) -> (u16, String) {
        use http_body_util::{BodyExt, StreamBody};
        use hyper::body::{Bytes, Frame};
        let address = self.base.trim_start_matches("http://").to_owned();
        let stream = tokio::net::TcpStream::connect(&address)
            .await
            .unwrap_or_else(|error| panic!("{address}: {error}"));
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .expect("an HTTP/1.1 connection");
        tokio::spawn(connection);
        let frames = chunks
            .into_iter()
            .map(|chunk| Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(chunk))));
        let request = hyper::Request::post(path)
            .header("host", address)
            .header("cf-connecting-ip", fresh_ip())
            .header("content-type", "application/json")
            .body(StreamBody::new(futures::stream::iter(frames)))
            .expect("a request");
        let response = sender.send_request(request).await.unwrap_or_else(|error| panic!("{path}: {error}"));
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.expect("the answer's body").to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        ip: &str,
        headers: &[(&str, &str)],
        body: Option<String>,
    ) -> Answer {
        let method_name = method;
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let mut request =
            self.http.request(method, format!("{}{path}", self.base)).header("cf-connecting-ip", ip);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = body {
            request = request.body(body);
        }
        let response = request.send().await.unwrap_or_else(|error| {
            panic!("{path}: {error:?}\nthe Worker's log ends ({}):\n{}", self.log.display(), self.log_tail())
        });
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.expect("a body");
        openapi::edge().assert_conforms(openapi::Received {
            method: method_name,
            path,
            status,
            headers: &headers,
            body: &text,
        });
        let json = headers
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .is_some_and(|media| media.starts_with("application/json"));
        // A body of another type (a KYA pass's `application/jwt`) is in `text` alone.
        let body = if text.is_empty() || !json {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|error| panic!("{path}: not JSON ({error}): {text}"))
        };
        Answer { status, headers, body, text }
    }
}

/// A client IP no other request of this process used (TEST-NET-2 and -3 style addresses).
pub fn fresh_ip() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("10.{}.{}.{}", (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff)
}

/// A real HTTP server on loopback that forwards every JSON-RPC POST to the node and counts the
/// HTTP requests (round trips) and the JSON-RPC calls inside them ([`rpc_proxy`] with a policy
/// that counts and forwards).
#[derive(Debug, Clone)]
pub struct CountingProxy {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    requests: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
    /// While set, the node is down: every request is answered 503 (and counted).
    down: Arc<std::sync::atomic::AtomicBool>,
}

impl CountingProxy {
    /// Starts forwarding to `upstream` (runs on the current tokio runtime until the test ends).
    pub async fn start(upstream: &str) -> Self {
        let requests = Arc::new(AtomicUsize::new(0));
        let calls = Arc::new(AtomicUsize::new(0));
        let down = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (counted_requests, counted_calls, is_down) = (requests.clone(), calls.clone(), down.clone());
        let url = rpc_proxy::start(
            Some(upstream.to_owned()),
            Arc::new(move |body: &str| {
                counted_requests.fetch_add(1, Ordering::SeqCst);
                let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
                counted_calls.fetch_add(parsed.as_array().map_or(1, Vec::len), Ordering::SeqCst);
                if is_down.load(Ordering::SeqCst) {
                    return RpcAction::Http {
                        status: 503,
                        headers: Vec::new(),
                        body: "the node is down".into(),
                    };
                }
                RpcAction::Forward(body.to_owned())
            }),
        )
        .await;
        Self { url, requests, calls, down }
    }

    /// Takes the node down (every request answered 503) or brings it back.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// HTTP requests forwarded so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// JSON-RPC calls forwarded so far (a batch counts its members).
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

/// The `--var`s pointing the Worker at `registry` through `rpc_url`.
pub fn chain_vars(rpc_url: &str, registry: Address) -> Vec<(&'static str, String)> {
    vec![("RPC_URL", rpc_url.to_owned()), ("REGISTRY_ADDRESS", registry.to_checksum(None))]
}

/// How long [`EdgeWorker::run_index`] waits for one run: far above any run the tests or the
/// benches make (a 2,000-agent fill run takes about a second), so that a hung run fails its test
/// with the Worker's log instead of holding the suite until its own time limit.
const RUN_INDEX_TIMEOUT: Duration = Duration::from_secs(180);

/// Tries of [`EdgeWorker::run_index`] whose connection failed before sending: about 5 s.
const RUN_INDEX_CONNECT_TRIES: u32 = 10;
