//! A relay's reads of the chain that need nothing of each other reach the node at once, and those
//! that do wait for what they need; a burst's checks on chain run a bounded number at a time.
//! Seen from a node that holds every such read for a while, so reads asked one after another
//! cannot overlap and reads asked together must.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::SolCall;
use futures::future::join_all;
use kya_core::chain::abi::Forwarder;
use kya_devchain::dev_accounts;
use kya_tests::{
    TestChain,
    relayer_fixture::{
        BinaryRelayer, Client, InProcessRelayer, body, forward, set, settings, sign_with_core,
        signed_registrations,
    },
    rpc_proxy::{self, Later, RpcAction},
};
use serde_json::{Value, json};

use super::{
    Engine, TestStore, agent_key, agent_of, anvil,
    cluster::{BINARY, count, daemon_env, holders_until},
    receipt, register_call,
};

/// How long the node holds each read a relay's checks make: longer than a loaded machine's
/// scheduling delay between two requests sent together, so whether two reads overlap says
/// whether they were asked together.
const HELD: Duration = Duration::from_secs(1);

/// One read as the node saw it: what it was, when it arrived and when it was answered.
#[derive(Debug, Clone)]
struct Read {
    what: String,
    arrived: Instant,
    answered: Instant,
}

/// Whether every one of `reads` was being answered at one moment.
fn all_at_once(reads: &[&Read]) -> bool {
    let last_arrival = reads.iter().map(|read| read.arrived).max().expect("reads");
    let first_answer = reads.iter().map(|read| read.answered).min().expect("reads");
    last_arrival < first_answer
}

/// What a request body asks: its method, or for an `eth_call` of the forwarder the function
/// (`verify`, `execute`).
fn what(request: &Value) -> String {
    let method = request["method"].as_str().unwrap_or_default().to_owned();
    if method != "eth_call" {
        return method;
    }
    let call = &request["params"][0];
    let data = call["input"].as_str().or_else(|| call["data"].as_str()).unwrap_or_default();
    let selector = |bytes: [u8; 4]| format!("0x{}", alloy::hex::encode(bytes));
    if data.starts_with(&selector(Forwarder::verifyCall::SELECTOR)) {
        "verify".into()
    } else if data.starts_with(&selector(Forwarder::executeCall::SELECTOR)) {
        "execute".into()
    } else {
        method
    }
}

