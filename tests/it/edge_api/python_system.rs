//! The Python package `kya` against the whole system (issue 64): anvil with the real contracts,
//! the real relayer daemon, the Worker under `wrangler dev` with its index paced as deployed
//! (2 s), and the example FastAPI provider (`python/examples/fastapi_provider.py` under uvicorn)
//! configured to the Worker. A Python agent (`python/e2e/system_agent.py`, driven line by line)
//! with a fresh key and no ETH registers through the relayer with its Haftungsperson's consent;
//! once the index has it, it carries its pass from the Worker and the provider admits its signed
//! requests with no request to the API (the Worker's log, counted between two markers). A request
//! it signs verifies at `POST /api/v1/kya/verify` and with the npm package's verifiers. Then, on
//! a chain of 2 s blocks, the regulator suspends it: the index, the change feed's stream and the
//! provider's `RevocationFollower` make the provider refuse it (`403 revoked`) within 2 blocks.
//! (A request `kya sign` signed verifies in Python in `python/tests/test_erc8128.py`.)

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};

use alloy::{
    primitives::{Address, U256},
    providers::Provider,
    signers::local::PrivateKeySigner,
};
use kya_core::{
    chain::abi::AgentRegistry,
    pass::{SigningKey, SigningKeys},
};
use kya_tests::{
    TestChain,
    edge_fixture::{EdgeClient, EdgeWorker, chain_vars, fresh_ip},
    interrupt_then_kill, lay_out_python_package, output_within,
    relayer_fixture::{BinaryRelayer, Engine, TestStore, settings},
    repo_root, tools_python,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};

use super::pass_provider::{api_requests_between, wait_until_logged};

/// The daemon's own `main.rs`, built as a binary of the tests package (see tests/Cargo.toml).
const RELAYER: &str = env!("CARGO_BIN_EXE_kya-relayer-under-test");

/// Requests counted once the provider holds the issuer's keys and follows the feed.
const COUNTED_REQUESTS: usize = 10;

/// `python/e2e/system_agent.py` as a process: one JSON command a line in, one answer a line out.
struct PythonAgent {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: Lines<BufReader<tokio::process::ChildStdout>>,
    /// Its standard error.
    log: PathBuf,
}

