//! Fixtures of the relayer's end-to-end tests: the relayer in-process on port 0 (with the test's
//! own shutdown) or as the real binary, its store on either engine (an SQLite file, or a
//! PostgreSQL database of its own on the test server), an HTTP client, and two independent
//! EIP-712 signers (Python eth-account in `.tools/venv`, and kya-core).

use std::{
    io::{BufRead, BufReader},
    net::SocketAddr,
    path::Path,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex, mpsc},
    time::Duration,
};

use alloy::{
    primitives::{Address, B256, Bytes, U256, aliases::U48},
    signers::{SignerSync, local::PrivateKeySigner},
    sol_types::SolCall,
};
use kya_core::registry::forward_request::{self, ForwardRequest};
use kya_devchain::dev_accounts::{self, Role};
use kya_relayer::{Config, DatabaseUrl, Location, Relayer, Store, server};
use serde_json::{Value, json};
use tokio::{sync::oneshot, task::JoinHandle};

use crate::{TestChain, openapi, register_call};

/// The store engine a relayer under test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// The embedded SQLite file (`RELAYER_DB`), the default.
    Sqlite,
    /// A PostgreSQL database (`DATABASE_URL`) on the test server.
    Postgres,
}

/// A store for relayers under test, gone when dropped: an SQLite file in a folder of its own,
/// or a database of its own on the PostgreSQL test server. Relayers started with the same
/// `TestStore` share it, as a restarted daemon (or a second one) would.
#[derive(Debug)]
pub struct TestStore {
    engine: Engine,
    dir: tempfile::TempDir,
    database: Option<kya_test_postgres::TestDatabase>,
}

impl TestStore {
    /// A fresh, empty store on `engine`.
    pub fn new(engine: Engine) -> Self {
        let dir = tempfile::tempdir().expect("a temp dir");
        let database = (engine == Engine::Postgres).then(kya_test_postgres::TestDatabase::create);
        Self { engine, dir, database }
    }

    /// The engine it is on.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// The setting that points a relayer at it: `RELAYER_DB` or `DATABASE_URL`.
    pub fn setting(&self) -> (&'static str, String) {
        match &self.database {
            None => ("RELAYER_DB", self.sqlite_path().display().to_string()),
            Some(database) => ("DATABASE_URL", database.url().to_owned()),
        }
    }

    /// The password in `DATABASE_URL`, on PostgreSQL (to check it is never shown).
    pub fn password(&self) -> Option<&str> {
        self.database.as_ref().map(|database| database.password())
    }

    /// The PostgreSQL database it is, if on PostgreSQL (a test reads the server's own views).
    pub fn database(&self) -> Option<&kya_test_postgres::TestDatabase> {
        self.database.as_ref()
    }

    /// A store of its own on it, as the daemon opens it (tests read and write records with it).
    pub fn open(&self) -> Store {
        let location = match &self.database {
            None => Location::Sqlite(self.sqlite_path()),
            Some(database) => {
                Location::Postgres(DatabaseUrl::parse(database.url()).expect("the test URL parses"))
            }
        };
        Store::open_at(&location).expect("the test store opens")
    }

    /// A folder of the test's own, beside the store.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn sqlite_path(&self) -> std::path::PathBuf {
        self.dir.path().join("relayer.db")
    }
}

/// Environment settings for a relayer against `chain`, with the spec's defaults, anvil's funded
/// account 9 as the relayer key and the store `store`. Every test client sends from 127.0.0.1
/// and many of them from one signer, at anvil's gwei fees (a thousand times Base's): the budget
/// shares are whole here, and the abuse tests (`relayer::abuse`) use the defaults. The budget
/// opens whole too (`BUDGET_SLICES=1`: at these fees an hour's slice of the default budget is a
/// few relays); `relayer::pacing` turns pacing on.
pub fn settings(chain: &TestChain, store: &TestStore) -> Vec<(String, String)> {
    let (store_name, store_value) = store.setting();
    [
        ("RPC_URL", chain.rpc_url()),
        ("REGISTRY_ADDRESS", chain.registry().to_string()),
        ("FORWARDER_ADDRESS", chain.forwarder().to_string()),
        ("RELAYER_KEY", dev_accounts::key_hex(Role::Relayer).to_owned()),
        (store_name, store_value),
        ("SIGNER_BUDGET_SHARE_PERCENT", "100".to_owned()),
        ("CLIENT_BUDGET_SHARE_PERCENT", "100".to_owned()),
        ("BUDGET_SLICES", "1".to_owned()),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value))
    .collect()
}

/// Replaces or adds `name=value` in `settings`.
pub fn set(settings: &mut Vec<(String, String)>, name: &str, value: impl Into<String>) {
    settings.retain(|(existing, _)| existing != name);
    settings.push((name.to_owned(), value.into()));
}

