//! Hand-offs whose key holder cannot send them: the real binary two or three times on one
//! PostgreSQL database, one key, anvil. A standby answers 202 past its wait while the holder's
//! node is unreachable, and the holder sends the relay once it can; a holder that dies with relays
//! handed off to it leaves them to the key's next holder, which sends each once; a send the node
//! refuses answers the standbys' clients as the holder's own, whether for the key's funds (503) or
//! for another reason (a gas limit above the block's: 500), and takes nothing; a holder slower
//! than the standby's wait gets its client 202, never 200 before the node has the transaction;
//! a hand-off waits for its holder's node, however long, and is sent once, never dropped by
//! the holder's reconciler.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use alloy::{
    primitives::{Address, U256},
    providers::Provider,
};
use futures::future::join_all;
use kya_tests::{
    TestChain,
    relayer_fixture::{BinaryRelayer, Engine, TestStore, set},
    rpc_proxy::{self, Later, RpcAction},
};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::{
    abuse, agent_key, anvil, balance,
    cluster::{
        assert_books_exact, cluster_keys, count, daemon_env, holders_until, registration, relay_until_mined,
    },
    forwarder_nonce,
};

const BINARY: &str = env!("CARGO_BIN_EXE_kya-relayer-under-test");

/// The line a daemon logs for each relay handed off to it that it sent.
const SENT_HANDED_OFF: &str = "relay sent (handed off by another daemon)";

