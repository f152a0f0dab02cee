//! How long a write takes from being mined to showing, under the pacer as deployed: anvil with the
//! registry mines a block every [`BLOCK_TIME_SECS`] (Base's block time), the Worker under
//! `wrangler dev` runs the index from its `IndexPacer` alarm every `INDEX_INTERVAL_SECS` (2 s, the
//! default), and nothing else drives it (one watchdog call arms the pacer, as the Cron Trigger's
//! first call does).
//!
//! [`WRITES_PER_KIND`] writes of each kind (a registration, an attestation, a revenue report, a
//! suspension), one at a time, each waited for before the next. For each, measured from the
//! moment its block was mined (the first poll of `eth_blockNumber` that saw the block, every
//! [`HEAD_POLL`]):
//!
//! - **answers**: the first index-served answer that shows it, polled every [`ANSWER_POLL`]
//!   (`/stats` counts the registration, `/agents/compliance` the attestation's age,
//!   `/revenue/aggregate` the report, `/stats/detailed` the suspension), with the answers' cache
//!   off (`INDEX_ANSWER_TTL_SECS = 0`): what the index serves, not how long a cached answer lives;
//! - **stream**: the write's provisional event (its type and transaction) at a listener of
//!   `GET /api/v1/changes/stream` connected before the first write;
//! - **point answers**: the first `/kya/:wallet` of the write's agent that shows it (registered,
//!   its attestation's time, `isCompliant: false` after the suspension), and for the suspension
//!   the first `/kya/:wallet/pass` saying `isCompliant: false`, polled beside the answer above,
//!   each required to come from the index (no `X-Index-Fallback`): what a provider polling the
//!   API sees, with no TTL between it and the index (issue 63's target: p90 at most 2 blocks).
//!
//! Each in milliseconds and in blocks (the milliseconds over the block time), median and p90.
//!
//! After each round, a **reorganisation**: a registration is mined and streamed, then the chain
//! is reverted to before it (`evm_revert`) and another wallet's registration takes its place at
//! the same height (the agent id too). Measured from the moment the replacing block was first
//! seen (a poll of the head's hash every [`HEAD_POLL`]) to the first registration's retraction
//! and to the replacing registration's provisional event at the stream's listener. The writes
//! of the next round are measured on a chain that reorganises every round.
//!
//! `cargo bench -p kya-tests --bench feed_latency` prints the report and writes it to
//! `docs/bench/change-latency.md` (its reading, below the tables, is kept), in about 8 minutes.

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use alloy::{
    primitives::{Address, B256, U256},
    providers::Provider,
    sol_types::SolCall,
};
use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use kya_core::{
    chain::abi::AgentRegistry,
    pass::{SigningKey, SigningKeys},
};
use kya_devchain::dev_accounts::{self, Role};
use kya_tests::{
    TestChain, consented_register_call,
    edge_fixture::{EdgeClient, EdgeWorker, chain_vars},
    repo_root,
    sse_listener::SseListener,
};
use serde_json::{Value, json};

/// Seconds between two blocks, as Base.
const BLOCK_TIME_SECS: u64 = 2;
/// Writes of each kind.
const WRITES_PER_KIND: u64 = 24;
/// How often the chain's head is asked for, to learn when a block was mined.
const HEAD_POLL: Duration = Duration::from_millis(10);
/// How often the answers are asked for while a write is awaited.
const ANSWER_POLL: Duration = Duration::from_millis(50);
/// Most a write is waited for before the bench calls it lost.
const PATIENCE: Duration = Duration::from_secs(60);

/// The kinds of write measured, in the order each round writes them.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Kind {
    Registration,
    Attestation,
    RevenueReport,
    StatusChange,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Registration, Kind::Attestation, Kind::RevenueReport, Kind::StatusChange];

    fn name(self) -> &'static str {
        match self {
            Kind::Registration => "registration",
            Kind::Attestation => "attestation",
            Kind::RevenueReport => "revenue report",
            Kind::StatusChange => "status change (suspension)",
        }
    }

    /// The feed's event type of the write itself.
    fn event_type(self) -> &'static str {
        match self {
            Kind::Registration => "agent.registered",
            Kind::Attestation => "agent.attested",
            Kind::RevenueReport => "agent.revenue_reported",
            Kind::StatusChange => "agent.status_changed",
        }
    }

    /// The index-served answer that shows it.
    fn answer_path(self) -> &'static str {
        match self {
            Kind::Registration => "/api/v1/stats",
            Kind::Attestation => "/api/v1/agents/compliance",
            Kind::RevenueReport => "/api/v1/revenue/aggregate",
            Kind::StatusChange => "/api/v1/stats/detailed",
        }
    }
}