/// An HTTP client of a relayer at `base`.
#[derive(Debug, Clone)]
pub struct Client {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// The operator's metrics listener, `http://127.0.0.1:<port>`.
    pub metrics_base: String,
    http: reqwest::Client,
}

impl Client {
    /// A client of the relayer at `address` with its metrics listener at `metrics`.
    pub fn new(address: SocketAddr, metrics: SocketAddr) -> Self {
        Self {
            base: format!("http://{address}"),
            metrics_base: format!("http://{metrics}"),
            http: crate::http_client(),
        }
    }

    /// `GET /metrics` from the metrics listener: the status and the Prometheus text.
    pub async fn metrics(&self) -> (u16, String) {
        let response = self
            .http
            .get(format!("{}/metrics", self.metrics_base))
            .send()
            .await
            .expect("the metrics listener answers");
        let status = response.status().as_u16();
        (status, response.text().await.expect("a body"))
    }

    /// POSTs `body` to `/relay` as if from behind a proxy that says `forwarded_for`.
    pub async fn relay_forwarded(&self, body: &Value, forwarded_for: &str) -> (u16, Value) {
        self.post("/relay", body.to_string(), &[("x-forwarded-for", forwarded_for)]).await
    }

    /// `POST /relay` with a JSON body; returns the status and the JSON answer.
    pub async fn relay(&self, body: &Value) -> (u16, Value) {
        self.post_raw("/relay", body.to_string()).await
    }

    /// POSTs `body` as is (for malformed bodies).
    pub async fn post_raw(&self, path: &str, body: String) -> (u16, Value) {
        self.post(path, body, &[]).await
    }

    /// POSTs `body` as JSON with extra `headers`; the status and the answer, as JSON if it is.
    async fn post(&self, path: &str, body: String, headers: &[(&str, &str)]) -> (u16, Value) {
        let reply = self.post_reply(path, body, headers).await;
        (reply.status, serde_json::from_str(&reply.text).unwrap_or(Value::String(reply.text)))
    }

    /// `POST /relay` as if from behind a proxy that says `forwarded_for`; the answer as it came,
    /// headers and all (`Retry-After`).
    pub async fn relay_reply(&self, body: &Value, forwarded_for: &str) -> Reply {
        self.post_reply("/relay", body.to_string(), &[("x-forwarded-for", forwarded_for)]).await
    }

    /// POSTs `body` as JSON with extra `headers`; the answer as it came.
    async fn post_reply(&self, path: &str, body: String, headers: &[(&str, &str)]) -> Reply {
        let mut request =
            self.http.post(format!("{}{path}", self.base)).header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.body(body).send().await.expect("the relayer answers");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.expect("a body");
        conforms("POST", path, status, &headers, &text);
        Reply { status, headers, text }
    }

    /// GETs `path`; returns the status and the body as text.
    pub async fn get_text(&self, path: &str) -> (u16, String) {
        let response =
            self.http.get(format!("{}{path}", self.base)).send().await.expect("the relayer answers");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.expect("a body");
        conforms("GET", path, status, &headers, &text);
        (status, text)
    }

    /// GETs `path` as JSON.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let (status, text) = self.get_text(path).await;
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    /// `method` on `path` with extra headers; the answer as it came.
    pub async fn request(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
        let method_name = method;
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.expect("the relayer answers");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.expect("a body");
        conforms(method_name, path, status, &headers, &text);
        Reply { status, headers, text }
    }

    /// `dailyGasBudget.usedWei` of `/status`.
    pub async fn used_wei(&self) -> u128 {
        wei(&self.get("/status").await.1["dailyGasBudget"]["usedWei"])
    }

    /// Waits until every reservation is settled by its receipt (anvil mines at once, so this is
    /// short); panics after a generous bound (a minute) rather than hanging.
    pub async fn settled(&self) -> Value {
        for _ in 0..2_400 {
            let (_, status) = self.get("/status").await;
            if status["dailyGasBudget"]["pendingWei"] == "0" {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("reservations never settled");
    }
}

/// One answer: status, headers and the body as sent.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
}

impl Reply {
    /// A header's value, if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }
}

/// Every answer a test receives must be what the relayer's OpenAPI document promises.
fn conforms(method: &str, path: &str, status: u16, headers: &reqwest::header::HeaderMap, body: &str) {
    openapi::relayer().assert_conforms(openapi::Received { method, path, status, headers, body });
}

/// A decimal wei string from JSON as a number.
pub fn wei(value: &Value) -> u128 {
    value.as_str().and_then(|text| text.parse().ok()).unwrap_or_else(|| panic!("wei amount: {value}"))
}

/// The relayer running inside the test process on a free port.
#[derive(Debug)]
pub struct InProcessRelayer {
    /// Its client.
    pub client: Client,
    /// Its state (store, address).
    pub relayer: Arc<Relayer>,
    shutdown: Option<oneshot::Sender<()>>,
    served: Option<JoinHandle<()>>,
}

impl InProcessRelayer {
    /// Starts a relayer with `settings` on 127.0.0.1, port 0.
    pub async fn start(settings: &[(String, String)]) -> Self {
        let config = Config::from_lookup(|name| {
            settings.iter().find(|(existing, _)| existing == name).map(|(_, value)| value.clone())
        })
        .expect("valid test settings");
        let relayer = Relayer::start(config).await.expect("the relayer starts");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let metrics = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let client = Client::new(listener.local_addr().expect("bound"), metrics.local_addr().expect("bound"));
        let (shutdown, stop) = oneshot::channel::<()>();
        let served = tokio::spawn(server::run(listener, metrics, Arc::clone(&relayer), async move {
            let _ = stop.await;
        }));
        Self { client, relayer, shutdown: Some(shutdown), served: Some(served) }
    }