/// The relays handed off and not yet sent (`handoffs`' rows), polled until there are `wanted`.
async fn until_handed_off(db: &TestStore, wanted: usize) {
    let database = db.database().expect("on PostgreSQL");
    let started = Instant::now();
    loop {
        let pending = tokio::task::block_in_place(|| database.value("SELECT count(*) FROM handoffs"));
        if pending == wanted.to_string() {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "handed off: {pending}, not {wanted}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One key, held by H, whose node is behind a proxy the test can cut; S holds none (a standby).
///
/// H's node unreachable: a registration sent to S is handed off to H, which cannot send it (its
/// node does not answer, so the relay stays handed off); past its 10-s wait S answers 202 with
/// the relay's id, status `accepted` and no transaction. H's node back, H sends it at its next
/// look, and `GET /relay/:id` on S reads it mined.
///
/// Then H's node is cut again, two registrations are handed off to it, and H is SIGKILLed with
/// them pending. S takes the key once H's lease (3 s) runs out and sends both (its waiting
/// handlers answer 200 with the hashes, or 202 past the wait); each is mined once. H sent one
/// relay in all, S two; every request ran once and the books equal the fees to the wei.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_answers_202_while_the_holder_cannot_send_and_a_dead_holders_hand_offs_go_to_the_next() {
    let t = TestChain::start().await;
    let keys: Vec<_> = cluster_keys(&t).await.into_iter().take(1).collect();
    let funded: Vec<U256> = join_all(keys.iter().map(|key| balance(&t, key.address()))).await;
    let db = TestStore::new(Engine::Postgres);
    let cut = Arc::new(AtomicBool::new(false));
    let node = rpc_proxy::start(Some(t.rpc_url()), {
        let cut = Arc::clone(&cut);
        Arc::new(move |request: &str| {
            if cut.load(Ordering::SeqCst) { RpcAction::Close } else { RpcAction::Forward(request.to_owned()) }
        })
    })
    .await;
    // The cluster's settings: the reconciler looks every second at relays older than 3 s, and
    // leaves a hand-off to its key's holder however long it waits.
    let env = |id: &str| daemon_env(&t, &db, &keys, id, 3);
    let mut env_h = env("holder-h");
    set(&mut env_h, "RPC_URL", node);
    let holder = BinaryRelayer::start(BINARY, &env_h);
    holders_until(&holder.client, Duration::from_secs(10), |seen| count(seen, "holder-h") == 1).await;
    let standby = BinaryRelayer::start(BINARY, &env("standby-s"));
    let (seen, _) =
        holders_until(&standby.client, Duration::from_secs(10), |seen| count(seen, "holder-h") == 1).await;
    assert_eq!(count(&seen, "standby-s"), 0, "{seen:?}");
    let signers: Vec<Address> = (0..3).map(|n| agent_key(1_800 + n).address()).collect();

    // The holder's node unreachable: 202 past the standby's wait, sent once the node is back.
    cut.store(true, Ordering::SeqCst);
    let asked_at = Instant::now();
    let (status, accepted) = standby.client.relay(&registration(&t, 1_800)).await;
    let waited = asked_at.elapsed();
    assert_eq!(status, 202, "{accepted}");
    assert_eq!(accepted["status"], "accepted", "{accepted}");
    assert_eq!(accepted["txHash"], Value::Null, "not sent: {accepted}");
    assert!(waited >= Duration::from_secs(10), "answered after the hand-off wait: {waited:?}");
    let id = accepted["relayId"].as_str().unwrap().to_owned();
    let record = db.open().relay_by_id(&id).unwrap().unwrap();
    assert_eq!(record.lane, Some(keys[0].address()), "reserved on the holder's key");
    let (_, still) = standby.client.get(&format!("/relay/{id}")).await;
    assert_eq!(still["status"], "accepted", "{still}");
    cut.store(false, Ordering::SeqCst);
    let mined = standby.client.relay_until(&id, |relay| relay["status"] == "mined").await;
    assert_eq!(mined["relayerNonce"], 0, "{mined}");
    assert_eq!(holder.output().matches(SENT_HANDED_OFF).count(), 1, "sent by the holder");

    // The holder dies with two relays handed off to it.
    cut.store(true, Ordering::SeqCst);
    let pending = tokio::spawn({
        let (client, bodies) = (standby.client.clone(), [registration(&t, 1_801), registration(&t, 1_802)]);
        async move { join_all(bodies.iter().map(|body| client.relay(body))).await }
    });
    until_handed_off(&db, 2).await;
    let holder_log = holder.kill();
    let killed_at = Instant::now();
    for (status, answer) in pending.await.unwrap() {
        // Sent by the key's next holder within the wait (200), or past it (202).
        assert!(
            (status == 200 && answer["txHash"].is_string())
                || (status == 202 && answer["status"] == "accepted"),
            "{status} {answer}"
        );
        let id = answer["relayId"].as_str().unwrap();
        standby.client.relay_until(id, |relay| relay["status"] == "mined").await;
    }
    let sent_in = killed_at.elapsed();
    let (held, _) =
        holders_until(&standby.client, Duration::from_secs(1), |seen| count(seen, "standby-s") == 1).await;
    assert_books_exact(&t, &db, &standby.client, &keys, &funded, &signers).await;
    assert_eq!(
        tokio::task::block_in_place(|| db.database().unwrap().value("SELECT count(*) FROM handoffs")),
        "0"
    );

    let (clean, standby_log) = standby.terminate();
    assert!(clean, "{standby_log}");
    assert_eq!(
        holder_log.matches(SENT_HANDED_OFF).count(),
        1,
        "the dead holder sent only the first:\n{holder_log}"
    );
    assert_eq!(
        standby_log.matches(SENT_HANDED_OFF).count(),
        2,
        "the next holder sent the two:\n{standby_log}"
    );
    eprintln!(
        "handoffs: 202 after {waited:?}; the dead holder's two hand-offs mined {sent_in:?} after the kill (keys {held:?})"
    );
}

/// Starts H, which takes the one key, then two standbys S1 and S2, each with the settings `env`
/// gives for its `RELAYER_ID`; returns once every daemon sees H hold the key.
async fn holder_and_two_standbys(
    env: impl Fn(&str) -> Vec<(String, String)>,
) -> (BinaryRelayer, [BinaryRelayer; 2]) {
    let holder = BinaryRelayer::start(BINARY, &env("holder-h"));
    holders_until(&holder.client, Duration::from_secs(10), |seen| count(seen, "holder-h") == 1).await;
    let standbys =
        [BinaryRelayer::start(BINARY, &env("standby-s1")), BinaryRelayer::start(BINARY, &env("standby-s2"))];
    for standby in &standbys {
        holders_until(&standby.client, Duration::from_secs(10), |seen| count(seen, "holder-h") == 1).await;
    }
    (holder, standbys)
}

/// SPEC.md's 503 for a relayer key that cannot pay.
const BALANCE_TOO_LOW: &str = "Relayer balance too low. Please try again later or use direct mode.";

/// One key, held by H; S1 and S2 hold none (standbys). `MIN_BALANCE` is 0.000001 ETH, and the
/// key is left with exactly that (10^12 wei): enough for every daemon's balance check, far from
/// one registration's worst case, so anvil refuses H's send ("insufficient funds for gas *
/// price + value") and nothing is taken.
///
/// A registration sent to S1, another to S2 (both handed off to H), and a third to H itself all
/// get the same answer: 503 with SPEC.md's words for a key that cannot pay, never a 500. Each
/// relay ends `failed` with those words, nothing stays reserved (the budget's `usedWei` is 0 on
/// every daemon), the key's nonce and balance are untouched, and no request ran. The key funded
/// again, the same three requests are relayed through the same daemons, each mined once, and
/// the books equal the fees to the wei.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_the_node_refuses_answers_a_standbys_client_as_the_holders() {
    let t = TestChain::start().await;
    let keys: Vec<_> = cluster_keys(&t).await.into_iter().take(1).collect();
    let key = keys[0].address();
    let db = TestStore::new(Engine::Postgres);
    let env = |id: &str| {
        let mut env = daemon_env(&t, &db, &keys, id, 3);
        set(&mut env, "MIN_BALANCE", "0.000001");
        env
    };
    let (holder, standbys) = holder_and_two_standbys(env).await;
    let daemons = [&standbys[0], &standbys[1], &holder];
    let agents: [u64; 3] = [1_810, 1_811, 1_812];
    let signers: Vec<Address> = agents.iter().map(|n| agent_key(*n).address()).collect();

    let at_minimum = U256::from(1_000_000_000_000u64);
    anvil(&t, "anvil_setBalance", json!([key, at_minimum])).await;
    for (daemon, n) in daemons.iter().zip(agents) {
        let answer = daemon.client.relay(&registration(&t, n)).await;
        assert_eq!(answer, (503, json!({"error": BALANCE_TOO_LOW, "code": "balance_too_low"})), "agent {n}");
    }
    let records = db.open().records().unwrap();
    assert_eq!(records.len(), 3, "{records:?}");
    for record in &records {
        assert_eq!(record.status, kya_relayer::RelayStatus::Failed, "{record:?}");
        assert_eq!(record.error.as_deref(), Some(BALANCE_TOO_LOW), "{record:?}");
        // Its transaction was recorded before the node saw (and refused) it: kept for the
        // record, at no cost.
        assert_eq!(
            (record.lane, record.relayer_nonce, record.cost_wei),
            (Some(key), Some(0), Some(0)),
            "{record:?}"
        );
    }
    for daemon in daemons {
        let (_, status) = daemon.client.get("/status").await;
        assert_eq!(status["dailyGasBudget"]["usedWei"], "0", "nothing reserved: {status}");
    }
    assert_eq!(t.chain.provider().get_transaction_count(key).await.unwrap(), 0, "nothing taken");
    assert_eq!(balance(&t, key).await, at_minimum);
    for signer in &signers {
        assert_eq!(forwarder_nonce(&t, *signer).await, 0, "{signer}: its request never ran");
    }

    let funded = U256::from(10u128.pow(19));
    anvil(&t, "anvil_setBalance", json!([key, funded])).await;
    for (daemon, n) in daemons.iter().zip(agents) {
        let mined = relay_until_mined(&daemon.client, &registration(&t, n)).await;
        assert_eq!(mined["status"], "mined", "agent {n}: {mined}");
    }
    assert_books_exact(&t, &db, &holder.client, &keys, &[funded], &signers).await;
    for standby in standbys {
        let (clean, log) = standby.terminate();
        assert!(clean, "{log}");
    }
    let (clean, log) = holder.terminate();
    assert!(clean, "{log}");
}

/// One key, held by H; S1 and S2 hold none (standbys), as in the test above. The chain's block
/// gas limit is lowered (`anvil_setBlockGasLimit`) below the gas limit the daemons give a
/// registration but above what they estimate, so the node refuses H's send itself (a refusal
/// that is neither a nonce's nor the key's funds: "intrinsic gas too high"). A registration sent
/// to S1, another to S2 (both handed off to H) and a third to H itself are each answered what
/// H's own client gets: 500 with the fixed words, never 200 `sent`. Each relay ends `failed` at
/// cost 0 with those words, nothing stays reserved on any daemon, the key's nonce and balance are
/// untouched, and no request ran. The limit restored, the same requests are relayed through the
/// same daemons and mined once each; the books equal the fees to the wei.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_the_node_refuses_for_another_reason_answers_500_to_the_holders_and_the_standbys_clients() {
    let t = TestChain::start().await;
    let keys: Vec<_> = cluster_keys(&t).await.into_iter().take(1).collect();
    let key = keys[0].address();
    let funded: Vec<U256> = join_all(keys.iter().map(|key| balance(&t, key.address()))).await;
    let db = TestStore::new(Engine::Postgres);
    let (holder, standbys) = holder_and_two_standbys(|id| daemon_env(&t, &db, &keys, id, 3)).await;
    let daemons = [&standbys[0], &standbys[1], &holder];
    let agents: [u64; 3] = [1_830, 1_831, 1_832];
    let signers: Vec<Address> = agents.iter().map(|n| agent_key(*n).address()).collect();

    // 400,000 gas: above the registration's estimate, below the limit the daemons send with.
    anvil(&t, "anvil_setBlockGasLimit", json!(["0x61a80"])).await;
    for (daemon, n) in daemons.iter().zip(agents) {
        let answer = daemon.client.relay(&registration(&t, n)).await;
        assert_eq!(answer, (500, json!({ "error": RPC_FAILED, "code": "rpc_failed" })), "agent {n}");
    }
    let records = db.open().records().unwrap();
    assert_eq!(records.len(), 3, "{records:?}");
    for record in &records {
        assert_eq!(record.status, kya_relayer::RelayStatus::Failed, "{record:?}");
        assert_eq!(record.error.as_deref(), Some(RPC_FAILED), "{record:?}");
        // Its transaction was recorded before the node refused it: kept for the record, at no cost.
        assert_eq!(
            (record.lane, record.relayer_nonce, record.cost_wei),
            (Some(key), Some(0), Some(0)),
            "{record:?}"
        );
    }
    for daemon in daemons {
        let (_, status) = daemon.client.get("/status").await;
        assert_eq!(status["dailyGasBudget"]["usedWei"], "0", "nothing reserved: {status}");
    }
    assert_eq!(t.chain.provider().get_transaction_count(key).pending().await.unwrap(), 0, "nothing taken");
    assert_eq!(balance(&t, key).await, funded[0]);
    for signer in &signers {
        assert_eq!(forwarder_nonce(&t, *signer).await, 0, "{signer}: its request never ran");
    }

    anvil(&t, "anvil_setBlockGasLimit", json!(["0x1c9c380"])).await;
    for (daemon, n) in daemons.iter().zip(agents) {
        let mined = relay_until_mined(&daemon.client, &registration(&t, n)).await;
        assert_eq!(mined["status"], "mined", "agent {n}: {mined}");
    }
    assert_books_exact(&t, &db, &holder.client, &keys, &funded, &signers).await;
    for standby in standbys {
        let (clean, log) = standby.terminate();
        assert!(clean, "{log}");
        assert!(!log.contains(db.password().unwrap()), "the password never shows");
    }
    let (clean, log) = holder.terminate();
    assert!(clean, "{log}");
    assert!(log.contains("intrinsic gas too high"), "the node's words, in the holder's log only: {log}");
    assert_eq!(log.matches(SENT_HANDED_OFF).count(), 2, "the standbys' two, sent by the holder:\n{log}");
    assert!(!log.contains(db.password().unwrap()), "the password never shows");
}