/// When each block was first seen mined, by number (its first version) and by hash (every
/// version: a reorganisation's blocks too).
#[derive(Default)]
struct Seen {
    numbers: BTreeMap<u64, Instant>,
    hashes: BTreeMap<B256, Instant>,
}
type Mined = Arc<Mutex<Seen>>;

/// Polls the head every [`HEAD_POLL`] and notes when each block number and hash first appears.
fn watch_blocks(chain: &TestChain) -> (Mined, tokio::task::JoinHandle<()>) {
    let mined: Mined = Arc::default();
    let provider = chain.chain.provider().clone();
    let noted = Arc::clone(&mined);
    let task = tokio::spawn(async move {
        loop {
            if let Ok(Some(block)) = provider.get_block_by_number(alloy::eips::BlockNumberOrTag::Latest).await
            {
                let now = Instant::now();
                let mut seen = noted.lock().unwrap();
                seen.numbers.entry(block.header.number).or_insert(now);
                seen.hashes.entry(block.header.hash).or_insert(now);
            }
            tokio::time::sleep(HEAD_POLL).await;
        }
    });
    (mined, task)
}

/// Stream events received: (data as JSON, when).
type Received = Arc<Mutex<Vec<(Value, Instant)>>>;

async fn listen(worker: &EdgeWorker) -> (Received, tokio::task::JoinHandle<()>) {
    let received: Received = Arc::default();
    let mut stream = SseListener::open(&worker.base, "/api/v1/changes/stream", None)
        .await
        .unwrap_or_else(|refused| panic!("the listener was refused: {refused:?}"));
    let kept = Arc::clone(&received);
    let task = tokio::spawn(async move {
        while let Some(message) = stream.next(Duration::from_secs(3_600)).await {
            let data: Value = serde_json::from_str(&message.data).expect("an event is JSON");
            kept.lock().unwrap().push((data, Instant::now()));
        }
    });
    (received, task)
}

/// One write: mined in block `block` (with time `block_time`) by transaction `hash`.
struct Write {
    kind: Kind,
    agent: u64,
    /// The agent's wallet, for its point answers.
    wallet: Address,
    hash: B256,
    block: u64,
    block_time: u64,
    /// Writes of this kind before and with this one (the answers count them).
    nth: u64,
}

/// Whether `answer` (from the index, its block and body) shows `write`.
fn shows(write: &Write, answer: &kya_tests::edge_fixture::Answer) -> bool {
    let Some(at) = answer.header("x-block-number").and_then(|block| block.parse::<u64>().ok()) else {
        panic!(
            "{}: an answer without X-Block-Number (not from the index?): {:?}",
            write.kind.name(),
            answer.headers
        )
    };
    if at < write.block {
        return false;
    }
    let body = &answer.body;
    let shown = match write.kind {
        Kind::Registration => body["totalAgents"].as_u64() >= Some(write.agent),
        Kind::Attestation => {
            let time: u64 = answer.header("x-block-timestamp").unwrap().parse().unwrap();
            body["data"].as_array().unwrap().iter().any(|item| {
                item["agentId"] == json!(write.agent)
                    && item["compliance"]["secondsSinceAttestation"].as_u64() == Some(time - write.block_time)
            })
        }
        Kind::RevenueReport => body["totalReports"].as_u64() >= Some(write.nth),
        Kind::StatusChange => body["statusDistribution"]["Suspended"].as_u64() >= Some(write.nth),
    };
    assert!(
        shown,
        "{}: the index at block {at} does not show block {}'s write: {body}",
        write.kind.name(),
        write.block
    );
    shown
}

/// Sends `call` and returns its transaction, block and block time.
async fn send<C: SolCall>(chain: &TestChain, from: Address, call: &C) -> (B256, u64, u64) {
    let (hash, block, _, time) = send_seen(chain, from, call).await;
    (hash, block, time)
}