    /// Shuts down gracefully and waits until the server and its background work are done.
    pub async fn stop(mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(served) = self.served.take() {
            tokio::time::timeout(EXIT_PATIENCE, served)
                .await
                .unwrap_or_else(|_| {
                    panic!("the relayer had not shut down {EXIT_PATIENCE:?} after it was asked")
                })
                .expect("the server task ends cleanly");
        }
    }
}

/// How long a relayer may take to shut down once asked (its own grace is a few seconds): past
/// it, the test fails naming the hang instead of waiting for ever.
const EXIT_PATIENCE: Duration = Duration::from_secs(60);

/// The real `kya-relayer` binary as a child process; its output (logs) is collected.
#[derive(Debug)]
pub struct BinaryRelayer {
    /// Its client.
    pub client: Client,
    child: Child,
    output: Arc<Mutex<String>>,
    /// The threads copying stdout and stderr into `output`; they end at end of file.
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl BinaryRelayer {
    /// Starts `binary` (the test's `env!("CARGO_BIN_EXE_kya-relayer-under-test")`: only
    /// integration tests see it) with `settings` on port 0 and waits for its "listening" line.
    pub fn start(binary: &str, settings: &[(String, String)]) -> Self {
        let mut command = Command::new(binary);
        command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("RELAYER_PORT", "0")
            .env("METRICS_PORT", "0")
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (name, value) in settings {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("the relayer binary starts");
        let output = Arc::new(Mutex::new(String::new()));
        let (address_tx, address_rx) = mpsc::channel();
        let mut readers = Vec::new();
        for stream in [
            Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().expect("stderr")),
        ] {
            let output = Arc::clone(&output);
            let address_tx = address_tx.clone();
            readers.push(std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let plain = crate::without_colours(&line);
                    let address = plain
                        .split_whitespace()
                        .find_map(|word| word.strip_prefix("address="))
                        .and_then(|address| address.parse::<SocketAddr>().ok());
                    for listener in ["relayer listening", "metrics listening"] {
                        if plain.contains(listener)
                            && let Some(address) = address
                        {
                            let _ = address_tx.send((listener, address));
                        }
                    }
                    let mut output = output.lock().unwrap();
                    output.push_str(&plain);
                    output.push('\n');
                }
            }));
        }
        let (mut address, mut metrics) = (None, None);
        while address.is_none() || metrics.is_none() {
            let (listener, bound) = address_rx
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("the relayer binary did not start:\n{}", output.lock().unwrap()));
            if listener == "relayer listening" { address = Some(bound) } else { metrics = Some(bound) }
        }
        let client = Client::new(address.expect("listening"), metrics.expect("listening"));
        Self { client, child, output, readers }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends it the signal `name` (`STOP`, `CONT`: a daemon frozen, as a paused VM is, and
    /// thawed).
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill").args([&format!("-{name}"), &self.pid().to_string()]).status();
        assert!(status.is_ok_and(|status| status.success()), "kill -{name}");
    }

    /// Everything it logged so far.
    pub fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    /// Sends SIGTERM and waits for a clean exit; returns the exit status's success. A daemon
    /// still running [`EXIT_PATIENCE`] after SIGTERM fails the test (its shutdown hangs).
    pub fn terminate(mut self) -> (bool, String) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let Some(status) = crate::wait_within(&mut self.child, EXIT_PATIENCE) else {
            let _ = self.child.kill();
            let _ = self.child.wait();
            // Taken, so that the log is printed once: here, not again as the panic drops it.
            let output = std::mem::take(&mut *self.output.lock().unwrap());
            panic!("the relayer had not exited {EXIT_PATIENCE:?} after SIGTERM:\n{output}");
        };
        // Every line it wrote is read once its pipes reach end of file.
        for reader in self.readers.drain(..) {
            reader.join().expect("a log reader thread");
        }
        (status.success(), self.output())
    }
}