/// A node in front of anvil that holds each `eth_sendRawTransaction` until `open` is set (a
/// holder slower than a standby's wait, for as long as the test says), announcing each on
/// `arrived` as it comes in; every other call goes straight through. Its URL.
async fn node_holding_sends(
    t: &TestChain,
    open: watch::Receiver<bool>,
    arrived: mpsc::UnboundedSender<()>,
) -> String {
    let (upstream, http) = (t.rpc_url(), kya_tests::http_client());
    rpc_proxy::start(
        Some(upstream.clone()),
        Arc::new(move |request: &str| {
            if !request.contains("eth_sendRawTransaction") {
                return RpcAction::Forward(request.to_owned());
            }
            let (mut open, arrived) = (open.clone(), arrived.clone());
            let (http, upstream, request) = (http.clone(), upstream.clone(), request.to_owned());
            RpcAction::Later(Later(Box::pin(async move {
                let _ = arrived.send(());
                let _ = open.wait_for(|open| *open).await;
                rpc_proxy::post(&http, &upstream, request).await
            })))
        }),
    )
    .await
}

/// One key, held by H, whose node holds its sends until the test lets them through; S holds
/// none and waits 2 s (`RELAYER_HANDOFF_WAIT_SECS`) for H to send what it hands off.
///
/// A registration sent to S is handed off to H, which records its transaction and submits it;
/// the node holds it. Past S's wait the client is answered 202 with the relay's id, status
/// `accepted` and no hash (what the OpenAPI document's 202 says), never 200 `sent`: the node has
/// no transaction of the key (the code before answered 200 `sent` with the recorded hash, as soon
/// as any daemon's retention pass deleted the hand-off of a relay recorded as sent, or at the end
/// of the wait). Then the block gas limit is lowered and the held send let through: the node
/// refuses it, and the relay S answered 202 for reads `failed` with H's words at cost 0; nothing
/// is reserved, the key's nonce and balance are untouched, and the request never ran. The limit
/// restored, the same request sent to S again is mined once, and the books equal the fee to the
/// wei.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_slower_than_the_handoff_wait_gets_the_standbys_client_202_never_200_before_the_node_has_it()
{
    let t = TestChain::start().await;
    let keys: Vec<_> = cluster_keys(&t).await.into_iter().take(1).collect();
    let key = keys[0].address();
    let funded: Vec<U256> = join_all(keys.iter().map(|key| balance(&t, key.address()))).await;
    let db = TestStore::new(Engine::Postgres);
    let (open, held) = watch::channel(false);
    let (arrived, mut arrivals) = mpsc::unbounded_channel();
    let node = node_holding_sends(&t, held, arrived).await;
    let mut env_h = daemon_env(&t, &db, &keys, "holder-h", 3);
    set(&mut env_h, "RPC_URL", node);
    let holder = BinaryRelayer::start(BINARY, &env_h);
    holders_until(&holder.client, Duration::from_secs(10), |seen| count(seen, "holder-h") == 1).await;
    let mut env_s = daemon_env(&t, &db, &keys, "standby-s", 3);
    set(&mut env_s, "RELAYER_HANDOFF_WAIT_SECS", "2");
    let standby = BinaryRelayer::start(BINARY, &env_s);
    holders_until(&standby.client, Duration::from_secs(10), |seen| count(seen, "holder-h") == 1).await;
    let signer = agent_key(1_840).address();

    let asked_at = Instant::now();
    let asking = tokio::spawn({
        let (client, body) = (standby.client.clone(), registration(&t, 1_840));
        async move { client.relay(&body).await }
    });
    tokio::time::timeout(Duration::from_secs(20), arrivals.recv())
        .await
        .expect("the holder submits the relay handed off to it")
        .unwrap();
    let (status, answer) = asking.await.unwrap();
    let waited = asked_at.elapsed();
    let record = db.open().records().unwrap().pop().unwrap();
    assert_eq!(
        (status, &answer),
        (
            202,
            &json!({
                "txHash": null,
                "from": signer.to_checksum(None),
                "nonce": "0",
                "relayId": record.relay_id,
                "status": "accepted"
            })
        ),
        "the node does not have it yet (answered after {waited:?})"
    );
    assert!(waited >= Duration::from_secs(2), "answered after the hand-off wait: {waited:?}");
    // Recorded (before its submission), not with the node.
    assert_eq!(record.status, kya_relayer::RelayStatus::Sent, "{record:?}");
    assert_eq!((record.lane, record.relayer_nonce), (Some(key), Some(0)), "{record:?}");
    let hash = record.tx_hash.unwrap();
    assert!(
        t.chain.provider().get_transaction_by_hash(hash).await.unwrap().is_none(),
        "{hash} not with the node"
    );
    assert_eq!(t.chain.provider().get_transaction_count(key).pending().await.unwrap(), 0);

    // The node refuses the held send: the relay answered 202 fails, and nothing is taken.
    anvil(&t, "anvil_setBlockGasLimit", json!(["0x61a80"])).await;
    open.send(true).unwrap();
    let failed = standby.client.relay_until(&record.relay_id, |relay| relay["status"] != "sent").await;
    assert_eq!(
        (&failed["status"], &failed["error"], &failed["costWei"]),
        (&json!("failed"), &json!(RPC_FAILED), &json!("0")),
        "{failed}"
    );
    for daemon in [&standby, &holder] {
        let (_, status) = daemon.client.get("/status").await;
        assert_eq!(status["dailyGasBudget"]["usedWei"], "0", "nothing reserved: {status}");
    }
    assert_eq!(t.chain.provider().get_transaction_count(key).pending().await.unwrap(), 0, "nothing taken");
    assert_eq!(balance(&t, key).await, funded[0]);
    assert_eq!(forwarder_nonce(&t, signer).await, 0, "the request never ran");

    anvil(&t, "anvil_setBlockGasLimit", json!(["0x1c9c380"])).await;
    let mined = relay_until_mined(&standby.client, &registration(&t, 1_840)).await;
    assert_eq!(mined["status"], "mined", "{mined}");
    assert_books_exact(&t, &db, &standby.client, &keys, &funded, &[signer]).await;
    let (clean, log) = standby.terminate();
    assert!(clean, "{log}");
    let (clean, log) = holder.terminate();
    assert!(clean, "{log}");
    assert!(log.contains("intrinsic gas too high"), "the node's words, in the holder's log only: {log}");
    assert_eq!(log.matches(SENT_HANDED_OFF).count(), 1, "the holder sent one relay:\n{log}");
    eprintln!("handoffs: a slow holder's relay answered 202 after {waited:?}");
}