/// [`send`], with the block's hash.
async fn send_seen<C: SolCall>(chain: &TestChain, from: Address, call: &C) -> (B256, u64, B256, u64) {
    let receipt = chain.chain.send(from, chain.registry(), call).await.expect("mined");
    let block = receipt.block_number.expect("a block");
    let header =
        chain.chain.provider().get_block_by_number(block.into()).await.unwrap().expect("the block").header;
    (receipt.transaction_hash, block, header.hash, header.timestamp)
}

/// The stream's first event (and when it came) that `pick` selects, within [`PATIENCE`].
async fn streamed(received: &Received, what: &str, pick: impl Fn(&Value) -> bool) -> (Value, Instant) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(found) = received.lock().unwrap().iter().find(|(event, _)| pick(event)).cloned() {
            return found;
        }
        assert!(Instant::now() < deadline, "{what}: never streamed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One reorganisation at the tip: a registration by `first`, streamed; the chain reverted to
/// before it and `second`'s registration mined at the same height. Milliseconds from the
/// replacing block first seen to the first registration's retraction, and to the second's
/// provisional event.
async fn reorganise(
    chain: &TestChain,
    mined: &Mined,
    received: &Received,
    first: &alloy::signers::local::PrivateKeySigner,
    second: &alloy::signers::local::PrivateKeySigner,
) -> (f64, f64) {
    let provider = chain.chain.provider();
    let creator = dev_accounts::address(Role::CreatorA);
    let snapshot: Value = provider.raw_request("evm_snapshot".into(), ()).await.unwrap();
    let (hash, _, _, _) =
        send_seen(chain, creator, &consented_register_call(chain, creator, first, 0).await).await;
    let hash = hash.to_string();
    let (provisional, _) = streamed(received, "the first registration", |event| {
        event["type"] == "agent.registered"
            && event["finality"] == "provisional"
            && event["log"]["transactionHash"] == hash.as_str()
    })
    .await;
    let id = provisional["id"].as_str().unwrap().to_owned();
    let reverted: bool = provider.raw_request("evm_revert".into(), (snapshot,)).await.unwrap();
    assert!(reverted);
    let reverted_at = Instant::now();
    let call = consented_register_call(chain, creator, second, 0).await;
    let (replacing, _, block_hash, _) = send_seen(chain, creator, &call).await;
    let replacing = replacing.to_string();
    let deadline = Instant::now() + PATIENCE;
    let seen_at = loop {
        // The replacing chain's first block: the first hash seen after the revert (the one
        // with the replacing write, or an empty one the interval miner made before it).
        let first_after = {
            let seen = mined.lock().unwrap();
            seen.hashes
                .contains_key(&block_hash)
                .then(|| seen.hashes.values().copied().filter(|at| *at > reverted_at).min())
                .flatten()
        };
        if let Some(at) = first_after {
            break at;
        }
        assert!(Instant::now() < deadline, "the replacing block was never seen");
        tokio::time::sleep(HEAD_POLL).await;
    };
    let (_, retracted_at) =
        streamed(received, "the retraction", |event| event["retracts"] == id.as_str()).await;
    let (_, replaced_at) = streamed(received, "the replacing registration", |event| {
        event["type"] == "agent.registered"
            && event["finality"] == "provisional"
            && event["log"]["transactionHash"] == replacing.as_str()
    })
    .await;
    let ms = |at: Instant| at.saturating_duration_since(seen_at).as_secs_f64() * 1_000.0;
    (ms(retracted_at), ms(replaced_at))
}

/// Whether the point answer `answer` (`/kya`, or with `pass` its pass) shows `write`; `None` when
/// the write is not one a point answer shows (a revenue report).
fn point_shows(write: &Write, answer: &kya_tests::edge_fixture::Answer, pass: bool) -> Option<bool> {
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(answer.header("x-index-fallback"), None, "answered from the index: {:?}", answer.headers);
    let at: u64 = answer.header("x-block-number").expect("X-Block-Number").parse().unwrap();
    let (kya, registered, compliant, attested) = if pass {
        let payload = answer.text.split('.').nth(1).expect("a compact JWS");
        let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
        let kya = claims["kya"].clone();
        (
            kya.clone(),
            kya["isRegistered"].clone(),
            kya["isCompliant"].clone(),
            kya["lastAttestation"].as_u64(),
        )
    } else {
        let body = answer.body.clone();
        let attested = body["agent"]["lastAttestation"].as_str().and_then(kya_core::api::time::parse_iso8601);
        (body.clone(), body["isRegistered"].clone(), body["isCompliant"].clone(), attested)
    };
    let shown = match write.kind {
        Kind::Registration => registered == json!(true),
        Kind::Attestation => attested == Some(write.block_time),
        Kind::RevenueReport => return None,
        Kind::StatusChange => compliant == json!(false),
    };
    assert!(
        !shown || at >= write.block,
        "{}: shown at block {at}, before block {}'s write: {kya}",
        write.kind.name(),
        write.block
    );
    Some(shown)
}

/// Milliseconds from the write's block mined to the first point answer that shows it (`/kya`, or
/// its pass), polled every [`ANSWER_POLL`]; `None` for a write no point answer shows.
async fn point_latency(api: &EdgeClient, write: &Write, pass: bool, mined_at: Instant) -> Option<f64> {
    let deadline = Instant::now() + PATIENCE;
    let path = format!("/api/v1/kya/{}{}", write.wallet, if pass { "/pass" } else { "" });
    loop {
        let answer = api.get(&path).await;
        if point_shows(write, &answer, pass)? {
            return Some(Instant::now().saturating_duration_since(mined_at).as_secs_f64() * 1_000.0);
        }
        assert!(
            Instant::now() < deadline,
            "{} in block {} never shown at {path}",
            write.kind.name(),
            write.block
        );
        tokio::time::sleep(ANSWER_POLL).await;
    }
}

/// Milliseconds from the write's block mined to the answer showing it, to its event, to the
/// first `/kya` showing it and (a suspension) the first pass.
async fn measure(
    api: &EdgeClient,
    mined: &Mined,
    received: &Received,
    write: &Write,
) -> (f64, f64, Option<f64>, Option<f64>) {
    let deadline = Instant::now() + PATIENCE;
    let mined_at = loop {
        if let Some(at) = mined.lock().unwrap().numbers.get(&write.block) {
            break *at;
        }
        assert!(Instant::now() < deadline, "block {} never seen by the head's poll", write.block);
        tokio::time::sleep(HEAD_POLL).await;
    };
    // The registry-wide answer, `/kya` and the pass are polled side by side.
    let answered = async {
        loop {
            let answer = api.get(write.kind.answer_path()).await;
            assert_eq!(answer.status, 200, "{}", answer.text);
            assert_eq!(
                answer.header("x-index-fallback"),
                None,
                "answered from the index: {:?}",
                answer.headers
            );
            if shows(write, &answer) {
                break Instant::now();
            }
            assert!(Instant::now() < deadline, "{} in block {} never shown", write.kind.name(), write.block);
            tokio::time::sleep(ANSWER_POLL).await;
        }
    };
    let kya = point_latency(api, write, false, mined_at);
    let pass = async {
        if write.kind == Kind::StatusChange { point_latency(api, write, true, mined_at).await } else { None }
    };
    let (answered_at, kya_ms, pass_ms) = futures::join!(answered, kya, pass);
    let hash = write.hash.to_string();
    let streamed_at = loop {
        let found = received.lock().unwrap().iter().find_map(|(event, at)| {
            (event["type"] == write.kind.event_type()
                && event["finality"] == "provisional"
                && event["log"]["transactionHash"] == hash.as_str())
            .then_some(*at)
        });
        if let Some(at) = found {
            break at;
        }
        assert!(Instant::now() < deadline, "{} in block {} never streamed", write.kind.name(), write.block);
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let ms = |at: Instant| at.saturating_duration_since(mined_at).as_secs_f64() * 1_000.0;
    (ms(answered_at), ms(streamed_at), kya_ms, pass_ms)
}

/// Waits until the index names the chain's head and holds every agent.
async fn until_indexed(api: &EdgeClient, chain: &TestChain) {
    let head = chain.chain.provider().get_block_number().await.unwrap();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let health = api.get("/health").await;
        let index = &health.body["index"];
        if index["block"].as_u64() >= Some(head) && index["complete"] == true {
            return;
        }
        assert!(Instant::now() < deadline, "the pacer did not bring the index to block {head}: {index}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn percentile(values: &[f64], fraction: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[((sorted.len() - 1) as f64 * fraction).round() as usize]
}

/// One table row: median and p90 in ms and in blocks, and the most.
fn row(name: &str, values: &[f64]) -> String {
    let block_ms = (BLOCK_TIME_SECS * 1_000) as f64;
    let (median, p90, most) = (percentile(values, 0.5), percentile(values, 0.9), percentile(values, 1.0));
    format!(
        "| {name} | {} | {median:.0} ms ({:.2}) | {p90:.0} ms ({:.2}) | {most:.0} ms ({:.2}) |",
        values.len(),
        median / block_ms,
        p90 / block_ms,
        most / block_ms
    )
}

fn report(
    results: &BTreeMap<Kind, (Vec<f64>, Vec<f64>)>,
    points: &BTreeMap<Kind, (Vec<f64>, Vec<f64>)>,
    reorganisations: &(Vec<f64>, Vec<f64>),
    commit: &str,
    load: (&str, &str),
) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "# The change feed's latency: from a write mined to answers and listeners, and through reorganisations\n"
    );
    let _ = writeln!(
        text,
        "Measured by `cargo bench -p kya-tests --bench feed_latency` (`tests/benches/feed_latency/main.rs`) \
         at {commit}, under `wrangler dev` on this machine (two cores shared with other work), against \
         anvil mining a block every {BLOCK_TIME_SECS} s, the index run by its pacer every 2 s \
         (`INDEX_INTERVAL_SECS`, the default) and nothing else. {WRITES_PER_KIND} writes of each kind, one \
         at a time; from the moment the write's block was mined (first seen by a poll of the head every \
         {} ms) to the first index-served answer that shows it (polled every {} ms, the answers' cache \
         off) and to its event at one listener of `/api/v1/changes/stream`. In brackets: blocks \
         (the time over the {BLOCK_TIME_SECS}-s block time). Load averages (1, 5, 15 min): {} at the \
         start, {} at the end.\n",
        HEAD_POLL.as_millis(),
        ANSWER_POLL.as_millis(),
        load.0,
        load.1
    );
    for (title, pick) in [("Answers", 0), ("Stream", 1)] {
        let _ = writeln!(text, "| {title}: write | writes | median | p90 | most |");
        let _ = writeln!(text, "|---|---|---|---|---|");
        let mut all = Vec::new();
        for (kind, values) in results {
            let values = if pick == 0 { &values.0 } else { &values.1 };
            all.extend_from_slice(values);
            let _ = writeln!(text, "{}", row(kind.name(), values));
        }
        let _ = writeln!(text, "{}\n", row("all", &all));
    }
    let _ = writeln!(
        text,
        "Point answers from the index (no TTL: each request reads D1), polled side by side with the \
         answers above, each from the index (no `X-Index-Fallback`) and naming a block at or past the \
         write's. Target (issue 63): p90 at most 2 blocks.\n"
    );
    let _ = writeln!(text, "| Point answer: write | writes | median | p90 | most |");
    let _ = writeln!(text, "|---|---|---|---|---|");
    let mut all = Vec::new();
    for (kind, (kya, pass)) in points {
        all.extend_from_slice(kya);
        let _ = writeln!(text, "{}", row(&format!("`/kya/:wallet`: {}", kind.name()), kya));
        if !pass.is_empty() {
            all.extend_from_slice(pass);
            let _ = writeln!(text, "{}", row(&format!("`/kya/:wallet/pass`: {}", kind.name()), pass));
        }
    }
    let _ = writeln!(text, "{}\n", row("all", &all));
    let _ = writeln!(
        text,
        "After each round, a reorganisation at the tip: a registration mined and streamed, the \
         chain reverted to before it and another wallet's registration mined at the same height. \
         From the replacing chain's first block seen (its hash, polled every {} ms) to:\n",
        HEAD_POLL.as_millis()
    );
    let _ = writeln!(text, "| Reorganisation: event | reorganisations | median | p90 | most |");
    let _ = writeln!(text, "|---|---|---|---|---|");
    let _ = writeln!(text, "{}", row("the first registration retracted", &reorganisations.0));
    let _ = writeln!(text, "{}\n", row("the replacing registration (provisional)", &reorganisations.1));
    text
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let chain = TestChain::start().await;
    let mut vars = chain_vars(&chain.rpc_url(), chain.registry());
    vars.extend([
        ("INDEX_INTERVAL_SECS", "2".to_owned()),
        ("INDEX_ANSWER_TTL_SECS", "0".to_owned()),
        ("MEMORY_CACHE_BYTES", "0".to_owned()),
        (
            "PASS_SIGNING_KEYS",
            SigningKeys::new(SigningKey::from_seed(&[0x3f; 32]), Vec::new()).private_json(),
        ),
    ]);
    let worker = EdgeWorker::start_indexed(&vars).await;
    let commit = kya_tests::commit_measured(&["core", "edge-api", "wrangler.toml", "Cargo.lock"]);
    let api = worker.client();
    // The watchdog's first call arms the pacer; from then on only its alarm runs the index.
    worker.run_index().await;
    until_indexed(&api, &chain).await;
    let provider = chain.chain.provider();
    let _: Value = provider.raw_request("evm_setIntervalMining".into(), (BLOCK_TIME_SECS,)).await.unwrap();
    let (mined, head_task) = watch_blocks(&chain);
    let (received, stream_task) = listen(&worker).await;
    let start_load = kya_tests::load_averages();

    let creator = dev_accounts::address(Role::CreatorA);
    let regulator = chain.deployment.regulator;
    let mut results: BTreeMap<Kind, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    let mut points: BTreeMap<Kind, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    let mut reorganisations = (Vec::new(), Vec::new());
    let started = Instant::now();
    // Each round registers one agent, and each reorganisation leaves one more.
    let mut next_id = 1;
    for round in 1..=WRITES_PER_KIND {
        let id = next_id;
        next_id += 2;
        for kind in Kind::ALL {
            let agent = U256::from(id);
            let (hash, block, block_time) = match kind {
                Kind::Registration => {
                    let wallet = dev_accounts::agent_wallet(round);
                    send(&chain, creator, &consented_register_call(&chain, creator, &wallet, 0).await).await
                }
                Kind::Attestation => {
                    send(&chain, creator, &AgentRegistry::attestComplianceCall { agentId: agent }).await
                }
                Kind::RevenueReport => {
                    let report = AgentRegistry::reportRevenueCall {
                        agentId: agent,
                        amount: U256::from(1_000 * round),
                        currency: "USD".into(),
                        category: "bench".into(),
                        periodStart: 1,
                        periodEnd: 2,
                    };
                    send(&chain, creator, &report).await
                }
                Kind::StatusChange => {
                    send(&chain, regulator, &AgentRegistry::suspendAgentCall { agentId: agent }).await
                }
            };
            let wallet = dev_accounts::agent_wallet(round).address();
            let write = Write { kind, agent: id, wallet, hash, block, block_time, nth: round };
            let (answer_ms, stream_ms, kya_ms, pass_ms) = measure(&api, &mined, &received, &write).await;
            let entry = results.entry(kind).or_default();
            entry.0.push(answer_ms);
            entry.1.push(stream_ms);
            if let Some(kya_ms) = kya_ms {
                let point = points.entry(kind).or_default();
                point.0.push(kya_ms);
                point.1.extend(pass_ms);
            }
        }
        let (first, second) =
            (dev_accounts::agent_wallet(1_000 + 2 * round), dev_accounts::agent_wallet(1_001 + 2 * round));
        let (retracted_ms, replaced_ms) = reorganise(&chain, &mined, &received, &first, &second).await;
        reorganisations.0.push(retracted_ms);
        reorganisations.1.push(replaced_ms);
        eprintln!("round {round} of {WRITES_PER_KIND}: {:.0} s", started.elapsed().as_secs_f64());
    }
    head_task.abort();
    stream_task.abort();
    let log = worker.output();
    assert!(!log.contains("index run failed"), "an index run failed:\n{log}");

    let text =
        report(&results, &points, &reorganisations, &commit, (&start_load, &kya_tests::load_averages()));
    println!("{text}");
    let path = repo_root().join("docs/bench/change-latency.md");
    let kept = std::fs::read_to_string(&path).unwrap_or_default();
    // The reading below the measured tables is written by hand and kept.
    let reading = kept.find("\n## Reading").map(|at| &kept[at..]).unwrap_or("");
    std::fs::write(&path, format!("{text}{reading}")).expect("the report is written");
}