/// A node in front of `upstream` that holds the reads a relay's checks make for [`HELD`], and
/// writes down each of them.
async fn holding_node(upstream: String, seen: Arc<Mutex<Vec<Read>>>) -> String {
    const HELD_METHODS: [&str; 5] =
        ["eth_getBalance", "eth_feeHistory", "eth_getBlockByNumber", "eth_call", "eth_estimateGas"];
    let http = kya_tests::http_client();
    rpc_proxy::start(
        Some(upstream.clone()),
        Arc::new(move |request: &str| {
            let parsed: Value = serde_json::from_str(request).unwrap_or(Value::Null);
            let method = parsed["method"].as_str().unwrap_or_default();
            if !HELD_METHODS.contains(&method) {
                return RpcAction::Forward(request.to_owned());
            }
            let (what, body) = (what(&parsed), request.to_owned());
            let (http, upstream, seen) = (http.clone(), upstream.clone(), Arc::clone(&seen));
            RpcAction::Later(Later(Box::pin(async move {
                let arrived = Instant::now();
                tokio::time::sleep(HELD).await;
                let answer = rpc_proxy::post(&http, &upstream, body).await;
                let read = Read { what, arrived, answered: Instant::now() };
                seen.lock().unwrap().push(read);
                answer
            })))
        }),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relays_independent_reads_reach_the_node_at_once_and_in_the_checks_order() {
    let t = TestChain::start().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let db = TestStore::new(Engine::Sqlite);
    let mut env = settings(&t, &db);
    set(&mut env, "RPC_URL", holding_node(t.rpc_url(), Arc::clone(&seen)).await);
    let relayer = InProcessRelayer::start(&env).await;

    let agent = agent_key(470);
    let request = forward(&t, agent.address(), 0, &register_call(agent.address(), 0));
    let posted = Instant::now();
    let (status, answer) =
        relayer.client.relay(&body(&request, &sign_with_core(&t, &agent, &request).signature)).await;
    assert_eq!(status, 200, "{answer}");
    assert!(receipt(&t, &answer).await.status(), "{answer}");
    assert_ne!(agent_of(&t, agent.address()).await, 0, "the registration ran");
    relayer.stop().await;

    let reads: Vec<Read> =
        seen.lock().unwrap().iter().filter(|read| read.arrived >= posted).cloned().collect();
    let only = |what: &str| {
        let mut found = reads.iter().filter(|read| read.what == what);
        let first = found.next().unwrap_or_else(|| panic!("no {what} read after the POST: {reads:#?}"));
        assert!(found.next().is_none(), "one {what} read for one relay: {reads:#?}");
        first
    };
    let verify = only("verify");
    // The relay's own reads before `verify`: the last of each kind that arrived before it (the
    // daemon's background work may read a balance or a block too).
    let before_verify = |what: &str| {
        reads
            .iter()
            .filter(|read| read.what == what && read.arrived < verify.arrived)
            .max_by_key(|read| read.arrived)
            .unwrap_or_else(|| panic!("no {what} read before verify: {reads:#?}"))
    };
    let balance = before_verify("eth_getBalance");
    let fee = before_verify("eth_feeHistory");
    let head = before_verify("eth_getBlockByNumber");
    assert!(all_at_once(&[balance, fee, head]), "the balance, the fee and the head together: {reads:#?}");
    assert!(
        [balance, fee, head].iter().all(|read| read.answered <= verify.arrived),
        "verify reads the head block, so it waits for it: {reads:#?}"
    );

    let simulation = only("execute");
    let estimate = only("eth_estimateGas");
    assert!(
        simulation.arrived >= verify.answered && estimate.arrived >= verify.answered,
        "nothing is simulated or estimated for a request the forwarder has not verified: {reads:#?}"
    );
    assert!(all_at_once(&[simulation, estimate]), "the simulation and the estimate together: {reads:#?}");
}

/// A burst larger than the daemon's turns at the checks on chain (16 with one key): the node
/// never has more of the burst's `verify` calls at once than there are turns, and has that many;
/// the relays checked together share their fee, balance and head reads; and every relay of the
/// burst is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_is_checked_on_chain_a_bounded_number_at_a_time() {
    const TURNS: usize = 16;
    const BURST: u64 = 24;
    let t = TestChain::start().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let db = TestStore::new(Engine::Sqlite);
    let mut env = settings(&t, &db);
    set(&mut env, "RPC_URL", holding_node(t.rpc_url(), Arc::clone(&seen)).await);
    set(&mut env, "RATE_LIMIT_PER_IP", "1000");
    let relayer = InProcessRelayer::start(&env).await;

    let posted = burst(&t, &relayer.client, 480..480 + BURST).await;
    relayer.stop().await;

    let reads_of = |what: &str| reads_since(&seen, posted, what);
    // The relays' `verify` calls: one each, held at the node for [`HELD`].
    let verifies = reads_of("verify");
    assert_eq!(verifies.len(), BURST as usize, "one verify a relay: {verifies:#?}");
    assert_eq!(most_at_once(&verifies), TURNS, "as many at once as there are turns, never more");
    // The fee: asked by one relay while the others checked beside it wait for its answer, so
    // never twice at once, and far fewer times than there are relays (16 checked together, then
    // the rest as turns come free).
    let fees = reads_of("eth_feeHistory");
    assert_eq!(most_at_once(&fees), 1, "one fee read at a time: {fees:#?}");
    assert!(fees.len() <= BURST as usize / 3, "the relays checked together share a fee read: {fees:#?}");
    let balances = reads_of("eth_getBalance");
    eprintln!("{BURST} relays: {} fee reads, {} balance reads", fees.len(), balances.len());
    assert!(balances.len() <= BURST as usize / 3, "and a balance read: {balances:#?}");
}

/// Posts the registrations of agents `numbers` to `client` at once; each is answered 200 and
/// runs. Returns when they were posted.
async fn burst(t: &TestChain, client: &Client, numbers: std::ops::Range<u64>) -> Instant {
    let agents: Vec<_> = numbers.map(agent_key).collect();
    let bodies = signed_registrations(t, &agents);
    let posted = Instant::now();
    let answers = join_all(bodies.iter().map(|body| client.relay(body))).await;
    for (status, answer) in &answers {
        assert_eq!(*status, 200, "{answer}");
    }
    for agent in &agents {
        assert_ne!(agent_of(t, agent.address()).await, 0, "every relay of the burst ran");
    }
    posted
}

/// The reads of `what` the node saw arrive from `since` on.
fn reads_since(seen: &Mutex<Vec<Read>>, since: Instant, what: &str) -> Vec<Read> {
    seen.lock().unwrap().iter().filter(|read| read.arrived >= since && read.what == what).cloned().collect()
}

/// The most of `reads` the node held at one moment.
fn most_at_once(reads: &[Read]) -> usize {
    reads
        .iter()
        .map(|read| {
            reads
                .iter()
                .filter(|other| other.arrived <= read.arrived && read.arrived < other.answered)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// In a cluster a daemon checks as many requests at once as the keys it holds can take, not as
/// many as all the keys it is configured with: two daemons sharing four keys hold two each, so
/// a burst of 24 at one of them has 16 `verify` calls at the node at once (8 a key held, 16 at
/// least). Turns by the configured keys would be 32: the whole burst at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_of_a_cluster_checks_as_many_at_once_as_the_keys_it_holds_can_take() {
    const TURNS: usize = 16;
    const BURST: u64 = 24;
    let t = TestChain::start().await;
    let keys: Vec<PrivateKeySigner> = (0..4).map(|n| dev_accounts::agent_wallet(7_100_000 + n)).collect();
    for key in &keys {
        anvil(&t, "anvil_setBalance", json!([key.address(), "0x8ac7230489e80000"])).await;
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let node = holding_node(t.rpc_url(), Arc::clone(&seen)).await;
    let db = TestStore::new(Engine::Postgres);
    let daemon = |id: &str| {
        let mut env = daemon_env(&t, &db, &keys, id, 6);
        set(&mut env, "RPC_URL", node.clone());
        BinaryRelayer::start(BINARY, &env)
    };
    let (first, second) = (daemon("turns-a"), daemon("turns-b"));
    let (held, _) = holders_until(&first.client, Duration::from_secs(45), |seen| {
        count(seen, "turns-a") == 2 && count(seen, "turns-b") == 2
    })
    .await;
    eprintln!("keys held {held:?}");

    let posted = burst(&t, &first.client, 520..520 + BURST).await;
    drop((first, second));

    let verifies = reads_since(&seen, posted, "verify");
    assert_eq!(verifies.len(), BURST as usize, "one verify a relay: {verifies:#?}");
    assert_eq!(
        most_at_once(&verifies),
        TURNS,
        "8 turns for each of the 2 keys the daemon holds (16 at least), never the 32 of the 4 it is configured with"
    );
}