/// The 500 of a send the node refused for a reason other than a nonce or the key's funds.
const RPC_FAILED: &str = "RPC request failed; try again later";

/// How much of the chain a holder's node lets through ([`node_partly_cut`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Nothing: every call's connection is closed.
    None,
    /// Every read but the head block (`eth_getBlockByNumber`), and no send: the reconciler can
    /// read the key's and the signer's nonces, the hand-off sender (which reads the head first)
    /// cannot send. The order in which a node coming back serves the two, fixed for the test.
    NoncesOnly,
    /// Everything.
    All,
}

/// A node in front of anvil that lets through what `reach` says, and counts on `mined_nonce_reads`
/// the reads of an account's mined nonce (`eth_getTransactionCount` at `latest`: each reconciler
/// pass makes one per key, first) it forwards. Its URL.
async fn node_partly_cut(
    t: &TestChain,
    reach: watch::Receiver<Reach>,
    mined_nonce_reads: Arc<std::sync::atomic::AtomicUsize>,
) -> String {
    rpc_proxy::start(
        Some(t.rpc_url()),
        Arc::new(move |request: &str| {
            let forwarded = match *reach.borrow() {
                Reach::None => false,
                Reach::NoncesOnly => {
                    !request.contains("eth_getBlockByNumber") && !request.contains("eth_sendRawTransaction")
                }
                Reach::All => true,
            };
            if !forwarded {
                return RpcAction::Close;
            }
            if request.contains("eth_getTransactionCount") && request.contains("latest") {
                mined_nonce_reads.fetch_add(1, Ordering::SeqCst);
            }
            RpcAction::Forward(request.to_owned())
        }),
    )
    .await
}

