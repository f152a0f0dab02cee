//! The two providers that decide offline, each run as a process against the Worker under
//! `wrangler dev` and a real anvil: `client/examples/pass_provider.rs` (Rust, `PassGate`) and
//! `core/npm/examples/pass-provider.mjs` (Node, the package's `verifyAgentRequest`). For each: an
//! agent's signed request with its pass is served, and the Worker's own log shows that the
//! provider made no request to it for any of them; a replay, a request without a pass, another wallet's pass and a signature for
//! another host are turned away with their reasons; and once a regulator suspends the agent, the
//! provider, following the change feed, refuses the pass it admitted a moment before. And 200
//! requests at once carrying passes made-up keys signed (anyone can make one) cost the provider
//! at most one fetch of the issuer's keys.

use std::{
    process::Stdio,
    time::{Duration, Instant},
};

use alloy::{primitives::U256, signers::local::PrivateKeySigner};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use futures::future::join_all;
use kya_client::{ApiClient, RequestSigner};
use kya_core::{
    chain::abi::AgentRegistry,
    pass::{PassClaims, SigningKey, SigningKeys, jws},
};
use kya_tests::{
    TestChain,
    edge_fixture::{EdgeWorker, chain_vars},
    register_call,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

const BODY: &str = r#"{"prompt":"hello"}"#;

/// The provider as a process, stopped when dropped.
struct Provider {
    origin: String,
    /// When it was started (and fetched the issuer's keys).
    started: Instant,
    _child: tokio::process::Child,
}

/// Which example.
#[derive(Debug, Clone, Copy)]
enum Example {
    Rust,
    Node,
}

impl Provider {
    async fn start(example: Example, api: &str, chain_id: u64, registry: &str) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let listen = format!("127.0.0.1:{port}");
        let started = Instant::now();
        let mut command = match example {
            Example::Rust => tokio::process::Command::new(env!("CARGO_BIN_EXE_pass-provider-under-test")),
            Example::Node => {
                let mut node = tokio::process::Command::new("node");
                node.arg(kya_tests::repo_root().join("core/npm/examples/pass-provider.mjs"));
                node
            }
        };
        let mut child = command
            .env("KYA_API_URL", api)
            .env("CHAIN_ID", chain_id.to_string())
            .env("REGISTRY_ADDRESS", registry)
            .env("PROVIDER_LISTEN", &listen)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the provider starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await;
        let line = ready.expect("the provider is up within 30 s").unwrap().expect("its first line");
        // Its later lines (none are expected) are read, so a full pipe never blocks it.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        assert!(line.starts_with("provider: POST http://"), "{line}");
        Self { origin: format!("http://{listen}"), started, _child: child }
    }

    /// `POST /v1/infer` signed by `agent`, with `pass` as `KYA-Pass` (none: no header).
    async fn infer(&self, agent: &RequestSigner, pass: Option<&str>) -> (u16, Value) {
        self.infer_at(agent, pass, &self.origin).await
    }

    /// [`Provider::infer`], signed for `signed_for`'s host but sent to this provider.
    async fn infer_at(&self, agent: &RequestSigner, pass: Option<&str>, signed_for: &str) -> (u16, Value) {
        self.send(self.signed(agent, pass, signed_for)).await
    }

    /// A request to this provider signed by `agent` for `signed_for`'s host.
    fn signed(&self, agent: &RequestSigner, pass: Option<&str>, signed_for: &str) -> reqwest::Request {
        let mut builder = reqwest::Client::new()
            .post(format!("{signed_for}/v1/infer?model=small"))
            .header("content-type", "application/json")
            .body(BODY);
        if let Some(pass) = pass {
            builder = builder.header("KYA-Pass", pass);
        }
        let mut request = builder.build().unwrap();
        agent.sign_reqwest(&mut request).expect("signs");
        // Sent to this provider whatever host it was signed for.
        *request.url_mut() = format!("{}/v1/infer?model=small", self.origin).parse().unwrap();
        request
    }

    async fn send(&self, request: reqwest::Request) -> (u16, Value) {
        let response = reqwest::Client::new().execute(request).await.expect("the provider answers");
        let status = response.status().as_u16();
        (status, response.json().await.expect("JSON"))
    }
}