impl PythonAgent {
    fn start(package: &Path, env: &[(&str, String)]) -> Self {
        let log = package.join("agent.log");
        let mut child = tokio::process::Command::new(tools_python())
            .arg("python/e2e/system_agent.py")
            .current_dir(repo_root())
            .env("PYTHONPATH", package)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .envs(env.iter().map(|(name, value)| (*name, value.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("the agent's log"))
            .kill_on_drop(true)
            .spawn()
            .expect("the Python agent starts");
        let stdin = child.stdin.take().expect("its stdin");
        let lines = BufReader::new(child.stdout.take().expect("its stdout")).lines();
        Self { child, stdin, lines, log }
    }

    /// The answer to `command`; a failure's message (an answer `{"error"}`, a process that
    /// ended or took over 90 s) names the command and ends with what Python wrote to stderr.
    async fn ask(&mut self, command: Value) -> Value {
        self.stdin.write_all(format!("{command}\n").as_bytes()).await.expect("the agent reads");
        let line = tokio::time::timeout(Duration::from_secs(90), self.lines.next_line()).await;
        let line = match line {
            Ok(Ok(Some(line))) => line,
            other => panic!("{command}: no answer ({other:?}):\n{}", self.stderr()),
        };
        let answer: Value = serde_json::from_str(&line).expect("a JSON answer");
        assert!(answer.get("error").is_none(), "{command}: {answer}\n{}", self.stderr());
        answer
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Ends it: its input closed, it exits; killed (by its pid) after 10 s.
    async fn stop(mut self) -> String {
        drop(self.stdin);
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await.is_err() {
            self.child.kill().await.expect("killed");
        }
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// The example FastAPI provider under uvicorn, on `origin`.
struct FastApiProvider {
    child: std::process::Child,
    origin: String,
    log: PathBuf,
}

impl FastApiProvider {
    /// Started with the Worker as its API, serving (and checking signatures for)
    /// `127.0.0.1:<a free port>`; answers once uvicorn does.
    async fn start(package: &Path, api: &str, chain_id: u64, registry: Address) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let authority = format!("127.0.0.1:{port}");
        let log = package.join("provider.log");
        let output = std::fs::File::create(&log).expect("the provider's log");
        let child = std::process::Command::new(tools_python())
            .args(["python/examples/fastapi_provider.py", &port.to_string()])
            .current_dir(repo_root())
            .env("PYTHONPATH", package)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("KYA_API_URL", api)
            .env("CHAIN_ID", chain_id.to_string())
            .env("REGISTRY", registry.to_checksum(None))
            .env("PROVIDER_AUTHORITY", &authority)
            .stdin(Stdio::null())
            .stdout(output.try_clone().unwrap())
            .stderr(output)
            .spawn()
            .expect("the provider starts");
        let provider = Self { child, origin: format!("http://{authority}"), log };
        let deadline = Instant::now() + Duration::from_secs(30);
        while reqwest::get(format!("{}/health", provider.origin)).await.is_err() {
            assert!(
                Instant::now() < deadline,
                "the provider did not answer within 30 s:\n{}",
                provider.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        provider
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Ends it: SIGINT (uvicorn's lifespan stops the follower), SIGKILL after 10 s, by its pid.
    fn stop(mut self) -> String {
        interrupt_then_kill(&mut self.child, Duration::from_secs(10));
        self.log()
    }
}

impl Drop for FastApiProvider {
    /// A failed test's provider is stopped too (a stopped one is left alone).
    fn drop(&mut self) {
        interrupt_then_kill(&mut self.child, Duration::from_secs(2));
    }
}

/// `/api/v1/kya/<wallet>` polled until the index (no `X-Index-Fallback`) answers it compliant.
async fn until_indexed(api: &EdgeClient, wallet: Address) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = api.get(&format!("/api/v1/kya/{wallet}")).await;
        if answer.status == 200
            && answer.body["isCompliant"] == true
            && answer.header("x-index-fallback").is_none()
        {
            return answer.body;
        }
        assert!(Instant::now() < deadline, "the index never showed {wallet} compliant: {}", answer.text);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn key_hex(key: &PrivateKeySigner) -> String {
    alloy::primitives::hex::encode_prefixed(key.credential().to_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_agent_registers_by_relayer_is_admitted_offline_and_refused_after_a_suspension() {
    let started = Instant::now();
    let t = TestChain::start().await;
    let store = TestStore::new(Engine::Sqlite);
    let relayer_settings = settings(&t, &store);
    let relayer = tokio::task::spawn_blocking(move || BinaryRelayer::start(RELAYER, &relayer_settings));
    let keys = SigningKeys::new(SigningKey::from_seed(&[0x66; 32]), Vec::new());
    let mut vars = chain_vars(&t.rpc_url(), t.registry());
    // The pacer as deployed.
    vars.extend([("PASS_SIGNING_KEYS", keys.private_json()), ("INDEX_INTERVAL_SECS", "2".to_owned())]);
    let worker = EdgeWorker::start_indexed(&vars).await;
    let relayer = relayer.await.unwrap();
    worker.run_index().await; // the watchdog sets the pacer's alarm
    let api = worker.client();

    let package = tempfile::tempdir().unwrap();
    lay_out_python_package(package.path());
    let provider = FastApiProvider::start(package.path(), &worker.base, t.chain_id(), t.registry()).await;
    let (agent_key, person_key) = (PrivateKeySigner::random(), PrivateKeySigner::random());
    let mut agent = PythonAgent::start(
        package.path(),
        &[
            ("KYA_API_URL", worker.base.clone()),
            ("KYA_RPC_URL", t.rpc_url()),
            ("KYA_RELAYER_URL", relayer.client.base.clone()),
            ("KYA_PROVIDER_URL", provider.origin.clone()),
            ("CHAIN_ID", t.chain_id().to_string()),
            ("KYA_AGENT_KEY", key_hex(&agent_key)),
            ("KYA_HAFTUNGSPERSON_KEY", key_hex(&person_key)),
        ],
    );
    let wallet = agent_key.address();

    // 1. Registered through the relayer, its Haftungsperson consenting: the agent is its own
    // creator and wallet, and no account paid anything.
    let registered = agent.ask(json!({ "do": "register" })).await;
    assert_eq!(registered["status"], "mined", "{registered}");
    assert_eq!(registered["agent"], wallet.to_checksum(None));
    assert_eq!(registered["consentsUsed"], json!([[person_key.address().to_checksum(None), 0]]));
    let agent_id = registered["agentId"].as_u64().expect("an agent id");
    let registry = t.registry();
    assert_eq!(
        t.chain.view(registry, &AgentRegistry::walletToAgentCall(wallet)).await.unwrap(),
        U256::from(agent_id)
    );
    let record =
        t.chain.view(registry, &AgentRegistry::getAgentCall { agentId: U256::from(agent_id) }).await.unwrap();
    assert_eq!(
        (record.creator, record.agentWallet, record.haftungsperson),
        (wallet, wallet, person_key.address())
    );
    for account in [wallet, person_key.address()] {
        assert_eq!(
            t.chain.provider().get_balance(account).await.unwrap(),
            U256::ZERO,
            "no ETH spent or held"
        );
    }
    let (status, relay) =
        relayer.client.get(&format!("/relay/{}", registered["relayId"].as_str().unwrap())).await;
    assert_eq!((status, relay["status"].as_str()), (200, Some("mined")), "{relay}");

    // The pacer's index has it.
    let indexed = until_indexed(&api, wallet).await;
    assert_eq!(indexed["agent"]["agentId"], agent_id, "{indexed}");

    // The provider follows the feed (its stream is open) before the first request.
    wait_until_logged(&worker, "/api/v1/changes/stream", 1).await;
    // The first request: the agent fetches its pass, the provider the issuer's keys.
    let first = agent.ask(json!({ "do": "infer", "times": 1 })).await;
    let hello = |n: usize| {
        let body = json!({ "hello": wallet.to_checksum(None), "agentId": agent_id, "prompt": { "n": n } });
        json!([200, body])
    };
    assert_eq!(first["answers"], json!([hello(0)]), "{first}");
    wait_until_logged(&worker, &format!("/api/v1/kya/{wallet}/pass"), 1).await;
    wait_until_logged(&worker, kya_core::pass::JWKS_PATH, 1).await;

    // Ten more, each signed anew with the pass held: none costs a request to the API.
    let marker = |n: u8| format!("0x{}", format!("{n:02x}").repeat(20));
    api.get(&format!("/api/v1/kya/{}", marker(0xc1))).await;
    let counted = agent.ask(json!({ "do": "infer", "times": COUNTED_REQUESTS })).await;
    api.get(&format!("/api/v1/kya/{}", marker(0xc2))).await;
    let expected: Vec<Value> = (0..COUNTED_REQUESTS).map(hello).collect();
    assert_eq!(counted["answers"], json!(expected), "{counted}");
    assert_eq!(counted["passFetches"], 1, "the pass fetched once");
    let calls = api_requests_between(&worker, &marker(0xc1), &marker(0xc2)).await;
    assert_eq!(
        calls,
        Vec::<String>::new(),
        "requests to the API while the provider served {COUNTED_REQUESTS}"
    );
    println!("{COUNTED_REQUESTS} requests admitted, {} requests to the API", calls.len());

    // 3. A request signed in Python verifies at the Worker and with the npm package.
    let signed = agent.ask(json!({ "do": "sign" })).await;
    let authority = provider.origin.trim_start_matches("http://");
    let mut forwarded = signed.clone();
    forwarded["authority"] = authority.into();
    let verified = api.post_json("/api/v1/kya/verify", &fresh_ip(), &forwarded).await;
    assert_eq!(verified.status, 200, "{}", verified.text);
    assert_eq!(verified.body["verified"], true, "{}", verified.text);
    assert_eq!(verified.body["signer"], wallet.to_checksum(None), "{}", verified.text);
    let standing = api.get(&format!("/api/v1/kya/{wallet}")).await.body;
    assert_eq!(verified.body["kya"], standing, "the signer's standing, as /kya answers it");
    assert_eq!((&standing["isCompliant"], &standing["agent"]["agentId"]), (&json!(true), &json!(agent_id)));
    let jwks = api.get(kya_core::pass::JWKS_PATH).await.body;
    let job = json!({
        "request": signed, "authority": authority, "jwks": jwks, "issuer": worker.base,
        "chainId": t.chain_id(), "registry": registry.to_checksum(None),
    });
    let npm = npm_verdicts(&job).await;
    assert_eq!(
        (&npm["request"]["outcome"], &npm["request"]["signer"]),
        (&json!("verified"), &json!(wallet.to_checksum(None))),
        "{npm}"
    );
    assert_eq!(npm["agent"]["outcome"], "admitted", "{npm}");
    assert_eq!(npm["agent"]["pass"]["claims"]["kya"]["agentId"], agent_id, "{npm}");
    assert_eq!(npm["agent"]["signature"]["signer"], wallet.to_checksum(None), "{npm}");

    // 2. On a chain of 2 s blocks, as Base's, the regulator suspends the agent: the provider
    // refuses it within 2 blocks of the suspension's.
    let miner = {
        let provider = t.chain.provider().clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                let _: Result<Value, _> = provider.raw_request("anvil_mine".into(), ("0x1",)).await;
            }
        })
    };
    let receipt = t
        .chain
        .send(
            t.deployment.regulator,
            registry,
            &AgentRegistry::suspendAgentCall { agentId: U256::from(agent_id) },
        )
        .await
        .expect("suspended");
    let suspended_in = receipt.block_number.expect("mined");
    let suspended_at = Instant::now();
    let refused = agent.ask(json!({ "do": "until_refused" })).await;
    let waited = suspended_at.elapsed();
    miner.abort();
    assert_eq!(refused["status"], 403, "{refused}");
    assert_eq!(refused["body"]["detail"]["reason"], "revoked", "{refused}");
    let said = refused["body"]["detail"]["message"].as_str().unwrap_or_default();
    assert!(
        said.starts_with(&format!("{wallet}'s compliance was lost at block {suspended_in}, ")),
        "the feed's loss at the suspension's block: {said}"
    );
    let head = refused["head"].as_u64().expect("the head");
    println!(
        "refused {} blocks after the suspension's block ({waited:?}, {} requests admitted before)",
        head - suspended_in,
        refused["admitted"]
    );
    assert!(
        head <= suspended_in + 2,
        "refused when the head was {head}, {} blocks after the suspension's",
        head - suspended_in
    );

    // Stopped, each by its pid; no key in anything they printed.
    let provider_log = provider.stop();
    let agent_log = agent.stop().await;
    let (stopped, relayer_log) = relayer.terminate();
    assert!(stopped, "the relayer stops cleanly:\n{relayer_log}");
    for key in [&agent_key, &person_key] {
        let hex = key_hex(key);
        for shown in [&provider_log, &agent_log, &relayer_log, &worker.output()] {
            assert!(!shown.contains(&hex[2..]), "a private key was shown");
        }
    }
    println!("wall time {:?}", started.elapsed());
}

/// The npm package's verdicts (`tests/js/verify-python-request.mjs`) on `job`'s request.
async fn npm_verdicts(job: &Value) -> Value {
    let input = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(input.path(), job.to_string()).unwrap();
    let mut node = std::process::Command::new("node");
    node.arg("tests/js/verify-python-request.mjs").arg(input.path()).current_dir(repo_root());
    let ran =
        tokio::task::spawn_blocking(move || output_within(&mut node, Duration::from_secs(60))).await.unwrap();
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(ran.status.success(), "the npm verifier failed:\n{stderr}");
    serde_json::from_slice(&ran.stdout).unwrap_or_else(|error| panic!("{error}: {stderr}"))
}