/// One key, held by H, whose node is unreachable; S holds none and waits 2 s. H's reconciler
/// looks every second at relays older than 1 s.
///
/// A registration sent to S is handed off to H, which cannot send it: S answers 202 with the
/// relay's id, status `accepted` and no hash after its wait (a clear answer, no hang). Then H's
/// node lets the nonces through but not yet the head block, so H's reconciler reads the chain
/// (three passes, counted at the node) while its hand-off sender still cannot send: the relay
/// stays `accepted` and handed off, not dropped (the code before dropped it as "never sent",
/// and the client that was told 202 found its request `dropped`). The node back, H sends it:
/// mined once at the key's nonce 0, sent once by H, no hand-off left, the books exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_waits_for_its_holders_node_and_is_sent_once_not_dropped_by_the_reconciler() {
    let t = TestChain::start().await;
    let keys: Vec<_> = cluster_keys(&t).await.into_iter().take(1).collect();
    let key = keys[0].address();
    let funded: Vec<U256> = join_all(keys.iter().map(|key| balance(&t, key.address()))).await;
    let db = TestStore::new(Engine::Postgres);
    let (reach, reaching) = watch::channel(Reach::All);
    let mined_nonce_reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let node = node_partly_cut(&t, reaching, Arc::clone(&mined_nonce_reads)).await;
    let mut env_h = daemon_env(&t, &db, &keys, "holder-h", 3);
    set(&mut env_h, "RPC_URL", node);
    set(&mut env_h, "RECONCILE_GRACE_SECS", "1");
    let holder = BinaryRelayer::start(BINARY, &env_h);
    holders_until(&holder.client, Duration::from_secs(10), |seen| count(seen, "holder-h") == 1).await;
    let mut env_s = daemon_env(&t, &db, &keys, "standby-s", 3);
    set(&mut env_s, "RELAYER_HANDOFF_WAIT_SECS", "2");
    let standby = BinaryRelayer::start(BINARY, &env_s);
    holders_until(&standby.client, Duration::from_secs(10), |seen| count(seen, "holder-h") == 1).await;
    let signer = agent_key(1_850).address();

    reach.send(Reach::None).unwrap();
    let asked_at = Instant::now();
    let (status, answer) = standby.client.relay(&registration(&t, 1_850)).await;
    let waited = asked_at.elapsed();
    let id = answer["relayId"].as_str().unwrap_or_default().to_owned();
    assert_eq!(
        (status, &answer),
        (
            202,
            &json!({"txHash": null, "from": signer.to_checksum(None), "nonce": "0", "relayId": id, "status": "accepted"})
        )
    );
    assert!(waited >= Duration::from_secs(2), "answered after the hand-off wait: {waited:?}");

    // The holder's reconciler reads the chain again (three passes, or until the relay changed);
    // its hand-off sender cannot send yet.
    let before = mined_nonce_reads.load(Ordering::SeqCst);
    reach.send(Reach::NoncesOnly).unwrap();
    let started = Instant::now();
    let waiting = loop {
        let (_, relay) = standby.client.get(&format!("/relay/{id}")).await;
        if relay["status"] != "accepted" || mined_nonce_reads.load(Ordering::SeqCst) >= before + 3 {
            break relay;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the holder's reconciler never read the key's nonce"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!((&waiting["status"], &waiting["error"]), (&json!("accepted"), &Value::Null), "{waiting}");
    assert_eq!(
        tokio::task::block_in_place(|| db.database().unwrap().value("SELECT count(*) FROM handoffs")),
        "1",
        "still handed off"
    );

    reach.send(Reach::All).unwrap();
    let mined = standby
        .client
        .relay_until(&id, |relay| relay["status"] != "accepted" && relay["status"] != "sent")
        .await;
    assert_eq!((&mined["status"], &mined["relayerNonce"]), (&json!("mined"), &json!(0)), "{mined}");
    assert_books_exact(&t, &db, &standby.client, &keys, &funded, &[signer]).await;
    assert_eq!(t.chain.provider().get_transaction_count(key).await.unwrap(), 1, "sent once");
    assert_eq!(db.open().records().unwrap().len(), 1, "one relay of the request");
    let (clean, log) = standby.terminate();
    assert!(clean, "{log}");
    let (clean, log) = holder.terminate();
    assert!(clean, "{log}");
    assert_eq!(log.matches(SENT_HANDED_OFF).count(), 1, "sent by the holder, once:\n{log}");
}

/// Why the key's holder dropped a relay handed off unsent (the daemon's words).
const PAST_DEADLINE: &str = "its request's deadline passed while it waited for its key's holder";

/// One key, held by H, whose node is unreachable; S holds none, waits 2 s, and (with
/// `DEADLINE_MARGIN_SECS=0`) accepts a request whose deadline is 60 s after the chain's head.
///
/// The registration is handed off to H, which cannot send it: S answers 202. The chain's clock
/// then moves 120 s on, past the deadline, and H's node comes back: H drops the relay unsent
/// (`dropped`, with the reason, at cost 0) rather than sending a transaction the forwarder would
/// revert at the relayer's cost; nothing is reserved or taken, the request never ran, no hand-off
/// is left. The same signer's request without a deadline is then relayed through S and mined
/// once; the books equal the fee to the wei.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_whose_deadline_passes_while_its_holders_node_is_away_is_dropped_not_sent() {
    let t = TestChain::start().await;
    let keys: Vec<_> = cluster_keys(&t).await.into_iter().take(1).collect();
    let key = keys[0].address();
    let funded: Vec<U256> = join_all(keys.iter().map(|key| balance(&t, key.address()))).await;
    let db = TestStore::new(Engine::Postgres);
    let (reach, reaching) = watch::channel(Reach::All);
    let node = node_partly_cut(&t, reaching, Arc::new(std::sync::atomic::AtomicUsize::new(0))).await;
    let mut env_h = daemon_env(&t, &db, &keys, "holder-h", 3);
    set(&mut env_h, "RPC_URL", node);
    let holder = BinaryRelayer::start(BINARY, &env_h);
    holders_until(&holder.client, Duration::from_secs(10), |seen| count(seen, "holder-h") == 1).await;
    let mut env_s = daemon_env(&t, &db, &keys, "standby-s", 3);
    set(&mut env_s, "RELAYER_HANDOFF_WAIT_SECS", "2");
    set(&mut env_s, "DEADLINE_MARGIN_SECS", "0");
    let standby = BinaryRelayer::start(BINARY, &env_s);
    holders_until(&standby.client, Duration::from_secs(10), |seen| count(seen, "holder-h") == 1).await;
    let agent = agent_key(1_860);

    let head = t.chain.latest_timestamp().await.unwrap();
    reach.send(Reach::None).unwrap();
    let (status, answer) = standby.client.relay(&abuse::registration(&t, &agent, 0, head + 60)).await;
    assert_eq!(
        (status, &answer["status"], &answer["txHash"]),
        (202, &json!("accepted"), &Value::Null),
        "{answer}"
    );
    let id = answer["relayId"].as_str().unwrap().to_owned();
    anvil(&t, "evm_increaseTime", json!([120])).await;
    anvil(&t, "evm_mine", json!([])).await;
    reach.send(Reach::All).unwrap();
    let dropped = standby.client.relay_until(&id, |relay| relay["status"] != "accepted").await;
    assert_eq!(
        (&dropped["status"], &dropped["error"], &dropped["costWei"], &dropped["txHash"]),
        (&json!("dropped"), &json!(PAST_DEADLINE), &json!("0"), &Value::Null),
        "{dropped}"
    );
    until_handed_off(&db, 0).await;
    for daemon in [&standby, &holder] {
        let (_, status) = daemon.client.get("/status").await;
        assert_eq!(status["dailyGasBudget"]["usedWei"], "0", "nothing reserved: {status}");
    }
    assert_eq!(t.chain.provider().get_transaction_count(key).pending().await.unwrap(), 0, "nothing sent");
    assert_eq!(balance(&t, key).await, funded[0]);
    assert_eq!(forwarder_nonce(&t, agent.address()).await, 0, "the request never ran");

    let mined = relay_until_mined(&standby.client, &abuse::registration(&t, &agent, 0, 0)).await;
    assert_eq!(mined["status"], "mined", "{mined}");
    assert_books_exact(&t, &db, &standby.client, &keys, &funded, &[agent.address()]).await;
    let (clean, log) = standby.terminate();
    assert!(clean, "{log}");
    let (clean, log) = holder.terminate();
    assert!(clean, "{log}");
    assert_eq!(log.matches("a relay handed off expired unsent; dropped").count(), 1, "{log}");
    assert_eq!(log.matches(SENT_HANDED_OFF).count(), 1, "only the request without a deadline sent:\n{log}");
}