impl BinaryRelayer {
    /// Kills it with SIGKILL (no shutdown at all, as a crash or an OOM kill) and returns what it
    /// logged.
    pub fn kill(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for reader in self.readers.drain(..) {
            reader.join().expect("a log reader thread");
        }
        self.output()
    }
}

impl Client {
    /// `GET /relay/:id`, waiting (up to a minute) until `done` holds for the relay.
    pub async fn relay_until(&self, id: &str, done: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..1_200 {
            let (status, relay) = self.get(&format!("/relay/{id}")).await;
            assert_eq!(status, 200, "{relay}");
            if done(&relay) {
                return relay;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("relay {id} never got there: {}", self.get(&format!("/relay/{id}")).await.1);
    }
}

impl Drop for BinaryRelayer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        // A test that panics with the daemon still held (before `terminate` or `kill` hand its
        // log over) would lose what the daemon did: its last lines go with the failure, which
        // the test harness prints (the daemon logs no secret: `relayer::secrets`).
        if !std::thread::panicking() {
            return;
        }
        let output = self.output();
        if !output.is_empty() {
            let lines: Vec<&str> = output.lines().collect();
            let tail = lines[lines.len().saturating_sub(DROPPED_LOG_LINES)..].join("\n");
            eprintln!(
                "--- relayer {} (its last {} log lines) ---\n{tail}",
                self.child.id(),
                DROPPED_LOG_LINES
            );
        }
    }
}

/// Log lines of a daemon printed when a test panics while holding it.
const DROPPED_LOG_LINES: usize = 300;

/// A forward request to the registry from `signer` with `call`.
pub fn forward<C: SolCall>(chain: &TestChain, from: Address, nonce: u64, call: &C) -> ForwardRequest {
    ForwardRequest {
        from,
        to: chain.registry(),
        value: U256::ZERO,
        gas: U256::from(500_000),
        nonce: U256::from(nonce),
        deadline: U48::ZERO,
        data: call.abi_encode().into(),
    }
}

/// The request as the JSON the relayer takes (numbers as decimal strings).
pub fn request_json(request: &ForwardRequest) -> Value {
    json!({
        "from": request.from,
        "to": request.to,
        "value": request.value.to_string(),
        "gas": request.gas.to_string(),
        "nonce": request.nonce.to_string(),
        "deadline": request.deadline.to_string(),
        "data": request.data,
    })
}

/// A `POST /relay` body.
pub fn body(request: &ForwardRequest, signature: &Bytes) -> Value {
    json!({ "request": request_json(request), "signature": signature })
}

/// A digest and signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    /// The EIP-712 digest.
    pub digest: B256,
    /// The 65-byte signature.
    pub signature: Bytes,
}

/// Signs with kya-core's EIP-712 code and alloy's signer.
pub fn sign_with_core(chain: &TestChain, signer: &PrivateKeySigner, request: &ForwardRequest) -> Signed {
    let digest = forward_request::signing_digest(
        request,
        &forward_request::domain(chain.chain_id(), chain.forwarder()),
    );
    let signature = signer.sign_hash_sync(&digest).expect("signing");
    Signed { digest, signature: Bytes::from(signature.as_bytes().to_vec()) }
}

/// Relay bodies registering each of `agents` as a root agent, signed by core's EIP-712 code.
pub fn signed_registrations(t: &TestChain, agents: &[PrivateKeySigner]) -> Vec<Value> {
    agents
        .iter()
        .map(|agent| {
            let request = forward(t, agent.address(), 0, &register_call(agent.address(), 0));
            body(&request, &sign_with_core(t, agent, &request).signature)
        })
        .collect()
}

/// Signs with Python's eth-account (`tests/signers/sign_forward_request.py` in `.tools/venv`,
/// installed by `scripts/bootstrap.sh`).
pub fn sign_with_eth_account(
    chain: &TestChain,
    signer: &PrivateKeySigner,
    request: &ForwardRequest,
) -> Signed {
    let job = json!({
        "key": format!("0x{}", alloy::primitives::hex::encode(signer.to_bytes())),
        "chainId": chain.chain_id(),
        "verifyingContract": chain.forwarder(),
        "request": request_json(request),
    });
    let answer = crate::run_python("signers/sign_forward_request.py", &job, "eth-account");
    Signed {
        digest: answer["digest"].as_str().and_then(|d| d.parse().ok()).expect("a digest"),
        signature: answer["signature"].as_str().and_then(|s| s.parse().ok()).expect("a signature"),
    }
}

impl Client {
    /// `usedWei` once every reservation is settled.
    pub async fn used_wei_settled(&self) -> u128 {
        wei(&self.settled().await["dailyGasBudget"]["usedWei"])
    }
}