/// Waits until the Worker's log shows `times` requests whose lines contain `path` (any case):
/// request lines reach the log through wrangler's process, each posted on its own once the
/// answer's headers are out, so late and not always in the order the answers were given (a CI run
/// once logged the test's own `…/pass` request, answered before the first marker was sent, after
/// that marker).
pub(super) async fn wait_until_logged(worker: &EdgeWorker, path: &str, times: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let path = path.to_lowercase();
    let logged = |log: &str| {
        log.lines()
            .filter(|line| line.contains("[wrangler:info]") && line.to_lowercase().contains(&path))
            .count()
    };
    while logged(&worker.output()) < times {
        assert!(Instant::now() < deadline, "{path} not logged {times} times:\n{}", worker.output());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The requests the Worker's log shows between two marker requests the test makes, for the
/// paths a per-request check would call (`/api/v1/kya…`, the JWKS). A request made before the
/// first marker is sent must already show in the log ([`wait_until_logged`]): lines can reach
/// the log out of order.
pub(super) async fn api_requests_between(worker: &EdgeWorker, first: &str, second: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = worker.output();
        let lines: Vec<&str> = log.lines().filter(|line| line.contains("[wrangler:info]")).collect();
        let at = |marker: &str| lines.iter().position(|line| line.contains(marker));
        if let (Some(start), Some(end)) = (at(first), at(second)) {
            return lines[start + 1..end]
                .iter()
                .filter(|line| line.contains("/api/v1/kya") || line.contains("/.well-known/jwks.json"))
                .map(|line| (*line).to_owned())
                .collect();
        }
        assert!(
            Instant::now() < deadline,
            "the markers {first} and {second} never showed in the log:\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn providers_admit_agents_by_pass_offline_and_drop_them_on_the_feeds_word() {
    let t = TestChain::start().await;
    // One agent per provider: a suspension then revokes one provider's agent only.
    let keys_of_agents = [PrivateKeySigner::random(), PrivateKeySigner::random()];
    for key in &keys_of_agents {
        t.chain.impersonate(key.address()).await.expect("funds the agent");
        t.chain.send(key.address(), t.registry(), &register_call(key.address(), 0)).await.expect("registers");
    }
    let keys = SigningKeys::new(SigningKey::from_seed(&[0x61; 32]), Vec::new());
    let mut vars = chain_vars(&t.rpc_url(), t.registry());
    vars.push(("PASS_SIGNING_KEYS", keys.private_json()));
    let worker = EdgeWorker::start_indexed(&vars).await;
    worker.run_index().await;
    let registry = t.registry().to_checksum(None);
    for (index, (example, key)) in [Example::Rust, Example::Node].into_iter().zip(&keys_of_agents).enumerate()
    {
        let provider = Provider::start(example, &worker.base, t.chain_id(), &registry).await;
        let agent_id = index as u64 + 1;
        admits_and_revokes(&t, &worker, &provider, key, agent_id, example).await;
    }
}

/// One provider's checks, for the agent `agent_id` whose wallet `key` holds.
async fn admits_and_revokes(
    t: &TestChain,
    worker: &EdgeWorker,
    provider: &Provider,
    key: &PrivateKeySigner,
    agent_id: u64,
    example: Example,
) {
    let api = ApiClient::new(&worker.base).unwrap();
    let agent = RequestSigner::new(key, t.chain_id());
    let pass = api.pass(key.address()).await.expect("the agent's pass");
    // The test's own request and the keys each provider fetched as it started (this one is the
    // `agent_id`th), logged before the window below opens.
    wait_until_logged(worker, &format!("/api/v1/kya/{}/pass", key.address()), 1).await;
    wait_until_logged(worker, kya_core::pass::JWKS_PATH, agent_id as usize).await;

    // Five requests, each signed anew, with the pass: served, and none of them cost the
    // provider a request to the API.
    let marker = |n: u64| format!("0x{}", format!("{n:02x}").repeat(20));
    let client = worker.client();
    client.get(&format!("/api/v1/kya/{}", marker(0xa1 + 2 * agent_id))).await;
    for _ in 0..5 {
        let (status, body) = provider.infer(&agent, Some(&pass)).await;
        assert_eq!(status, 200, "{example:?}: {body}");
        assert_eq!(body["agentId"], agent_id, "{example:?}");
        assert_eq!(body["signer"], key.address().to_checksum(None));
        assert_eq!(body["echo"], json!({ "prompt": "hello" }));
    }
    client.get(&format!("/api/v1/kya/{}", marker(0xa2 + 2 * agent_id))).await;
    let calls =
        api_requests_between(worker, &marker(0xa1 + 2 * agent_id), &marker(0xa2 + 2 * agent_id)).await;
    assert_eq!(
        calls,
        Vec::<String>::new(),
        "{example:?}: the provider's requests to the API while it served five"
    );

    // Turned away: the same signed request again; no pass; another wallet's pass; a signature
    // made for another host.
    let once = provider.signed(&agent, Some(&pass), &provider.origin);
    let again = once.try_clone().unwrap();
    assert_eq!(provider.send(once).await.0, 200);
    let (status, body) = provider.send(again).await;
    assert_eq!((status, &body["error"]), (401, &json!("replayed")), "{example:?}: {body}");
    let (status, body) = provider.infer(&agent, None).await;
    assert_eq!((status, &body["error"]), (401, &json!("no_pass")), "{example:?}: {body}");
    let stranger = PrivateKeySigner::random();
    let strangers_pass = api.pass(stranger.address()).await.unwrap();
    let (status, body) = provider.infer(&agent, Some(&strangers_pass)).await;
    assert_eq!((status, &body["error"]), (403, &json!("not_the_signer")), "{example:?}: {body}");
    // The provider rebuilds the URL on the origin it serves, so the signature base names its
    // own host: a signature made for another does not verify.
    let (status, body) = provider.infer_at(&agent, Some(&pass), "http://elsewhere.example").await;
    assert_eq!((status, &body["error"]), (401, &json!("bad_signature")), "{example:?}: {body}");
    // The stranger's own request with its own pass: a true pass of a wallet with no agent.
    let (status, body) =
        provider.infer(&RequestSigner::new(&stranger, t.chain_id()), Some(&strangers_pass)).await;
    assert_eq!((status, &body["error"]), (403, &json!("not_compliant")), "{example:?}: {body}");

    // A regulator suspends the agent. Once the index has run, the feed says so, and the
    // provider refuses the pass it admitted above, though the pass itself has not expired.
    let regulator = t.deployment.regulator;
    t.chain
        .send(regulator, t.registry(), &AgentRegistry::suspendAgentCall { agentId: U256::from(agent_id) })
        .await
        .expect("suspended");
    worker.run_index().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let refused = loop {
        let (status, body) = provider.infer(&agent, Some(&pass)).await;
        if status != 200 {
            break (status, body);
        }
        assert!(
            Instant::now() < deadline,
            "{example:?}: the provider still admits the suspended agent's pass"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!((refused.0, &refused.1["error"]), (403, &json!("revoked")), "{example:?}: {}", refused.1);
    // Its new pass states the suspension.
    let new_pass = api.pass(key.address()).await.unwrap();
    let (status, body) = provider.infer(&agent, Some(&new_pass)).await;
    assert_eq!((status, &body["error"]), (403, &json!("not_compliant")), "{example:?}: {body}");

    // 200 requests at once, each with the agent's pass signed anew by a key of its own, as
    // anyone can: turned away as unknown_key, and together at most one fetch of the issuer's
    // keys (the throttle's 10 s since the provider's first fetch have passed: one may start).
    tokio::time::sleep_until((provider.started + Duration::from_millis(10_500)).into()).await;
    client.get(&format!("/api/v1/kya/{}", marker(0xb1 + 2 * agent_id))).await;
    let requests: Vec<reqwest::Request> =
        (0..200u32).map(|n| provider.signed(&agent, Some(&forged(&pass, n)), &provider.origin)).collect();
    let answers = join_all(requests.into_iter().map(|request| provider.send(request))).await;
    for (status, body) in &answers {
        assert_eq!((*status, &body["error"]), (403, &json!("unknown_key")), "{example:?}: {body}");
    }
    client.get(&format!("/api/v1/kya/{}", marker(0xb2 + 2 * agent_id))).await;
    let calls =
        api_requests_between(worker, &marker(0xb1 + 2 * agent_id), &marker(0xb2 + 2 * agent_id)).await;
    assert!(
        calls.len() <= 1 && calls.iter().all(|line| line.contains(kya_core::pass::JWKS_PATH)),
        "{example:?}: the provider's requests to the API for 200 made-up keys: {calls:#?}"
    );
}

/// `pass`'s claims, signed by a key nobody serves (the `n`th).
fn forged(pass: &str, n: u32) -> String {
    let payload = pass.split('.').nth(1).expect("a compact JWS");
    let claims: PassClaims = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    let mut seed = [0x5e; 32];
    seed[..4].copy_from_slice(&n.to_be_bytes());
    jws::sign(&claims, &SigningKey::from_seed(&seed))
}
